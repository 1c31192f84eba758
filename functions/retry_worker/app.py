"""Retry worker: replays deferred commands from the retry queue, exactly once each.

Powertools BatchProcessor + process_partial_response (ReportBatchItemFailures): a command
still contended is an item failure (SQS redelivers it after the visibility timeout); a
poison message goes straight to the DLQ; a definite outcome is recorded on the operation. A
long command no request waits on (a grown post's sweep) starts no call once less than
``STOP_BEFORE_TIMEOUT_MS`` is left and queues the rest on RetryQueue, instead of being killed at
the timeout and redelivered after the queue's 90 s visibility timeout.
"""

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.json import JSONObject
from counters.core.records import dataclass
from counters.deferral.queue import Replayer, ReplaySettings
from counters.deferral.settings import DeferralSettings
from counters.runtime.batch import BatchProcessor, EventType, PartialItemFailureResponse, SQSRecord, process_partial_response
from counters.runtime.function import Function
from counters.services.ledgers import Ledgers, LedgerSettings
from counters.services.likes import Likes
from counters.services.likes.model import LikeSettings
from counters.services.orders import Orders, OrderSettings
from counters.services.reservations import Reservations, ReservationSettings


@dataclass(frozen=True, kw_only=True)
class Settings(ReplaySettings, DeferralSettings, ReservationSettings, OrderSettings, LedgerSettings, LikeSettings):
    """This function's environment: the DLQ, the retry queue (the rest of a sweep that stopped
    before the timeout), and what every replayed service reads."""


def replayer(settings: Settings) -> Replayer:
    """Every service's replayable operations, by name."""
    replayables = {
        **Likes.from_settings(settings).replayables(),
        **Reservations.from_settings(settings).replayables(),
        **Orders.from_settings(settings).replayables(),
        **Ledgers.from_settings(settings).replayables(),
    }
    return Replayer(
        settings.table_name, settings.retry_dlq_url, executors=replayables, queue_url=settings.retry_queue_url, retry=settings.retry
    )


function = Function(Settings, replayer)
metrics = function.metrics
# A batch whose every record failed is still a partial response (all items), not an invocation error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
STOP_BEFORE_TIMEOUT_MS = 8000
"""A sweep starts no DynamoDB call with less left (asked before every attempt: the call in flight and
its answer's write of ``swept`` fit in it)."""


def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
    """One message; Powertools passes ``lambda_context`` (the parameter's name) when the handler was given a context."""
    status = function.service.replay(
        record.body,
        message_id=record.message_id,
        receive_count=int(record.attributes.approximate_receive_count),
        should_stop=lambda: lambda_context is not None and lambda_context.get_remaining_time_in_millis() < STOP_BEFORE_TIMEOUT_MS,
    )
    metrics.add_metric(name=f"Replay.{status}", unit=MetricUnit.Count, value=1)


@function.handler()
def lambda_handler(event: JSONObject, context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
