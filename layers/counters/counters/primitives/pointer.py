"""Monotonic pointers (seed 04): an item holding the greatest value seen, e.g. LAST_ORDER.

The pointer is one item, ``POINTER#<name>`` / ``META`` (:mod:`counters.store.sequences`).
:meth:`Pointer.advance` is one conditional UpdateItem: ``SET #v = :new`` only if
``attribute_not_exists(#v) OR #v < :new``. Writers may run in parallel and deliveries may arrive
late, twice, or out of order (stream shards processed in parallel, retried batches, queues): the
condition makes every such update either move the pointer forward or do nothing. It **never moves
backward**, and no read is needed first.

Outcomes of :meth:`Pointer.advance` (``Result.value`` is the value stored afterwards):

* ``applied``: the pointer moved to the new value.
* ``duplicate`` (reason ``already_at_value``): the pointer already holds **exactly** this value:
  a redelivery (or a retry after an unknown outcome) of an update that already applied. Success,
  nothing changed.
* ``rejected`` (reason ``stale``): the pointer holds a **greater** value; this update is
  out of date. Expected under reordering, not an error.
* ``contention``: throttling/unknown outcomes outlasted the retry budget; re-driving the
  same update is always safe.

Both ``duplicate`` and ``rejected`` cost one WCU (a failed condition is still a write) and
read nothing extra: ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` tells them apart.
"""

from __future__ import annotations

from enum import StrEnum

from counters.core.client import DynamoDBClient
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.store.sequences import SequenceStore, pointer_key


class Reason(StrEnum):
    ALREADY_AT_VALUE = "already_at_value"
    STALE = "stale"
    UNKNOWN_OUTCOME = "unknown_outcome"
    TRANSIENT = "transient"


class Pointer:
    """A named pointer that only moves forward."""

    def __init__(
        self,
        table_name: str,
        name: str,
        *,
        attribute: str = "value",
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.table_name = table_name
        self.name = name
        self.attribute = attribute
        self.key = pointer_key(name)
        self.store = SequenceStore(table_name, dynamodb=dynamodb, retry=retry)
        self.retry = self.store.retry

    def advance(self, value: int) -> Result:
        """Move the pointer to ``value`` if that is forward (see the module doc for outcomes)."""
        move = self.store.advance(self.name, self.attribute, value)
        report = move.report
        result = Result(report.outcome, capacity=report.capacity, attempts=report.attempts, value=value)
        if report.outcome is Outcome.REJECTED and move.stored is not None:
            result.value = move.stored
            if move.stored == value:
                result.outcome, result.reason = Outcome.DUPLICATE, Reason.ALREADY_AT_VALUE
            else:
                result.reason = Reason.STALE
        elif report.outcome is Outcome.CONTENTION:
            result.value = None
            result.reason = Reason.UNKNOWN_OUTCOME if report.unknown_seen else Reason.TRANSIENT
        return result

    def read(self) -> tuple[int | None, Capacity]:
        """The pointer's value, ``None`` before the first advance.

        Strongly consistent on purpose: the pointer itself never moves backward, and a
        consistent read makes that true of what readers see too (an eventually consistent
        read could return an older value after a newer one). One GetItem, 1 RCU.
        """
        capacity = Capacity()
        return self.store.read_number(self.key, self.attribute, capacity), capacity
