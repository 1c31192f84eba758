"""Operation records ``OP#<operationId>``: PENDING until the worker writes the definite outcome, once.

The record's layout and requests are [`counters.store.operations`][counters.store.operations]; this module decides what a
caller sees of it and when a failure is the caller's problem.
"""

from __future__ import annotations

import logging

from counters.core.caller import Caller
from counters.core.client import DynamoDBClient
from counters.core.commands import Command
from counters.core.errors import ContentionError, NotFound
from counters.core.failures import RetryPolicy
from counters.core.json import JSONObject
from counters.core.settings import Settings
from counters.store.operations import TTL_SECONDS, OperationRecords, PublicOperation

logger = logging.getLogger(__name__)

OPERATION_TTL_SECONDS = TTL_SECONDS


class Operations:
    """Operation records: PENDING until the worker writes the definite outcome, once."""

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self.records = OperationRecords(table_name, dynamodb=dynamodb, retry=retry)
        self.retry = self.records.retry

    @classmethod
    def from_settings(cls, settings: Settings) -> Operations:
        """The operation records of the settings' table."""
        return cls(settings.table_name, retry=settings.retry)

    def record_pending(self, command: Command, owner: str | None = None) -> None:
        """Record a deferred command as PENDING (owned by ``owner``); [`ContentionError`][counters.core.errors.ContentionError] if the record cannot be written."""
        if not self.records.put_pending(command.operation_id, command.op, command.created_at, owner):
            raise ContentionError("could not record the deferred operation; retry the request")

    def record_outcome(self, command: Command, status: str, result: JSONObject) -> bool:
        """Write the final status if the record is still PENDING; False if it was already final."""
        written = self.records.set_outcome(command.operation_id, status, result)
        if written is None:
            raise ContentionError(f"could not record the outcome of operation {command.operation_id}; the message is redelivered")
        return written

    def forget(self, operation_id: str) -> None:
        """Delete a PENDING record whose command was never queued (best effort: the TTL removes it otherwise)."""
        if not self.records.delete_pending(operation_id):
            # best effort; the TTL removes it in any case
            logger.warning("could not remove an unqueued operation record", extra={"operationId": operation_id})

    def read(self, operation_id: str, *, caller: Caller | None = None) -> PublicOperation | None:
        """The public record, or None; with a ``caller``, someone else's operation is
        [`Hidden`][counters.core.errors.Hidden] (answered as a missing one)."""
        operation = self.records.get(operation_id)
        if operation is None:
            return None
        if caller is not None:
            caller.require_owner_or_hide(operation.owner, "read this operation", NotFound(f"operation {operation_id!r} not found"))
        return operation.public.copy()
