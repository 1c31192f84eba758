"""Deferred commands: when a request ends in contention, replay it later through SQS.

A mutating request whose outcome is **contention** (conflicts, throttling or unknown outcomes
that outlasted the in-line retry budget) is safe to re-drive: the primitive that failed is
idempotent under its token or key. The service raises
[`ContentionError`][counters.core.errors.ContentionError] carrying a [`Command`][counters.core.commands.Command]; instead of a 503, the API

1. writes an **operation record** ``OP#<operationId>`` / ``OP`` with status ``PENDING``,
2. sends the [`Command`][counters.core.commands.Command] (operation, typed payload, operation id) to the retry queue,
3. answers ``202 {"status": "PENDING", "operationId": ...}``.

The operation id **is the request's id**: the service drew it when the request started and
wrote it (``requestId``) on whatever the request creates (a like, a reservation record, a
ledger entry, an order's key record) or marks (a release). So when the worker's replay finds
the change already made, it can tell "this request made it" (an in-line attempt whose answer
was lost, or an earlier delivery whose outcome was never recorded) -> ``APPLIED``, from "another
request made it" -> ``DUPLICATE`` (an unlike keeps the like item as a tombstone carrying the id).
A like/unlike also carries the time the API received it: a replay overtaken by a newer request
of the same user on the same post is ``REJECTED`` as stale.

Each service registers its replayable operations ([`Replayable`][counters.core.commands.Replayable]: a payload dataclass that
validates itself, and an executor); the retry worker builds its registry from them. The
outcome (``APPLIED``/``DUPLICATE``/``REJECTED``) is recorded on the operation record once: a
second delivery finds the record final and changes nothing. A replay that meets a definite
refusal (an error class that is ``final``) is ``REJECTED`` with the error's code; a command whose
replay is still contended (or meets any other error) is reported as a batch item failure, so
SQS redelivers it after the visibility timeout; after ``maxReceiveCount`` deliveries it lands in
the DLQ, from where a redrive to the source queue keeps the operation id.

Nothing is acknowledged (202) before both the record and the message are stored; if either
write fails the caller gets the 503 and may retry the request itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from counters.core.client import DynamoDBClient, Response, SQSClient, sqs_client
from counters.core.commands import Command, PoisonMessage, Replayable, never
from counters.core.engine import run
from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.json import json_object
from counters.core.records import dataclass
from counters.core.settings import Settings, env
from counters.deferral.operations import Operations
from counters.deferral.settings import DeferralSettings

logger = logging.getLogger(__name__)


def send(sqs: SQSClient, policy: RetryPolicy, **params: object) -> Response:
    """SendMessage through the engine. A re-send after an unknown outcome may queue the message
    twice: harmless, a command replays once (its operation record is final after the first)."""
    report = run(sqs.send_message, params, policy=policy)
    if report.response is None:
        raise ContentionError("the retry queue did not take the message", cause_code=report.failure.code if report.failure else None)
    return report.response


@dataclass(frozen=True, kw_only=True)
class ReplaySettings(Settings):
    """The retry worker's dead-letter queue, where poison messages go."""

    retry_dlq_url: str = env("RETRY_DLQ_URL")


class Deferrer:
    """Turns a contended request into a PENDING operation and a queued command."""

    def __init__(
        self,
        table_name: str,
        queue_url: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        sqs: SQSClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.operations = Operations(table_name, dynamodb=dynamodb, retry=retry)
        self.queue_url = queue_url
        self._sqs = sqs

    @classmethod
    def from_settings(cls, settings: DeferralSettings) -> Deferrer | None:
        """A retry queue configured: defer; otherwise ``None`` (contention answers 503)."""
        if not settings.retry_queue_url:
            return None
        return cls(settings.table_name, settings.retry_queue_url, retry=settings.retry)

    def defer(self, command: Command, *, owner: str | None = None) -> Command:
        """Record ``command`` as PENDING, then queue it; if queueing fails the record is dropped and the error raised (nothing acknowledged)."""
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
    * A definite refusal (an error whose class is [`final`][counters.core.errors.CounterError.final]):
      the operation is ``REJECTED`` with the error's code ([`Replayable.run`][counters.core.commands.Replayable.run], for every operation).
    * Still contended, or any error that is not final: it propagates, so the batch processor
      reports the message as an item failure and SQS redelivers it later (then the DLQ).
    * Stopped before the function's timeout (``should_stop``, a
      [`stoppable`][counters.core.commands.Replayable.stoppable] operation: a grown post's sweep):
      the rest of the work ([`Verdict.then`][counters.core.commands.Verdict.then]) is queued on the
      retry queue (``queue_url``) before this message is acknowledged, so it goes on at once
      instead of being killed and redelivered after the queue's visibility timeout. The queue
      did not take it: the error propagates (redelivered, the work resumes from what was kept).
    """

    def __init__(
        self,
        table_name: str,
        dlq_url: str,
        executors: dict[str, Replayable],
        *,
        queue_url: str | None = None,
        dynamodb: DynamoDBClient | None = None,
        sqs: SQSClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.operations = Operations(table_name, dynamodb=dynamodb, retry=retry)
        self.dlq_url = dlq_url
        self.queue_url = queue_url
        self.executors = executors
        self._sqs = sqs

    def replay(self, body: str, *, message_id: str = "", receive_count: int = 1, should_stop: Callable[[], bool] = never) -> str:
        """Replay one queued command's body once and record its outcome; what happened (``redelivered``:
        already final, ``poison``: sent to the DLQ, ``continued``: the rest queued, or the verdict's status)."""
        command: Command | None = None
        try:
            command = Command.from_message(body)
            executor = self.executors.get(command.op)
            if executor is None:
                raise PoisonMessage(f"unknown operation {command.op!r}")
            current = self.operations.read(command.operation_id)
            if current is not None and current["status"] != "PENDING":
                return "redelivered"
            verdict = executor.run(command, should_stop)
        except PoisonMessage as exc:
            try:
                send(
                    self._sqs or sqs_client(),
                    self.operations.retry,
                    QueueUrl=self.dlq_url,
                    MessageBody=body,
                    MessageAttributes={"poisonReason": {"DataType": "String", "StringValue": str(exc)[:256]}},
                )
            except Exception as failure:
                # Not acknowledged: the batch reports the message, SQS redelivers it (and after
                # maxReceiveCount its redrive policy moves it to the DLQ). Say why the send failed.
                logger.exception(
                    "poison message NOT sent to the DLQ; left on the retry queue",
                    extra={"messageId": message_id, "reason": str(exc), "errorCode": _error_code(failure), "dlqUrl": self.dlq_url},
                )
                raise
            logger.error("poison message sent to the DLQ", extra={"messageId": message_id, "reason": str(exc)})
            if command is not None:
                self.operations.record_outcome(command, "REJECTED", {"error": "invalid_command", "message": str(exc)})
            return "poison"
        if verdict.then is not None:
            self._continue(command, verdict.then)
            return "continued"
        if current is None:
            first = True  # no record to make final: a command no API request is waiting on (the like aggregator's merge-likes)
        elif verdict.recorded is None:
            first = self.operations.record_outcome(command, verdict.status, json_object(verdict.result))
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

    def _continue(self, command: Command, then: Command) -> None:
        """Queue the rest of ``command``'s work; ``ContentionError`` if there is no queue or it did not take it."""
        if not self.queue_url:
            raise ContentionError(f"{command.op} stopped before the timeout and there is no retry queue to go on from")
        send(self._sqs or sqs_client(), self.operations.retry, QueueUrl=self.queue_url, MessageBody=then.to_message())
        logger.info("continued", extra={"operationId": command.operation_id, "op": command.op, "next": then.operation_id})


def _error_code(exc: BaseException) -> str:
    """The AWS error code behind a failed call (a ContentionError's cause), or the exception's type."""
    code = getattr(exc, "cause_code", None)
    if code:
        return str(code)
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code") or type(exc).__name__)
    return type(exc).__name__
