"""Seed 02's resource counters behind one interface: a registry by name and a base class.

A *counter item* holds two numbers that always sum to its capacity::

    reserved   what has been taken (never above capacity)
    available  what is left        (never below 0)

``apply(key, delta, token=..., bounded=True)`` adds a signed ``delta`` to ``reserved`` (and
``-delta`` to ``available``) in one write. ``bounded`` adds the thresholds as conditions:
a positive delta needs ``available >= delta`` (the ceiling: never above capacity), a
negative one needs ``reserved >= -delta`` (the floor: never below 0). Keeping both numbers
lets DynamoDB check either threshold without arithmetic on attributes.

``marker`` only takes (positive deltas): its give-back is :meth:`Approach.release_action`
inside a transaction guarded by the marker's status, which every approach also offers.

Every approach returns a :class:`counters.core.outcome.Result`:

``applied``    this call changed the counter
``duplicate``  an earlier call with the same ``token`` already did (approaches that remember tokens)
``rejected``   definitely not applied; ``reason`` is ``threshold`` (``value["available"]`` or
               ``value["reserved"]`` tells what was left), ``missing`` (no counter item),
               ``set_full`` or ``token_mismatch`` (the token was used for a different request)
``contention`` conflicts/throttling outlasted the retry budget; nothing known to have applied
``ambiguous``  only ``atomic`` and ``occ``: it may or may not have applied (see their docstrings)

| name | module | remembers tokens | exact | shardable |
|---|---|---|---|---|
| ``atomic`` | :mod:`.atomic` | no | no (policy ``over``/``under``) | yes |
| ``occ`` | :mod:`.occ` | no | no (ambiguous on a third tag) | no |
| ``occ_history`` | :mod:`.occ_history` | last N writers | within N writes | no |
| ``crt`` | :mod:`.crt` | 10 minutes (DynamoDB) | within the window | yes |
| ``marker`` | :mod:`.marker` | marker item (TTL) | yes | yes |
| ``set`` | :mod:`.set` | the token set | yes (bounded size) | no |

Approach 6 of the seed (counting with an item collection, a ledger) is not one of these: it has
no counter item and its own interface (append, balance, compact), in the package
:mod:`counters.primitives.ledger` (docs/ledgers.md).
"""

from __future__ import annotations

import importlib
import time
from typing import Any, ClassVar

from counters.core.client import client
from counters.core.engine import Resend, Stop, read, run
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

NAMES = ("atomic", "occ", "occ_history", "crt", "marker", "set")

Key = dict[str, str]
"""A counter item's key (``PK``, ``SK``)."""
Fields = dict[str, Any]
"""A reservation record's fields."""

RESERVED = "reserved"
AVAILABLE = "available"

# Condition fragments, named for what they guard.
COUNTER_EXISTS = "attribute_exists(#pk)"  # ADD would otherwise create a phantom counter item
FITS_CEILING = "#available >= :q"  # a take never exceeds what is left: reserved never above capacity
FITS_FLOOR = "#reserved >= :q"  # a give-back never exceeds what was taken: reserved never below 0

ADD_DELTA = "ADD #reserved :d, #available :nd"


def threshold(delta: int) -> str:
    """The threshold fragment guarding a delta of this sign."""
    return FITS_CEILING if delta > 0 else FITS_FLOOR


def guard(delta: int, bounded: bool) -> str:
    return f"{COUNTER_EXISTS} AND {threshold(delta)}" if bounded else COUNTER_EXISTS


def delta_values(delta: int) -> dict[str, Any]:
    return {":d": delta, ":nd": -delta, ":q": abs(delta)}


def names() -> dict[str, str]:
    return {"#pk": "PK", "#reserved": RESERVED, "#available": AVAILABLE}


def rejection(old_item: dict[str, Any] | None, delta: int) -> tuple[str, dict[str, Any]]:
    """Why a guarded write failed, from the item ``ALL_OLD`` returned (raw DynamoDB form)."""
    item = from_item(old_item) if old_item else None
    if not item:
        return "missing", {}
    return "threshold", {AVAILABLE: int(item.get(AVAILABLE, 0)), RESERVED: int(item.get(RESERVED, 0))}


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

    def __init__(self, table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    # -- the interface -----------------------------------------------------------------------
    def initial_attributes(self, capacity: int) -> dict[str, Any]:
        """The attributes a new counter item starts with (``reserved`` 0, ``available`` capacity)."""
        return {RESERVED: 0, AVAILABLE: capacity}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> Result:
        """Add ``delta`` to the counter item at ``key``.

        ``token`` is the request's token (how approaches that remember tokens see a duplicate);
        ``record`` the reservation record's fields: an approach that can write them in the same
        transaction as the take does (``writes_record``: marker; crt's split), the others leave
        the record to the caller."""
        raise NotImplementedError

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> Result:
        """Apply several positive deltas to several counter items in ONE transaction. ``round_``
        is the planner's round (:func:`counters.primitives.sharding.take`): a new plan is a new
        request, so an approach keyed by request tokens (crt) derives a fresh one per round."""
        raise NotImplementedError(f"{self.name} does not support write sharding")

    def release_action(self, key: dict[str, str], quantity: int, token: str) -> dict[str, Any]:
        """A TransactWriteItems ``Update`` giving ``quantity`` back (the caller adds its own guard)."""
        return {
            "Update": {
                "TableName": self.table_name,
                "Key": to_item(key),
                "UpdateExpression": ADD_DELTA,
                "ConditionExpression": guard(-quantity, True),
                "ExpressionAttributeNames": names(),
                "ExpressionAttributeValues": to_item(delta_values(-quantity)),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def shard_order(self, count: int, token: str | None, rng: Any) -> list[int]:
        """Which shard to try first, then the others (random start; crt overrides)."""
        start = rng.randrange(count)
        return [(start + i) % count for i in range(count)]

    # -- helpers -------------------------------------------------------------------------------
    def read(self, key: dict[str, str], capacity: Capacity) -> dict[str, Any] | None:
        response = read(self.dynamodb.get_item, self.retry, capacity, TableName=self.table_name, Key=to_item(key), ConsistentRead=True)
        return from_item(response.get("Item"))

    def optimistic(self, key: dict[str, str], capacity: Capacity, plan: Any, lost: Any, unknown: Any) -> Result:
        """Read, then write conditioned on what was read (occ, occ_history): ``plan(item, attempts)``
        gives the first write (:class:`~counters.core.engine.Resend`) or the verdict the read already
        gives (:class:`~counters.core.engine.Stop`); ``lost``/``unknown`` are the engine's hooks for a
        lost race and an unknown outcome."""
        first = plan(self.read(key, capacity), 1)
        if isinstance(first, Stop):
            return first.value

        def lost_then_reread(report: Any, failure: Any) -> Any:
            # The winner's item (ALL_OLD) decides at once what it can (our own write, the
            # threshold); the next write is planned from a read made after the backoff: one
            # planned from ALL_OLD would be as old as the backoff and lose again to whoever
            # wrote meanwhile (occ_history, 32 clients: 70% of calls succeeded, 93% re-reading).
            verdict = lost(report, failure)
            if isinstance(verdict, Resend):
                return Resend(refresh=lambda: plan(self.read(key, capacity), report.attempts))
            return verdict

        report = run(
            self.dynamodb.update_item,
            first.params or {},
            policy=self.retry,
            capacity=capacity,
            write=True,
            on_condition=lost_then_reread,
            on_unknown=unknown,
        )
        if report.stopped:
            return report.value
        # conflict/throttle/not sent are retried by the engine (a stale read is caught by the write's condition)
        return result(report.outcome, capacity, report.attempts)

    def recorded(self, report: Any, index: int, token: str, quantity: int) -> Result | None:
        """A transaction that Put the reservation record (action ``index``) was cancelled: if the
        record's condition failed, the record already there decides - the same quantity is
        ``duplicate`` (an earlier attempt or request with this token committed), another one
        ``token_mismatch``. ``None`` when the record was not why."""
        if report.failure is None or index not in report.failure.failed_conditions():
            return None
        capacity, attempts = report.capacity, report.attempts
        existing = from_item(report.failure.old_item(index)) or self.read(record_key(token), capacity)
        if existing is None:  # removed between the two calls: the counter decides next time
            return result(Outcome.CONTENTION, capacity, attempts, "marker_vanished")
        if int(existing.get("quantity", -1)) != quantity:
            return result(Outcome.REJECTED, capacity, attempts, "token_mismatch", marker=existing)
        return result(Outcome.DUPLICATE, capacity, attempts, "marker_exists", allocation=existing.get("allocation"), marker=existing)

    def require_token(self, token: str | None) -> str:
        if not token:
            raise ValueError(f"the {self.name} approach needs a request token")
        return token


RECORD_SK = "RSV"
RECORD_IS_NEW = "attribute_not_exists(#pk)"  # one record per request token: the double-apply guard


def record_key(token: str) -> dict[str, str]:
    """The reservation record (the marker of approach 5) of a request token."""
    return {"PK": f"RSV#{token}", "SK": RECORD_SK}


def record_put(table_name: str, token: str, quantity: int, allocation: dict[str, int], record: dict[str, Any] | None) -> dict[str, Any]:
    """A transaction's Put of the confirmed reservation record, new or cancelled. No TTL: a hold
    never expires (an expired record would strand its quantity; the release starts the TTL)."""
    item = {
        **record_key(token),
        **(record or {}),
        "quantity": quantity,
        "status": "CONFIRMED",
        "createdAt": int(time.time()),
        "allocation": allocation,
    }
    return {
        "Put": {
            "TableName": table_name,
            "Item": to_item(item),
            "ConditionExpression": RECORD_IS_NEW,
            "ExpressionAttributeNames": {"#pk": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def approach_class(name: str) -> type[Approach]:
    """The Approach subclass registered under ``name`` (modules imported on first use)."""
    if name not in NAMES:
        raise KeyError(f"unknown approach {name!r}; one of {NAMES}")
    module = importlib.import_module(f"counters.primitives.approaches.{name}")
    return module.APPROACH


def create(name: str, table_name: str, **options: Any) -> Approach:
    return approach_class(name)(table_name, **options)


def result(outcome: Outcome, capacity: Capacity, attempts: int, reason: str | None = None, **value: Any) -> Result:
    return Result(outcome, reason=reason, capacity=capacity, attempts=attempts, value=value or None)
