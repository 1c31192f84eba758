"""Monotonic pointers (seed 04): an item holding the greatest value seen, e.g. LAST_ORDER.

The pointer is one item, ``POINTER#<name>`` / ``META``. :meth:`Pointer.advance` is one
conditional UpdateItem: ``SET #v = :new`` only if ``attribute_not_exists(#v) OR #v < :new``.
Writers may run in parallel and deliveries may arrive late, twice, or out of order (stream
shards processed in parallel, retried batches, queues): the condition makes every such
update either move the pointer forward or do nothing. It **never moves backward**, and no
read is needed first.

Outcomes of :meth:`Pointer.advance` (``Result.value`` is the value stored afterwards):

* ``applied``: the pointer moved to the new value.
* ``duplicate``: the pointer already holds **exactly** this value: a redelivery (or a retry
  after an unknown outcome) of an update that already applied. Success, nothing changed.
* ``rejected`` (reason ``stale``): the pointer holds a **greater** value; this update is
  out of date. Expected under reordering, not an error.
* ``contention``: throttling/unknown outcomes outlasted the retry budget; re-driving the
  same update is always safe.

Both ``duplicate`` and ``rejected`` cost one WCU (a failed condition is still a write) and
read nothing extra: ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` tells them apart.
"""

from __future__ import annotations

import time
from typing import Any

from counters.core.client import client
from counters.core.engine import read, run
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

# The guard: the first value, or a greater one. Stale, replayed and reordered updates fail here.
POINTER_IS_BEHIND = "attribute_not_exists(#v) OR #v < :new"


def pointer_key(name: str) -> dict[str, str]:
    return {"PK": f"POINTER#{name}", "SK": "META"}


class Pointer:
    """A named pointer that only moves forward."""

    def __init__(
        self,
        table_name: str,
        name: str,
        *,
        attribute: str = "value",
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.table_name = table_name
        self.name = name
        self.attribute = attribute
        self.key = pointer_key(name)
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def advance(self, value: int) -> Result:
        """Move the pointer to ``value`` if that is forward (see the module doc for outcomes)."""
        report = run(
            self.dynamodb.update_item,
            {
                "TableName": self.table_name,
                "Key": to_item(self.key),
                "UpdateExpression": "SET #v = :new, #at = :now",
                "ConditionExpression": POINTER_IS_BEHIND,
                "ExpressionAttributeNames": {"#v": self.attribute, "#at": "updatedAt"},
                "ExpressionAttributeValues": {":new": {"N": str(int(value))}, ":now": {"N": str(int(time.time()))}},
                # The loser learns what is stored: equal (a redelivery) or greater (stale).
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
            policy=self.retry,
            write=True,
        )
        result = Result(report.outcome, capacity=report.capacity, attempts=report.attempts, value=value)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            stored = from_item(report.failure.old_item(0)) or {}
            current = int(stored[self.attribute])
            result.value = current
            if current == value:
                result.outcome, result.reason = Outcome.DUPLICATE, "already_at_value"
            else:
                result.reason = "stale"
        elif report.outcome is Outcome.CONTENTION:
            result.value = None
            result.reason = "unknown_outcome" if report.unknown_seen else "transient"
        return result

    def read(self) -> tuple[int | None, Capacity]:
        """The pointer's value, ``None`` before the first advance.

        Strongly consistent on purpose: the pointer itself never moves backward, and a
        consistent read makes that true of what readers see too (an eventually consistent
        read could return an older value after a newer one). One GetItem, 1 RCU.
        """
        capacity = Capacity()
        response = read(
            self.dynamodb.get_item,
            self.retry,
            capacity,
            TableName=self.table_name,
            Key=to_item(self.key),
            ProjectionExpression="#v",
            ExpressionAttributeNames={"#v": self.attribute},
            ConsistentRead=True,
        )
        item = from_item(response.get("Item"))
        return (int(item[self.attribute]) if item and self.attribute in item else None), capacity
