"""Deferred commands: when a request ends in contention, replay it later through SQS.

A mutating request whose outcome is **contention** (conflicts, throttling or unknown outcomes
that outlasted the in-line retry budget) is safe to re-drive: the primitive that failed is
idempotent under its token or key. Instead of a 503, the API

1. writes an **operation record** ``OP#<operationId>`` / ``OP`` with status ``PENDING``,
2. sends a :class:`Command` (operation, payload, token) to the retry queue,
3. answers ``202 {"status": "PENDING", "operationId": ...}``.

The retry worker replays the command through the same layer primitive with the same token
and records the definite outcome (``APPLIED``/``DUPLICATE``/``REJECTED``) on the operation
record, once: a second delivery finds the record final and changes nothing. A command whose
replay is still contended is reported as a batch item failure, so SQS redelivers it after the
visibility timeout; after ``maxReceiveCount`` deliveries it lands in the DLQ, from where a
redrive to the source queue keeps the original token.

Nothing is acknowledged (202) before both the record and the message are stored; if either
write fails the caller gets the 503 and may retry the request itself.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3

from counters.auth import Caller
from counters.dynamo import RetryPolicy, client, from_item, read, to_item
from counters.errors import NotFound

logger = logging.getLogger(__name__)

OPERATION_TTL_SECONDS = 7 * 24 * 3600
MAX_MESSAGE_BYTES = 200_000  # SQS allows 256 KiB; stay well below


class PoisonMessage(ValueError):
    """A queue message that can never succeed (malformed, unknown operation): DLQ at once."""


@dataclass(frozen=True)
class Command:
    """One deferred mutating request: what to replay, with which token."""

    op: str
    payload: dict[str, Any]
    token: str
    operation_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: int = field(default_factory=lambda: int(time.time()))
    version: int = 1

    def to_message(self) -> str:
        body = json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)
        if len(body.encode()) > MAX_MESSAGE_BYTES:
            raise ValueError("command too large for a queue message")
        return body

    @classmethod
    def from_message(cls, body: str) -> Command:
        try:
            data = json.loads(body)
            command = cls(
                op=data["op"],
                payload=data["payload"],
                token=data["token"],
                operation_id=data["operation_id"],
                created_at=int(data["created_at"]),
                version=int(data.get("version", 1)),
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise PoisonMessage(f"malformed command: {exc}") from exc
        if (
            command.version != 1
            or not isinstance(command.payload, dict)
            or not all(isinstance(v, str) and v for v in (command.op, command.token, command.operation_id))
        ):
            raise PoisonMessage("malformed command")
        return command


def operation_key(operation_id: str) -> dict[str, str]:
    return {"PK": f"OP#{operation_id}", "SK": "OP"}


class Operations:
    """Operation records: PENDING until the worker writes the definite outcome, once."""

    def __init__(self, table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

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
        self.dynamodb.put_item(
            TableName=self.table_name,
            Item=to_item(item),
            ConditionExpression="attribute_not_exists(#pk)",  # an operation id is used once
            ExpressionAttributeNames={"#pk": "PK"},
            ReturnConsumedCapacity="TOTAL",
        )

    def record_outcome(self, command: Command, status: str, result: dict[str, Any]) -> bool:
        """Write the final status if the record is still PENDING; False if it was already final."""
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key=to_item(operation_key(command.operation_id)),
                UpdateExpression="SET #status = :status, #result = :result, #done = :now",
                # Only a PENDING record changes: a redelivered command leaves the first outcome.
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames={"#status": "status", "#result": "result", "#done": "completedAt"},
                ExpressionAttributeValues=to_item({":status": status, ":result": result, ":now": int(time.time()), ":pending": "PENDING"}),
                ReturnConsumedCapacity="TOTAL",
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def forget(self, operation_id: str) -> None:
        try:
            self.dynamodb.delete_item(
                TableName=self.table_name,
                Key=to_item(operation_key(operation_id)),
                ConditionExpression="#status = :pending",  # never erase a recorded outcome
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_item({":pending": "PENDING"}),
            )
        except Exception:  # noqa: BLE001 - best effort; the TTL removes it in any case
            logger.warning("could not remove an unqueued operation record", extra={"operationId": operation_id})

    def get(self, operation_id: str, *, caller: Caller | None = None) -> dict[str, Any] | None:
        """The public record, or None; with a ``caller``, someone else's operation is
        :class:`~counters.errors.Hidden` (answered as a missing one)."""
        response = read(
            self.dynamodb.get_item, self.retry, TableName=self.table_name, Key=to_item(operation_key(operation_id)), ConsistentRead=True
        )
        item = from_item(response.get("Item"))
        if item is None:
            return None
        if caller is not None:
            caller.require_owner_or_hide(item.get("owner"), "read this operation", NotFound(f"operation {operation_id!r} not found"))
        return {k: item[k] for k in ("operationId", "op", "status", "createdAt", "completedAt", "result") if k in item}


_sqs_lock = threading.Lock()
_sqs: Any = None


def sqs_client() -> Any:
    """The process-wide SQS client (honours AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL)."""
    global _sqs
    if _sqs is None:
        with _sqs_lock:
            if _sqs is None:
                _sqs = boto3.session.Session().client("sqs")
    return _sqs


def reset_sqs_client() -> None:
    global _sqs
    with _sqs_lock:
        _sqs = None


class Deferrer:
    """Turns a contended request into a PENDING operation and a queued command."""

    def __init__(self, table_name: str, queue_url: str, *, dynamodb: Any = None, sqs: Any = None) -> None:
        self.operations = Operations(table_name, dynamodb=dynamodb)
        self.queue_url = queue_url
        self._sqs = sqs

    @classmethod
    def from_env(cls) -> Deferrer | None:
        """``RETRY_QUEUE_URL`` and ``TABLE_NAME`` set: defer; otherwise ``None`` (answer 503)."""
        queue_url, table = os.environ.get("RETRY_QUEUE_URL"), os.environ.get("TABLE_NAME")
        return cls(table, queue_url) if queue_url and table else None

    def defer(self, op: str, payload: dict[str, Any], token: str | None = None, *, owner: str | None = None) -> Command:
        command = Command(op=op, payload=payload, token=token or uuid.uuid4().hex)
        try:
            self.operations.record_pending(command, owner)
            (self._sqs or sqs_client()).send_message(QueueUrl=self.queue_url, MessageBody=command.to_message())
        except Exception:
            # Not acknowledged: drop the PENDING record (best effort) so no operation claims to be queued.
            self.operations.forget(command.operation_id)
            raise
        return command


Executor = Callable[[Command], tuple[str, dict[str, Any]]]
"""Replays a command: returns (final status, result body) or raises ContentionError."""


class Replayer:
    """The retry worker's logic: replay a queued command once and record its outcome.

    * Already final (a redelivery, or a duplicate message): nothing is replayed.
    * Poison (malformed, unknown operation, invalid payload): sent to the DLQ at once and
      acknowledged, instead of burning every redelivery; its operation (if known) is REJECTED.
    * Still contended: :class:`~counters.errors.ContentionError` propagates, so the batch
      processor reports the message as an item failure and SQS redelivers it later.
    """

    def __init__(self, table_name: str, dlq_url: str, executors: dict[str, Executor], *, dynamodb: Any = None, sqs: Any = None) -> None:
        self.operations = Operations(table_name, dynamodb=dynamodb)
        self.dlq_url = dlq_url
        self.executors = executors
        self._sqs = sqs

    def replay(self, body: str, *, message_id: str = "", receive_count: int = 1) -> str:
        command: Command | None = None
        try:
            command = Command.from_message(body)
            executor = self.executors.get(command.op)
            if executor is None:
                raise PoisonMessage(f"unknown operation {command.op!r}")
            current = self.operations.get(command.operation_id)
            if current is not None and current["status"] != "PENDING":
                return "redelivered"
            status, result = executor(command)
        except PoisonMessage as exc:
            logger.error("poison message sent to the DLQ", extra={"messageId": message_id, "reason": str(exc)})
            (self._sqs or sqs_client()).send_message(
                QueueUrl=self.dlq_url,
                MessageBody=body,
                MessageAttributes={"poisonReason": {"DataType": "String", "StringValue": str(exc)[:256]}},
            )
            if command is not None:
                self.operations.record_outcome(command, "REJECTED", {"error": "invalid_command", "message": str(exc)})
            return "poison"
        first = self.operations.record_outcome(command, status, result)
        logger.info(
            "replayed",
            extra={"operationId": command.operation_id, "op": command.op, "status": status, "receiveCount": receive_count, "first": first},
        )
        return status.lower() if first else "redelivered"
