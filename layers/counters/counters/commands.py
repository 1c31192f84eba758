"""Deferred commands: when a request ends in contention, replay it later through SQS.

A mutating request whose outcome is **contention** (conflicts, throttling or unknown outcomes
that outlasted the in-line retry budget) is safe to re-drive: the primitive that failed is
idempotent under its token or key. The service raises
:class:`~counters.errors.ContentionError` carrying a :class:`Command`; instead of a 503, the API

1. writes an **operation record** ``OP#<operationId>`` / ``OP`` with status ``PENDING``,
2. sends the :class:`Command` (operation, typed payload, operation id) to the retry queue,
3. answers ``202 {"status": "PENDING", "operationId": ...}``.

The operation id **is the request's id**: the service drew it when the request started and
wrote it (``requestId``) on whatever the request creates (a like, a reservation record, a
ledger entry, an order's key record) or marks (a release). So when the worker's replay finds
the change already made, it can tell "this request made it" (an in-line attempt whose answer
was lost, or an earlier delivery whose outcome was never recorded) -> ``APPLIED``, from "another
request made it" -> ``DUPLICATE``. An unlike deletes what could carry the id: its replay
records its outcome in the same transaction as the change instead.

Each service registers its replayable operations (:class:`Replayable`: a payload dataclass that
validates itself, and an executor); the retry worker builds its registry from them. The
outcome (``APPLIED``/``DUPLICATE``/``REJECTED``) is recorded on the operation record once: a
second delivery finds the record final and changes nothing. A command whose replay is still
contended is reported as a batch item failure, so SQS redelivers it after the visibility
timeout; after ``maxReceiveCount`` deliveries it lands in the DLQ, from where a redrive to the
source queue keeps the operation id.

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
from counters.dynamo import CLIENT_CONFIG, Classified, RetryPolicy, client, from_item, to_item
from counters.engine import Report, Stop, guard, read, run
from counters.errors import ContentionError, NotFound
from counters.outcome import Outcome

logger = logging.getLogger(__name__)

OPERATION_TTL_SECONDS = 7 * 24 * 3600
MAX_MESSAGE_BYTES = 200_000  # SQS allows 256 KiB; stay well below


class PoisonMessage(ValueError):
    """A queue message that can never succeed (malformed, unknown operation): DLQ at once."""


def new_request_id() -> str:
    """The id of one mutating request (32 hex): its operation id if it is ever deferred."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Command:
    """One deferred mutating request: the operation, its payload, the request's id."""

    op: str
    payload: dict[str, Any]
    operation_id: str = field(default_factory=new_request_id)
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
                operation_id=data["operation_id"],
                created_at=int(data["created_at"]),
                version=int(data.get("version", 1)),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise PoisonMessage(f"malformed command: {exc}") from exc
        if (
            command.version != 1
            or not isinstance(command.payload, dict)
            or not all(isinstance(v, str) and v for v in (command.op, command.operation_id))
        ):
            raise PoisonMessage("malformed command")
        return command


@dataclass(frozen=True)
class Verdict:
    """What a replay did: the final status and result, and whether its own write recorded them."""

    status: str
    """APPLIED (this request made the change), DUPLICATE (another one had) or REJECTED."""
    result: dict[str, Any]
    recorded: bool | None = None
    """True: the replay's transaction recorded the outcome itself; False: it found the
    operation already final (a redelivery); None: record it now."""


@dataclass(frozen=True)
class Replayable:
    """One operation the retry worker can replay: its payload type and its executor."""

    payload: type
    """A frozen dataclass of the payload's fields; its ``__post_init__`` raises ValueError on bad values."""
    execute: Callable[[Any, Command], Verdict]

    def run(self, command: Command) -> Verdict:
        try:
            payload = self.payload(**command.payload)
        except (TypeError, ValueError) as exc:
            raise PoisonMessage(f"{command.op}: {exc}") from exc
        return self.execute(payload, command)


def require(ok: bool, message: str) -> None:
    """For payload ``__post_init__``: a bad field makes the message poison."""
    if not ok:
        raise ValueError(message)


def outcome_update(table_name: str, operation_id: str, status: str, result: dict[str, Any]) -> dict[str, Any]:
    """The UpdateItem parameters that make a PENDING operation final (also a transaction action)."""
    return {
        "TableName": table_name,
        "Key": to_item(operation_key(operation_id)),
        "UpdateExpression": "SET #status = :status, #result = :result, #done = :now",
        # Only a PENDING record changes: a redelivered command leaves the first outcome.
        "ConditionExpression": "#status = :pending",
        "ExpressionAttributeNames": {"#status": "status", "#result": "result", "#done": "completedAt"},
        "ExpressionAttributeValues": to_item({":status": status, ":result": result, ":now": int(time.time()), ":pending": "PENDING"}),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


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
    """The process-wide SQS client (honours AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL); like the
    DynamoDB client, SDK retries are off and every call runs in :func:`counters.engine.run`."""
    global _sqs
    if _sqs is None:
        with _sqs_lock:
            if _sqs is None:
                _sqs = boto3.session.Session().client("sqs", config=CLIENT_CONFIG)  # SDK retries off: the engine retries
                guard(_sqs.meta.events, "sqs")
    return _sqs


def reset_sqs_client() -> None:
    global _sqs
    with _sqs_lock:
        _sqs = None


def send(sqs: Any, policy: RetryPolicy, **params: Any) -> dict[str, Any]:
    """SendMessage through the engine. A re-send after an unknown outcome may queue the message
    twice: harmless, a command replays once (its operation record is final after the first)."""
    report = run(sqs.send_message, params, policy=policy)
    if report.response is None:
        raise ContentionError("the retry queue did not take the message", cause_code=report.failure.code if report.failure else None)
    return report.response


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

    def defer(self, command: Command, *, owner: str | None = None) -> Command:
        try:
            self.operations.record_pending(command, owner)
            send(self._sqs or sqs_client(), self.operations.retry, QueueUrl=self.queue_url, MessageBody=command.to_message())
        except Exception:
            # Not acknowledged: drop the PENDING record (best effort) so no operation claims to be queued.
            self.operations.forget(command.operation_id)
            raise
        return command


class Replayer:
    """The retry worker's logic: replay a queued command once and record its outcome.

    * Already final (a redelivery, or a duplicate message): nothing is replayed.
    * Poison (malformed, unknown operation, invalid payload): sent to the DLQ at once and
      acknowledged, instead of burning every redelivery; its operation (if known) is REJECTED.
    * Still contended: :class:`~counters.errors.ContentionError` propagates, so the batch
      processor reports the message as an item failure and SQS redelivers it later.
    """

    def __init__(
        self,
        table_name: str,
        dlq_url: str,
        executors: dict[str, Replayable],
        *,
        dynamodb: Any = None,
        sqs: Any = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.operations = Operations(table_name, dynamodb=dynamodb, retry=retry)
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
            verdict = executor.run(command)
        except PoisonMessage as exc:
            logger.error("poison message sent to the DLQ", extra={"messageId": message_id, "reason": str(exc)})
            send(
                self._sqs or sqs_client(),
                self.operations.retry,
                QueueUrl=self.dlq_url,
                MessageBody=body,
                MessageAttributes={"poisonReason": {"DataType": "String", "StringValue": str(exc)[:256]}},
            )
            if command is not None:
                self.operations.record_outcome(command, "REJECTED", {"error": "invalid_command", "message": str(exc)})
            return "poison"
        if verdict.recorded is None:
            first = self.operations.record_outcome(command, verdict.status, verdict.result)
        else:
            first = verdict.recorded
        logger.info(
            "replayed",
            extra={
                "operationId": command.operation_id,
                "op": command.op,
                "status": verdict.status,
                "receiveCount": receive_count,
                "first": first,
            },
        )
        return verdict.status.lower() if first else "redelivered"
