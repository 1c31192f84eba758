"""Seed 02's resource counters behind one interface: a registry by name and a base class.

A *counter item* holds two numbers that always sum to its capacity:

    reserved   what has been taken (never above capacity)
    available  what is left        (never below 0)

``apply(key, delta, token=..., bounded=True)`` adds a signed ``delta`` to ``reserved`` (and
``-delta`` to ``available``) in one write. ``bounded`` adds the thresholds as conditions:
a positive delta needs ``available >= delta`` (the ceiling: never above capacity), a
negative one needs ``reserved >= -delta`` (the floor: never below 0). Keeping both numbers
lets DynamoDB check either threshold without arithmetic on attributes.

``marker`` only takes (positive deltas): its give-back is [`Approach.release_update`][counters.primitives.approaches.Approach.release_update]
inside a transaction guarded by the marker's status, which every approach also offers.

Every approach returns a [`TakeResult`][counters.primitives.approaches.TakeResult], a
[`counters.core.outcome.Result`][counters.core.outcome.Result] whose ``value`` is always a
[`TakeFacts`][counters.primitives.approaches.TakeFacts] (where the quantity is held, the record that
answered, what was left), never a dict:

``applied``    this call changed the counter
``duplicate``  an earlier call with the same ``token`` already did (approaches that remember tokens)
``rejected``   definitely not applied; ``reason`` (a [`Reason`][counters.primitives.approaches.Reason]) is ``threshold`` (``value.available`` or
               ``value.reserved`` tells what was left), ``missing`` (no counter item),
               ``set_full`` or ``token_mismatch`` (the token was used for a different request)
``contention`` conflicts/throttling outlasted the retry budget; nothing known to have applied
``ambiguous``  only ``atomic`` and ``occ``: it may or may not have applied (see their docstrings)

| name | module | remembers tokens | exact | shardable | take needs transactions |
|---|---|---|---|---|---|
| ``atomic`` | [`atomic`][counters.primitives.approaches.atomic] | no | no (policy ``over``/``under``) | yes | no |
| ``occ`` | [`occ`][counters.primitives.approaches.occ] | no | no (ambiguous on a third tag) | no | no |
| ``occ_history`` | [`occ_history`][counters.primitives.approaches.occ_history] | last N writers | within N writes | no | no |
| ``crt`` | [`crt`][counters.primitives.approaches.crt] | 10 minutes (DynamoDB) | within the window | yes | yes |
| ``marker`` | [`marker`][counters.primitives.approaches.marker] | marker item (TTL) | yes | yes | yes |
| ``set`` | [`set`][counters.primitives.approaches.set] | the token set | yes (bounded size) | no | no |

Each is registered once, in [`REGISTRY`][counters.primitives.approaches.REGISTRY]: its name, the refusal
that names it where its take cannot run, and its settings ([`Option`][counters.primitives.approaches.Option]:
a constructor keyword read from an environment variable). Its module holds everything else: its class's
flags, the attributes it keeps on a counter item (``attributes``; the store reads them back as
[`Counter.state`][counters.store.resources_counters.Counter.state]) and the writes that set them. The
services, proofs, benches, tests and docs read the registry (tests/unit/test_reservations_units.py keeps
the table above equal to [`table`][counters.primitives.approaches.table]).

Approach 6 of the seed (counting with an item collection, a ledger) is not one of these: it has
no counter item and its own interface (append, balance, compact), in the package
[`counters.primitives.ledger`][counters.primitives.ledger] ([docs/ledgers.md](../ledgers.md)).

The counter items' keys, the two numbers and the writes every approach shares live in
[`counters.store.resources_counters`][counters.store.resources_counters]; the calls are the
[`ResourceStore`][counters.store.resources.ResourceStore]'s, which an approach is given (the service's,
with its Region policy); an approach decides which writes to make and what their answers mean.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from enum import StrEnum
from typing import Any, ClassVar

from counters.core.client import DynamoDBClient
from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified, RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.core.settings import SettingsError
from counters.store.expr import Update
from counters.store.resources import ResourceStore, Taken
from counters.store.resources_counters import AVAILABLE, RESERVED, Counter, Fields, Key, give_back, quota_adjust
from counters.store.resources_records import Record


@dataclass(frozen=True)
class Option:
    """One setting of an approach: its constructor keyword ``name``, read from the environment variable
    ``env`` (unset or empty: ``default``; the value's type is the default's; ``choices``: the only values)."""

    name: str
    env: str
    default: int | str
    doc: str = ""
    choices: tuple[str, ...] = ()

    def read(self, environ: Mapping[str, str]) -> int | str:
        """The value ``environ`` gives (``SettingsError`` naming the variable when it is not one)."""
        raw = environ.get(self.env) or ""
        if not raw:
            return self.default
        if self.choices and raw not in self.choices:
            raise SettingsError(f"{self.env} must be {' or '.join(self.choices)}")
        try:
            return type(self.default)(raw)
        except ValueError:
            raise SettingsError(f"{self.env}={raw!r} is not a valid {type(self.default).__name__}") from None


@dataclass(frozen=True)
class Registered:
    """One approach of the [`REGISTRY`][counters.primitives.approaches.REGISTRY]: its name (its module
    ``counters.primitives.approaches.<name>``, whose ``APPROACH`` is its class) and what it needs of the table."""

    name: str
    refusal: str | None = None
    """The operation of the resources' table ([`counters.store.resources_counters`][counters.store.resources_counters]) refusing it where its take cannot run (its
    take is a ``TransactWriteItems``); ``None``: it takes with one conditional write, anywhere."""
    options: tuple[Option, ...] = ()
    """Its settings: keywords of its constructor, each read from its environment variable."""

    def settings(self, environ: Mapping[str, str]) -> dict[str, int | str]:
        """Its constructor's keywords as ``environ`` sets them."""
        return {option.name: option.read(environ) for option in self.options}

    def make(self, store: ResourceStore, **options: Any) -> Approach:
        """The approach on ``store`` (the service's: its table, client, retry budget and Region policy)."""
        return self.cls(store, **options)

    @property
    def cls(self) -> type[Approach]:
        """Its class (the module's ``APPROACH``), its module imported on first use."""
        module = importlib.import_module(f"counters.primitives.approaches.{self.name}")
        found: type[Approach] = module.APPROACH
        return found


REGISTRY: Mapping[str, Registered] = {
    entry.name: entry
    for entry in (
        Registered("atomic", options=(Option("policy", "ATOMIC_POLICY", "under", "after an unknown outcome", ("under", "over")),)),
        Registered("occ"),
        Registered("occ_history", options=(Option("history", "OCC_HISTORY", 32, "the writers the chain keeps"),)),
        Registered("crt", refusal="take:crt"),
        Registered("marker", refusal="take:marker"),
        Registered("set", options=(Option("max_tokens", "SET_MAX_TOKENS", 250, "the most live tokens an item holds"),)),
    )
}
"""Every approach, registered once, in the seed's order: a new one adds its module, a row here, its
row of the table above and its tests; everything that lists approaches reads this."""

NAMES = tuple(REGISTRY)
"""The approaches' names, in the seed's order."""


def names(*, keyed: bool | None = None, shardable: bool | None = None, transactional: bool | None = None) -> tuple[str, ...]:
    """The registered names, in order, whose approach has these traits (``None``: either): ``keyed``, it
    needs a request token; ``shardable``; ``transactional``, its take is a transaction (its entry names a refusal)."""
    return tuple(
        name
        for name, entry in REGISTRY.items()
        if keyed in (None, entry.cls.needs_token)
        and shardable in (None, entry.cls.shardable)
        and transactional in (None, entry.refusal is not None)
    )


def variants(name: str) -> list[dict[str, int | str]]:
    """One set of options per choice of the approach's settings that have choices (atomic: ``under``,
    ``over``); ``[{}]`` for one with none: what a proof runs once each."""
    found: list[dict[str, int | str]] = [{}]
    for option in REGISTRY[name].options:
        if option.choices:
            found = [{**done, option.name: choice} for done in found for choice in option.choices]
    return found


def settings(environ: Mapping[str, str]) -> dict[str, dict[str, int | str]]:
    """Every approach's constructor keywords as ``environ`` sets them (the reservations' settings)."""
    return {name: entry.settings(environ) for name, entry in REGISTRY.items() if entry.options}


def table() -> str:
    """The table of the module's page, one row per registered approach, from each class's flags and docstring."""
    rows = ["| name | module | remembers tokens | exact | shardable | take needs transactions |", "|---|---|---|---|---|---|"]
    for name, entry in REGISTRY.items():
        cls = entry.cls
        cells = [f"``{name}``", f"[`{name}`][counters.primitives.approaches.{name}]", *cls.traits]
        cells += ["yes" if cls.shardable else "no", "yes" if entry.refusal else "no"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


class Reason(StrEnum):
    """Why an approach answered as it did (``Result.reason``); the values are what logs and tests see."""

    THRESHOLD = "threshold"
    MISSING = "missing"
    SET_FULL = "set_full"
    TOKEN_MISMATCH = "token_mismatch"  # noqa: S105  # a reason code, not a secret
    MARKER_EXISTS = "marker_exists"
    MARKER_VANISHED = "marker_vanished"
    NOT_RETRIED = "not_retried"
    RETRIED_AFTER_UNKNOWN = "retried_after_unknown"
    UNKNOWN_THEN_REJECTED = "unknown_then_rejected"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CONFIRMED_AFTER_UNKNOWN = "confirmed_after_unknown"
    CONFIRMED_AFTER_RESEND = "confirmed_after_resend"
    THIRD_TAG = "third_tag"
    FOUND_IN_CHAIN = "found_in_chain"
    FELL_OFF_CHAIN = "fell_off_chain"
    SPLIT_TOKEN_USED = "split_token_used"  # noqa: S105  # a reason code, not a secret
    TOKEN_IN_SET = "token_in_set"  # noqa: S105  # a reason code, not a secret
    TOKEN_NOT_IN_SET = "token_not_in_set"  # noqa: S105  # a reason code, not a secret


@dataclass(frozen=True)
class TakeFacts:
    """What an approach's answer says besides its outcome: the ``value`` of every
    [`TakeResult`][counters.primitives.approaches.TakeResult] (each field ``None`` when the answer does not tell)."""

    allocation: Mapping[str, int] | None = None
    """Where the quantity is held: each part by its counter item's partition key (a take that
    applied over shards or with a marker, or a duplicate its record answered)."""
    marker: Record | None = None
    """The reservation record already there when its condition decided (``duplicate``, ``token_mismatch``)."""
    available: int | None = None
    """What the counter (or every shard together) had left when the threshold refused the take."""
    reserved: int | None = None
    """What the counter (or every shard together) held when the threshold refused the take."""

    @classmethod
    def left(cls, counter: Counter) -> TakeFacts:
        """What a threshold rejection reports: the counter's two numbers."""
        return cls(available=counter.available, reserved=counter.reserved)

    def held(self, allocation: Mapping[str, int]) -> TakeFacts:
        """These facts with ``allocation`` as where the quantity is held, unless they already say."""
        return self if self.allocation is not None else replace(self, allocation=dict(allocation))


NO_FACTS = TakeFacts()
"""An answer that tells nothing beyond its outcome (``contention``, an ``applied`` write of one item...)."""


@dataclass
class TakeResult(Result):
    """What every approach (and [`counters.primitives.sharding.take`][counters.primitives.sharding.take]) returns:
    a [`Result`][counters.core.outcome.Result] whose ``value`` is typed, never a dict."""

    value: TakeFacts = field(default_factory=TakeFacts)
    """The answer's facts ([`TakeFacts`][counters.primitives.approaches.TakeFacts])."""


def rejection(old: Counter | None) -> tuple[Reason, TakeFacts]:
    """Why a guarded write failed, from the counter item it found (``ALL_OLD``)."""
    if old is None:
        return Reason.MISSING, NO_FACTS
    return Reason.THRESHOLD, TakeFacts.left(old)


Plan = Callable[[Counter | None, int], Resend | Stop]
Lost = Callable[[Report, Classified], Resend | Stop | None]


class Approach:
    """One way of applying a delta to a counter item (seed 02). Subclasses set the class flags."""

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False
    """Duplicates and unknown outcomes never change the count twice (within the stated bound)."""
    needs_token: ClassVar[bool] = False
    """``apply`` requires a request token (it is how duplicates are recognised)."""
    shardable: ClassVar[bool] = False
    """Supports ``apply_split`` (one transaction over several shard items)."""
    writes_record: ClassVar[bool] = False
    """The write itself stores the reservation record (the marker)."""
    attributes: ClassVar[tuple[str, ...]] = ()
    """What it keeps on a counter item besides ``reserved`` and ``available`` (its own attribute names)."""
    traits: ClassVar[tuple[str, str]] = ("no", "no")
    """What it remembers of a request and how exact it is, as the module's table says them."""

    def __init__(self, store: ResourceStore) -> None:
        self.store = store
        self.table_name = store.table_name
        self.retry = store.retry

    @classmethod
    def promise(cls, **options: Any) -> str:
        """What the docs promise after failures with these options: ``exact`` (within its bound) or ``under``."""
        return "exact" if cls.exact else "under"

    # -- the interface -----------------------------------------------------------------------
    def initial_attributes(self, capacity: int) -> dict[str, object]:
        """The attributes a new counter item starts with (``reserved`` 0, ``available`` capacity)."""
        return {RESERVED: 0, AVAILABLE: capacity}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """Add ``delta`` to the counter item at ``key``.

        ``token`` is the request's token (how approaches that remember tokens see a duplicate);
        ``record`` the reservation record's fields: an approach that can write them in the same
        transaction as the take does (``writes_record``: marker; crt's split), the others leave
        the record to the caller."""
        raise NotImplementedError

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> TakeResult:
        """Apply several positive deltas to several counter items in ONE transaction. ``round_``
        is the planner's round ([`counters.primitives.sharding.take`][counters.primitives.sharding.take]): a new plan is a new
        request, so an approach keyed by request tokens (crt) derives a fresh one per round."""
        raise NotImplementedError(f"{self.name} does not support write sharding")

    def release_update(self, key: Key, quantity: int, token: str) -> Update:
        """A transaction's Update giving ``quantity`` back (the caller adds its own guard)."""
        return give_back(self.table_name, key, quantity)

    def give_back_token(self, token: str) -> str:
        """The token a give-back made with [`apply`][counters.primitives.approaches.Approach.apply] (MRSC: no transaction) carries: the
        approaches that remember tokens recognise a re-sent give-back by it."""
        return f"release:{token}"

    def quota_update(self, key: Key, delta: int, token: str) -> Update:
        """An escrow transfer's Update moving ``delta`` of capacity on the counter item (``available``
        and ``capacity``; a debit never below what is available), marked as this approach marks
        every change (occ: a new tag; occ_history: the next version and the transfer's tag), so an
        optimistic write planned before it fails its condition instead of overwriting it."""
        return quota_adjust(self.table_name, key, delta)

    def shard_order(self, count: int, token: str | None, rng: random.Random) -> list[int]:
        """Which shard to try first, then the others (random start; crt overrides)."""
        start = rng.randrange(count)
        return [(start + i) % count for i in range(count)]

    # -- helpers -------------------------------------------------------------------------------
    def optimistic(self, key: Key, capacity: Capacity, plan: Plan, lost: Lost, unknown: Lost) -> TakeResult:
        """Read, then write conditioned on what was read (occ, occ_history): ``plan(counter, attempts)``
        gives the first write ([`Resend`][counters.core.engine.Resend] of an ``Update``'s params) or
        the verdict the read already gives ([`Stop`][counters.core.engine.Stop]); ``lost``/``unknown``
        are the engine's hooks for a lost race and an unknown outcome."""
        first = plan(self.store.counter(key, capacity), 1)
        if isinstance(first, Stop):
            return verdict(first.value)

        def lost_then_reread(report: Report, failure: Classified) -> Resend | Stop | None:
            # The winner's item (ALL_OLD) decides at once what it can (our own write, the
            # threshold); the next write is planned from a read made after the backoff: one
            # planned from ALL_OLD would be as old as the backoff and lose again to whoever
            # wrote meanwhile (occ_history, 32 clients: 70% of calls succeeded, 93% re-reading).
            answer = lost(report, failure)
            if isinstance(answer, Resend):
                return Resend(refresh=lambda: plan(self.store.counter(key, capacity), report.attempts))
            return answer

        report = self.store.write_counter(first.params or {}, capacity=capacity, on_condition=lost_then_reread, on_unknown=unknown)
        if report.stopped:
            return verdict(report.value)
        # conflict/throttle/not sent are retried by the engine (a stale read is caught by the write's condition)
        return result(report.outcome, capacity, report.attempts)

    def recorded(self, taken: Taken, token: str, quantity: int) -> TakeResult | None:
        """A transaction that Put the reservation record was cancelled: if the record's condition
        failed, the record already there decides - the same quantity is ``duplicate`` (an earlier
        attempt or request with this token committed), another one ``token_mismatch``. ``None``
        when the record was not why."""
        if not taken.record_failed:
            return None
        capacity, attempts = taken.capacity, taken.attempts
        existing = taken.record or self.store.record(token, capacity)
        if existing is None:  # removed between the two calls: the counter decides next time
            return result(Outcome.CONTENTION, capacity, attempts, Reason.MARKER_VANISHED)
        if existing.quantity != quantity:
            return result(Outcome.REJECTED, capacity, attempts, Reason.TOKEN_MISMATCH, TakeFacts(marker=existing))
        return result(
            Outcome.DUPLICATE, capacity, attempts, Reason.MARKER_EXISTS, TakeFacts(allocation=existing.allocation, marker=existing)
        )

    def require_token(self, token: str | None) -> str:
        """``token``, or ``ValueError`` if the approach needs one and has none."""
        if not token:
            raise ValueError(f"the {self.name} approach needs a request token")
        return token


def approach_class(name: str) -> type[Approach]:
    """The Approach subclass registered under ``name`` (modules imported on first use)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown approach {name!r}; one of {NAMES}")
    return REGISTRY[name].cls


def create(
    name: str, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None, **options: Any
) -> Approach:
    """An approach by name on a store of its own on a single-Region table (tests, benches; a service
    hands its own store to [`Registered.make`][counters.primitives.approaches.Registered.make]);
    ``options`` are its constructor's (e.g. ``policy``)."""
    return approach_class(name)(ResourceStore(table_name, dynamodb=dynamodb, retry=retry), **options)


def verdict(value: object) -> TakeResult:
    """The answer a hook's [`Stop`][counters.core.engine.Stop] carried (built by [`result`][counters.primitives.approaches.result])."""
    if not isinstance(value, TakeResult):
        raise TypeError(f"a hook stopped with {value!r}, not a TakeResult")
    return value


def result(outcome: Outcome, capacity: Capacity, attempts: int, reason: StrEnum | None = None, facts: TakeFacts = NO_FACTS) -> TakeResult:
    """An approach's answer; ``reason`` is its own enum ([`Reason`][counters.primitives.approaches.Reason], or e.g. sharding's)."""
    return TakeResult(outcome, reason=reason, capacity=capacity, attempts=attempts, value=facts)


def allocation_of(parts: list[tuple[Key, int]]) -> dict[str, int]:
    """A split's allocation: each part's quantity by its counter item's partition key."""
    return {key["PK"]: part for key, part in parts}
