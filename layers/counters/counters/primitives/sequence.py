"""Auto-increment sequences (seed 05): the next value of a named counter, ``fast`` or ``gapless``.

The counter is one item, ``SEQ#<name>`` / ``META``, attribute ``value`` (the last value taken).

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
    and tries again without a re-read, up to ``occ.max_attempts`` rounds with full-jitter
    backoff. Transient failures inside a round (conflict, throttle, unknown outcome) are
    :func:`counters.core.engine.transact`'s: an unknown outcome is re-sent with the same
    ClientRequestToken, so a committed round replays as success instead of taking a second
    value. Cost: one serialisation point: throughput is bounded by one round trip per value,
    and every writer that loses a race pays a cancelled transaction. Threads sharing one
    :class:`Sequence` queue on a local lock first, so only separate processes/environments
    race at DynamoDB.

Outcomes of :meth:`Sequence.claim`: ``applied`` (``value`` is ours and the items are
written); ``rejected`` (caller's items failed their conditions: ``conflicts`` says which and
what was there; in ``fast`` mode ``value`` was burned);
``contention`` (budget exhausted; if ``unknown_outcome`` is set a value *may* have been
taken with the items: the caller's items must make a re-drive recognisable).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from counters.core.client import client
from counters.core.engine import read, run, transact
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

VALUE = "value"

# Condition fragments, named for what they guard.
COUNTER_UNCHANGED = "#v = :old"  # optimistic lock: nobody took old + 1 since we read old
COUNTER_UNSTARTED = "attribute_not_exists(#v)"  # the first value: nobody started the counter since we read


class SequenceMode(StrEnum):
    FAST = "fast"
    GAPLESS = "gapless"


def sequence_key(name: str) -> dict[str, str]:
    return {"PK": f"SEQ#{name}", "SK": "META"}


@dataclass
class Claim:
    """What :meth:`Sequence.claim` did."""

    result: Result
    value: int | None = None
    """The value taken (``applied``); in ``fast`` mode also the value burned by a rejection."""
    conflicts: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    """``rejected``: index (in the caller's items) of each item whose condition failed -> that
    item as stored (ALL_OLD, when the caller asked for it; else ``None``)."""
    unknown_outcome: bool = False
    """``contention`` after an unknown outcome: a value may have been taken with the items."""


ItemsFor = Callable[[int], list[dict[str, Any]]]
"""Builds the TransactItems to write with a value (each with its own condition)."""


class Sequence:
    """A named auto-increment counter."""

    def __init__(
        self,
        table_name: str,
        name: str,
        *,
        mode: SequenceMode | str = SequenceMode.FAST,
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
        occ: RetryPolicy | None = None,
    ) -> None:
        self.table_name = table_name
        self.name = name
        self.mode = SequenceMode(mode)
        self.key = sequence_key(name)
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()
        """Transient failures of one call (conflict, throttle, unknown outcome)."""
        self.occ = occ or RetryPolicy(max_attempts=40, base_delay=0.002, max_delay=0.05)
        """``gapless``: rounds of read-then-transact lost to other writers."""
        self._local_queue = threading.Lock()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    # ------------------------------------------------------------------ reading
    def current(self) -> tuple[int | None, Capacity]:
        """The last value taken (strongly consistent), ``None`` before the first."""
        capacity = Capacity()
        response = read(
            self.dynamodb.get_item,
            self.retry,
            capacity,
            TableName=self.table_name,
            Key=to_item(self.key),
            ProjectionExpression="#v",
            ExpressionAttributeNames={"#v": VALUE},
            ConsistentRead=True,
        )
        item = from_item(response.get("Item"))
        return (int(item[VALUE]) if item and VALUE in item else None), capacity

    # ------------------------------------------------------------------ taking values
    def next(self) -> Result:
        """The next value with nothing written alongside it (``Result.value``)."""
        if self.mode is SequenceMode.FAST:
            return self._add()
        claim = self.claim(lambda _value: [])
        claim.result.value = claim.value
        return claim.result

    def claim(self, items_for: ItemsFor) -> Claim:
        """Take the next value and write ``items_for(value)`` with it (see the module doc)."""
        if self.mode is SequenceMode.FAST:
            return self._claim_fast(items_for)
        return self._claim_gapless(items_for)

    def _add(self) -> Result:
        report = run(
            self.dynamodb.update_item,
            {
                "TableName": self.table_name,
                "Key": to_item(self.key),
                "UpdateExpression": "ADD #v :one",
                "ExpressionAttributeNames": {"#v": VALUE},
                "ExpressionAttributeValues": {":one": {"N": "1"}},
                "ReturnValues": "UPDATED_NEW",
            },
            policy=self.retry,
            write=True,
        )
        result = Result(report.outcome, capacity=report.capacity, attempts=report.attempts)
        if report.outcome is Outcome.APPLIED:
            result.value = int(from_item(report.attributes)[VALUE])  # type: ignore[index]
            if report.unknown_seen:
                result.reason = "may_have_burned"  # an earlier attempt may have applied: a gap
        return result

    def _claim_fast(self, items_for: ItemsFor) -> Claim:
        taken = self._add()
        if taken.outcome is not Outcome.APPLIED:
            return Claim(taken)
        items = items_for(taken.value)
        if not items:
            return Claim(taken, value=taken.value)
        report = transact(items, policy=self.retry, dynamodb=self._dynamodb)
        # attempts - 1 = retries over both calls (what the Retries metric reports)
        result = Result(report.outcome, capacity=taken.capacity.merge(report.capacity), attempts=taken.attempts + report.attempts - 1)
        claim = Claim(result, value=taken.value, unknown_outcome=report.unknown_seen and report.outcome is Outcome.CONTENTION)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            claim.conflicts = {i: from_item(report.failure.old_item(i)) for i in report.failure.failed_conditions()}
            result.reason = "item_exists"  # taken.value is burned: a gap
        return claim

    def _claim_gapless(self, items_for: ItemsFor) -> Claim:
        # Threads sharing this object queue here instead of racing each other's transactions
        # (in Lambda, one request per environment, it never waits). Other processes and
        # environments are still serialised by the counter's condition alone.
        with self._local_queue:
            return self._claim_gapless_round_trips(items_for)

    def _claim_gapless_round_trips(self, items_for: ItemsFor) -> Claim:
        capacity = Capacity()
        attempts = 0
        unknown = False
        observed: int | None
        observed, read_cost = self.current()
        capacity.merge(read_cost)
        for round_ in range(1, self.occ.max_attempts + 1):
            new = (observed or 0) + 1
            bump: dict[str, Any] = {
                "TableName": self.table_name,
                "Key": to_item(self.key),
                "UpdateExpression": "SET #v = :new",
                "ExpressionAttributeNames": {"#v": VALUE},
                "ExpressionAttributeValues": {":new": {"N": str(new)}},
                # The loser learns the value it lost to, and tries the next one without a read.
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
            if observed is None:
                bump["ConditionExpression"] = COUNTER_UNSTARTED
            else:
                bump["ConditionExpression"] = COUNTER_UNCHANGED
                bump["ExpressionAttributeValues"][":old"] = {"N": str(observed)}
            items = items_for(new)
            report = transact([{"Update": bump}, *items], policy=self.retry, dynamodb=self._dynamodb)
            capacity.merge(report.capacity)
            attempts += report.attempts
            unknown = unknown or report.unknown_seen
            if report.outcome is Outcome.APPLIED:
                return Claim(Result(Outcome.APPLIED, capacity=capacity, attempts=attempts), value=new)
            if report.outcome is Outcome.CONTENTION or report.failure is None:
                # Transient failures outlasted the budget of this round. If one was an unknown
                # outcome, the round may have committed: do not take another value now.
                result = Result(Outcome.CONTENTION, reason="transient", capacity=capacity, attempts=attempts)
                return Claim(result, unknown_outcome=unknown)
            failed = report.failure.failed_conditions()
            if 0 not in failed:
                # The counter did not move, yet one of the caller's items exists (an idempotency
                # record, say): nothing was taken, and retrying cannot make that item new.
                result = Result(Outcome.REJECTED, reason="item_exists", capacity=capacity, attempts=attempts)
                return Claim(result, conflicts={i - 1: from_item(report.failure.old_item(i)) for i in failed})
            # Lost the race for the counter (the winner's items for that value exist too, as
            # expected): learn the value it moved to, back off, try again with the next one.
            stored = from_item(report.failure.old_item(0))
            observed = int(stored[VALUE]) if stored and VALUE in stored else None
            if round_ < self.occ.max_attempts:
                self.occ.backoff(round_)
        result = Result(Outcome.CONTENTION, reason="sequence_busy", capacity=capacity, attempts=attempts)
        return Claim(result, unknown_outcome=unknown)
