"""Operation records ``OP#<operationId>``: PENDING until the worker writes the definite outcome, once."""

from __future__ import annotations

import logging
from typing import Any

from counters.core.caller import Caller
from counters.core.client import client
from counters.core.commands import Command, operation_key, outcome_update
from counters.core.engine import Report, Stop, read, run
from counters.core.errors import ContentionError, NotFound
from counters.core.failures import Classified, RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Outcome
from counters.core.settings import Settings

logger = logging.getLogger(__name__)

OPERATION_TTL_SECONDS = 7 * 24 * 3600


class Operations:
    """Operation records: PENDING until the worker writes the definite outcome, once."""

    def __init__(self, table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @classmethod
    def from_settings(cls, settings: Settings) -> Operations:
        return cls(settings.table_name, retry=settings.retry)

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def record_pending(self, command: Command, owner: str | None = None) -> None:
        item = {
            **operation_key(command.operation_id),
            "operationId": command.operation_id,
            "op": command.op,
            "status": "PENDING",
            "createdAt": command.created_at,
            "expiresAt": command.created_at + OPERATION_TTL_SECONDS,
        }
        if owner is not None:
            item["owner"] = owner  # whose request it is: only they (or an admin) may read it
        params = {
            "TableName": self.table_name,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(#pk)",  # an operation id is used once
            "ExpressionAttributeNames": {"#pk": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        report = run(self.dynamodb.put_item, params, policy=self.retry, write=True)
        if report.outcome is Outcome.APPLIED:
            return
        stored = from_item(report.failure.old_item(0)) if report.failure else None
        if report.outcome is Outcome.REJECTED and report.unknown_seen and stored and stored.get("op") == command.op:
            return  # our own Put, committed by the attempt whose answer was lost
        raise ContentionError("could not record the deferred operation; retry the request")

    def record_outcome(self, command: Command, status: str, result: dict[str, Any]) -> bool:
        """Write the final status if the record is still PENDING; False if it was already final."""
        params = outcome_update(self.table_name, command.operation_id, status, result)

        def final(report: Report, failure: Classified) -> Stop:
            stored = from_item(failure.old_item(0)) or {}
            # after an unknown outcome, finding our own status means our write committed
            return Stop(report.unknown_seen and stored.get("status") == status and stored.get("result") == result)

        report = run(self.dynamodb.update_item, params, policy=self.retry, write=True, on_condition=final)
        if report.stopped:
            return bool(report.value)
        if report.outcome is Outcome.APPLIED:
            return True
        raise ContentionError(f"could not record the outcome of operation {command.operation_id}; the message is redelivered")

    def forget(self, operation_id: str) -> None:
        params = {
            "TableName": self.table_name,
            "Key": to_item(operation_key(operation_id)),
            "ConditionExpression": "#status = :pending",  # never erase a recorded outcome
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": to_item({":pending": "PENDING"}),
        }
        if run(self.dynamodb.delete_item, params, policy=self.retry, write=True).outcome is Outcome.CONTENTION:
            # best effort; the TTL removes it in any case
            logger.warning("could not remove an unqueued operation record", extra={"operationId": operation_id})

    def read(self, operation_id: str, *, caller: Caller | None = None) -> dict[str, Any] | None:
        """The public record, or None; with a ``caller``, someone else's operation is
        :class:`~counters.core.errors.Hidden` (answered as a missing one)."""
        response = read(
            self.dynamodb.get_item, self.retry, TableName=self.table_name, Key=to_item(operation_key(operation_id)), ConsistentRead=True
        )
        item = from_item(response.get("Item"))
        if item is None:
            return None
        if caller is not None:
            caller.require_owner_or_hide(item.get("owner"), "read this operation", NotFound(f"operation {operation_id!r} not found"))
        return {k: item[k] for k in ("operationId", "op", "status", "createdAt", "completedAt", "result") if k in item}
