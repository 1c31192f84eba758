"""Auto-increment sequences (seed 05): the next value of a named counter, ``fast`` or ``gapless``.

The counter is one item, ``SEQ#<name>`` / ``META``, attribute ``value`` (the last value taken);
its requests are [`counters.store.sequences`][counters.store.sequences].

``fast`` (atomic counter)
    ``UpdateItem ADD value 1`` with ``ReturnValues=UPDATED_NEW``: one write, never blocks,
    **unique** under any concurrency. It **may leave gaps**: the value is taken before the
    caller uses it, so a caller that fails afterwards, an ambiguous failure (5xx/timeout
    after the ADD applied, then retried) or an SDK resend each burn a value. Never a duplicate.

``gapless`` (optimistic lock + transaction)
    Read ``value`` (strongly consistent), then **one** TransactWriteItems that sets
    ``value = old + 1`` on condition ``value = :old`` (``attribute_not_exists`` for the first
    value) **and** Puts the caller's items built for ``old + 1`` (each with its own
    ``attribute_not_exists`` guard). The value and the items commit together or not at all,
    so every taken value has its item: **1..N with no holes**. A lost race (the counter's
    condition failed) learns the current value from ``ReturnValuesOnConditionCheckFailure``
    and the engine re-sends the next round ([`Resend`][counters.core.engine.Resend], a fresh
    ClientRequestToken, full-jitter backoff) without a re-read, up to ``occ.max_attempts``
    attempts. An unknown outcome is re-sent with the same token, so a committed round replays
    as success instead of taking a second value; a lost race *after* an unknown outcome stops
    (the round may have committed: a re-drive's items tell). Cost: one serialisation point:
    throughput is bounded by one round trip per value, and every writer that loses a race pays
    a cancelled transaction. Threads sharing one [`Sequence`][counters.primitives.sequence.Sequence] queue on a local lock
    first, so only separate processes/environments race at DynamoDB.

Across Regions ([`RegionPolicy`][counters.core.policy.RegionPolicy], [docs/orders.md "Global tables"](../orders.md#global-tables))
    ``fast`` where the policy gives this Region its own items (``writer``: conditions see one
    replica, MREC): each Region ADDs to its **own** item ``SEQ#<name>#<Region>`` (one writing
    Region per item: last-writer-wins never meets two writers) and turns its n-th value into
    ``(n - 1) * stride + index + 1`` (the policy's ``stride`` = the number of Regions, ``index`` =
    this Region's position): the Regions' id sets are disjoint, so ids are unique across Regions
    without any coordination and whatever the replication delay. ``fast`` on a strongly consistent
    table without transactions (MRSC): the one item, as in one Region; the caller's items are
    written one by one in order ([`Store.write_group`][counters.store.base.Store.write_group]).
    ``gapless`` needs transactions (``take:gapless`` in the sequences' table, [`TABLE`][counters.store.sequences.TABLE]:
    refused on MRSC) and, where conditions see one replica (MREC), the home Region (``HOME_REGION``), which
    alone writes the counter: every other Region is refused, naming the home Region.

Outcomes of [`Sequence.claim`][counters.primitives.sequence.Sequence.claim]: ``applied`` (``value`` is ours and the items are
written); ``rejected`` (caller's items failed their conditions: ``conflicts`` says which and
what was there; in ``fast`` mode ``value`` was burned);
``contention`` (budget exhausted; if ``unknown_outcome`` is set a value *may* have been
taken with the items: the caller's items must make a re-drive recognisable).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import field
from enum import Enum, StrEnum

from counters.core.client import DynamoDBClient, Params
from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified, Failure, RetryPolicy
from counters.core.items import Record
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.records import dataclass
from counters.store.expr import Transaction, old_item
from counters.store.sequences import VALUE, SequenceAction, SequenceStore, counter_bump, sequence_key


class SequenceMode(StrEnum):
    """``fast`` (a number per claim, gaps possible) or ``gapless``."""

    FAST = "fast"
    GAPLESS = "gapless"


class Reason(StrEnum):
    """Why a claim did not simply apply."""

    MAY_HAVE_BURNED = "may_have_burned"
    """``fast``, applied: an earlier attempt may have applied too (a gap)."""
    ITEM_EXISTS = "item_exists"
    """Rejected: one of the caller's items exists (``conflicts`` says which)."""
    TRANSIENT = "transient"
    """Contention: transient failures outlasted the budget."""
    SEQUENCE_BUSY = "sequence_busy"
    """Contention: ``gapless`` lost every round to other writers."""


@dataclass
class Numbered(Result):
    """A sequence's [`Result`][counters.core.outcome.Result], its ``value`` typed: the value
    [`Sequence.next`][counters.primitives.sequence.Sequence.next] took (``None`` unless ``applied``; a
    [`Claim`][counters.primitives.sequence.Claim]'s value is ``Claim.value``)."""

    value: int | None = None
    """The value taken."""


@dataclass
class Claim:
    """What [`Sequence.claim`][counters.primitives.sequence.Sequence.claim] did."""

    result: Numbered
    value: int | None = None
    """The value taken (``applied``); in ``fast`` mode also the value burned by a rejection."""
    conflicts: dict[Enum, Record | None] = field(default_factory=dict)
    """``rejected``: the name of each of the caller's actions whose condition failed -> that item
    as stored (ALL_OLD, when the action asked for it; else ``None``)."""
    unknown_outcome: bool = False
    """``contention`` after an unknown outcome: a value may have been taken with the items."""


ItemsFor = Callable[[int], Transaction[Enum]]
"""Builds the named actions to write with a value (each with its own condition)."""


def _conflicts(tx: Transaction[Enum], failure: Classified | None) -> dict[Enum, Record | None]:
    reasons = tx.cancellation(failure)
    return {name: reasons.old(name) for name in tx if name is not SequenceAction.COUNTER and reasons.failed(name)}


@dataclass
class _Round:
    """The gapless claim's current round: the value it tries and the transaction taking it."""

    new: int = 0
    tx: Transaction[Enum] = field(default_factory=Transaction)


class Sequence:
    """A named auto-increment counter."""

    def __init__(
        self,
        table_name: str,
        name: str,
        *,
        mode: SequenceMode | str = SequenceMode.FAST,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        occ: RetryPolicy | None = None,
        policy: RegionPolicy = ONE_REGION_POLICY,
    ) -> None:
        self.table_name = table_name
        self.name = name
        self.mode = SequenceMode(mode)
        self.policy = policy
        strided = self.mode is SequenceMode.FAST and bool(policy.writer)
        self.writer = policy.writer if strided else ""
        """The Region whose own item this sequence counts on (``""``: the one shared item)."""
        self.stride, self.index = (policy.stride, policy.index) if strided else (1, 0)
        self.key = sequence_key(name, self.writer)
        self.store = SequenceStore(table_name, dynamodb=dynamodb, retry=retry, policy=policy)
        self.retry = self.store.retry
        """Transient failures of one call (conflict, throttle, unknown outcome)."""
        self.occ = occ or RetryPolicy(max_attempts=40, base_delay=0.002, max_delay=0.05)
        """``gapless``: rounds lost to other writers (each round has ``retry`` for transient failures)."""
        self._local_queue = threading.Lock()

    # ------------------------------------------------------------------ reading
    def current(self) -> tuple[int | None, Capacity]:
        """The last value taken (in this Region, when it counts on its own item; strongly consistent), ``None`` before the first."""
        capacity = Capacity()
        raw = self.store.read_number(self.key, VALUE, capacity)
        return (None if raw is None else self._id(raw)), capacity

    def _id(self, raw: int) -> int:
        """This Region's ``raw``-th value -> the id (``raw`` itself on the one shared item)."""
        return (raw - 1) * self.stride + self.index + 1

    def check_mode(self) -> None:
        """Refuse a mode this table cannot keep exact (see the module doc): ``gapless`` needs
        transactions and, where conditions see one replica, the home Region."""
        if self.mode is not SequenceMode.GAPLESS:
            return
        self.store.admit("take:gapless")

    # ------------------------------------------------------------------ taking values
    def next(self) -> Numbered:
        """The next value with nothing written alongside it (``value``)."""
        self.check_mode()
        if self.mode is SequenceMode.FAST:
            return self._add()
        claim = self.claim(lambda _value: Transaction())
        claim.result.value = claim.value
        return claim.result

    def claim(self, items_for: ItemsFor) -> Claim:
        """Take the next value and write ``items_for(value)`` with it (see the module doc)."""
        self.check_mode()
        if self.mode is SequenceMode.FAST:
            return self._claim_fast(items_for)
        # Threads sharing this object queue here instead of racing each other's transactions
        # (in Lambda, one request per environment, it never waits). Other processes and
        # environments are still serialised by the counter's condition alone.
        with self._local_queue:
            return self._claim_gapless(items_for)

    def _add(self) -> Numbered:
        report, raw = self.store.add_one(self.name, self.writer)
        result = Numbered(report.outcome, capacity=report.capacity, attempts=report.attempts)
        if report.outcome is Outcome.APPLIED:
            result.value = None if raw is None else self._id(raw)
            if report.unknown_seen:
                result.reason = Reason.MAY_HAVE_BURNED  # an earlier attempt may have applied: a gap
        return result

    def _claim_fast(self, items_for: ItemsFor) -> Claim:
        taken = self._add()
        value = taken.value
        if taken.outcome is not Outcome.APPLIED or value is None:
            return Claim(taken)
        tx = items_for(value)
        if not len(tx):
            return Claim(taken, value=value)
        report, failed = self.store.write_group(tx, self.policy.writes)
        # attempts - 1 = retries over both calls (what the Retries metric reports)
        result = Numbered(report.outcome, capacity=taken.capacity.merge(report.capacity), attempts=taken.attempts + report.attempts - 1)
        claim = Claim(result, value=value, unknown_outcome=report.unknown_seen and report.outcome is Outcome.CONTENTION)
        if report.outcome is Outcome.REJECTED:
            claim.conflicts = {failed: old_item(report.failure)} if failed is not None else _conflicts(tx, report.failure)
            result.reason = Reason.ITEM_EXISTS  # taken.value is burned: a gap
        return claim

    def _claim_gapless(self, items_for: ItemsFor) -> Claim:
        capacity = Capacity()
        observed, read_cost = self.current()
        capacity.merge(read_cost)
        round_ = _Round()

        def plan(observed: int | None) -> Params:
            new = (observed or 0) + 1
            tx: Transaction[Enum] = Transaction()
            tx.update(SequenceAction.COUNTER, counter_bump(self.table_name, self.name, observed)).extend(items_for(new))
            round_.new, round_.tx = new, tx
            return {"TransactItems": tx.items()}

        def lost(report: Report, failure: Classified) -> Stop | Resend:
            tx = round_.tx
            reasons = tx.cancellation(failure)
            if not reasons.failed(SequenceAction.COUNTER):
                # The counter did not move, yet one of the caller's items exists (an idempotency
                # record, say): nothing was taken, and retrying cannot make that item new.
                return Stop(Reason.ITEM_EXISTS)
            if report.unknown_seen:
                return Stop(Reason.TRANSIENT)  # an earlier attempt may have committed: take no other value
            # Lost the race for the counter (the winner's items for that value exist too, as
            # expected): learn the value it moved to, back off, try again with the next one.
            stored = reasons.old(SequenceAction.COUNTER)
            return Resend(params=plan(int(stored[VALUE]) if stored and VALUE in stored else None))

        plan(observed)
        report = self.store.write(round_.tx, capacity=capacity, on_condition=lost, rounds=self.occ)
        result = Numbered(report.outcome, capacity=capacity, attempts=report.attempts)
        if report.outcome is Outcome.APPLIED:
            return Claim(result, value=round_.new)
        if report.stopped and report.value is Reason.ITEM_EXISTS:
            result.outcome, result.reason = Outcome.REJECTED, Reason.ITEM_EXISTS
            return Claim(result, conflicts=_conflicts(round_.tx, report.failure))
        # Contention: every round lost to other writers, or transient failures (or a lost race after
        # an unknown outcome, which may be this request's own commit) outlasted the budget.
        lost_races = not report.stopped and report.failure is not None and report.failure.kind is Failure.CONDITION
        result.outcome, result.reason = Outcome.CONTENTION, Reason.SEQUENCE_BUSY if lost_races else Reason.TRANSIENT
        return Claim(result, unknown_outcome=report.unknown_seen)
