"""Reference counts (seed 01): a tally on a parent item, kept exact by its child items.

``link`` puts a child item and bumps the parent's tally in **one** TransactWriteItems; the
child's key is the dedupe guard (``attribute_not_exists``), so a duplicated or retried link
can never count twice. ``unlink`` is the mirror (``attribute_exists`` guard, ADD -1) and
never drives the tally below zero.

Guarantees
    * Ambiguous failure (5xx/timeout after sending): retried with the same ClientRequestToken,
      so a committed attempt replays as success; if DynamoDB answers the retry with a
      condition failure instead, the child exists (ours or a concurrent twin): ``rejected``
      with ``already_exists``, and the tally still counts it exactly once.
    * SDK/client retries: a re-sent link finds its child and is rejected: never counted twice.
    * Contention (conflicts/throttling past the retry budget): ``contention``; replaying the
      request is safe because the child key makes it idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from counters.core.client import client
from counters.core.engine import read, transact
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

# Condition fragments, named for what they guard.
CHILD_IS_NEW = "attribute_not_exists(#sk)"  # one child per key: the double-count guard
CHILD_EXISTS = "attribute_exists(#sk)"  # unlink only what is linked: the double-uncount guard
PARENT_EXISTS = "attribute_exists(#pk)"  # ADD would otherwise create a phantom parent
PARENT_EXISTS_AND_POSITIVE = "attribute_exists(#pk) AND #tally >= :one"  # never below zero


@dataclass
class Audit:
    """Stored tally vs counted children. Exact only when no link/unlink ran meanwhile."""

    stored: int
    counted: int
    capacity: Capacity

    @property
    def drift(self) -> int:
        return self.stored - self.counted


class RefCount:
    """A tally attribute on a parent item, maintained transactionally with child items."""

    def __init__(
        self,
        table_name: str,
        *,
        tally_attribute: str,
        pk: str = "PK",
        sk: str = "SK",
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.table_name = table_name
        self.tally = tally_attribute
        self.pk, self.sk = pk, sk
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def _names(self) -> dict[str, str]:
        return {"#pk": self.pk, "#sk": self.sk, "#tally": self.tally}

    def link(self, parent: dict[str, Any], child: dict[str, Any], *, also: list[dict[str, Any]] = ()) -> Result:  # type: ignore[assignment]
        """Create ``child`` (full item, key included) and add 1 to the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``already_exists`` (child was there:
        ``value`` is the stored child) or ``parent_missing``; ``contention``. ``also``: more
        actions to commit in the same transaction (reason ``also_failed`` if one's condition fails).
        """
        items = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": to_item(child),
                    "ConditionExpression": CHILD_IS_NEW,
                    "ExpressionAttributeNames": {"#sk": self.sk},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",  # who wrote the child that is there
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": to_item(parent),
                    "UpdateExpression": "ADD #tally :one",
                    "ConditionExpression": PARENT_EXISTS,
                    "ExpressionAttributeNames": {"#pk": self.pk, "#tally": self.tally},
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
        ]
        return self._run([*items, *also], child_reason="already_exists")

    def unlink(self, parent: dict[str, Any], child_key: dict[str, Any], *, also: list[dict[str, Any]] = ()) -> Result:  # type: ignore[assignment]
        """Delete the child and subtract 1 from the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``not_linked``, ``parent_missing``,
        ``tally_would_go_negative`` (an integrity fault: the child exists but the tally is 0)
        or ``also_failed``; ``contention``.
        """
        items = [
            {
                "Delete": {
                    "TableName": self.table_name,
                    "Key": to_item(child_key),
                    "ConditionExpression": CHILD_EXISTS,
                    "ExpressionAttributeNames": {"#sk": self.sk},
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": to_item(parent),
                    "UpdateExpression": "ADD #tally :minus_one",
                    "ConditionExpression": PARENT_EXISTS_AND_POSITIVE,
                    "ExpressionAttributeNames": {"#pk": self.pk, "#tally": self.tally},
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":minus_one": {"N": "-1"}},
                    # The loser learns why: no item = parent missing, item = tally at 0.
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        return self._run([*items, *also], child_reason="not_linked")

    def _run(self, items: list[dict[str, Any]], *, child_reason: str) -> Result:
        report = transact(items, policy=self.retry, dynamodb=self._dynamodb)
        result = Result(report.outcome, capacity=report.capacity, attempts=report.attempts)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            failed = report.failure.failed_conditions()
            if 1 in failed and not report.failure.old_item(1):
                result.reason = "parent_missing"  # no parent: nothing else matters
            elif 0 in failed:
                result.reason = child_reason  # the child guard: nothing to (un)link
                result.value = from_item(report.failure.old_item(0))
            elif any(i >= 2 for i in failed):
                result.reason = "also_failed"
            else:
                result.reason = "tally_would_go_negative"  # child present, tally already 0
        return result

    def read(self, parent: dict[str, Any]) -> tuple[dict[str, Any] | None, Capacity]:
        """The parent item (strongly consistent), or ``None``."""
        capacity = Capacity()
        response = read(self.dynamodb.get_item, self.retry, capacity, TableName=self.table_name, Key=to_item(parent), ConsistentRead=True)
        return from_item(response.get("Item")), capacity

    def audit(
        self,
        parent: dict[str, Any],
        child_prefix: str,
        *,
        where: tuple[str, dict[str, str], dict[str, Any]] | None = None,
        partitions: list[str] | None = None,
    ) -> Audit | None:
        """Compare the stored tally with a COUNT of children (paginated Query, Select=COUNT).

        ``partitions``: the partition keys the children live under (default: the parent's own,
        its item collection), counted one after the other.

        ``where``: (FilterExpression, names, values) for children that are stored but do not
        count (e.g. :meth:`counters.primitives.toggle.Toggle.counted`: tombstones); the count is
        of the items that pass it.

        Reads the tally first, then counts; concurrent links/unlinks between the two make the
        drift transient, so a non-zero drift is worth a second look, not a repair.
        Returns ``None`` when the parent does not exist.
        """
        item, capacity = self.read(parent)
        if item is None:
            return None
        counted = sum(self.count(pk, child_prefix, where, capacity) for pk in (partitions or [parent[self.pk]]))
        return Audit(stored=int(item.get(self.tally, 0)), counted=counted, capacity=capacity)

    def count(self, pk: str, child_prefix: str, where: tuple[str, dict[str, str], dict[str, Any]] | None, capacity: Capacity) -> int:
        """The children under one partition key that pass ``where`` (strongly consistent COUNT)."""
        counted = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": self.pk, "#sk": self.sk},
            "ExpressionAttributeValues": to_item({":pk": pk, ":prefix": child_prefix}),
            "Select": "COUNT",
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if where is not None:
            expression, names, values = where
            kwargs["FilterExpression"] = expression
            kwargs["ExpressionAttributeNames"] = {**kwargs["ExpressionAttributeNames"], **names}
            kwargs["ExpressionAttributeValues"] = {**kwargs["ExpressionAttributeValues"], **values}
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **kwargs)
            counted += page["Count"]
            if "LastEvaluatedKey" not in page:
                return counted
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
