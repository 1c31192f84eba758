"""Retry worker: replays deferred commands from the retry queue, exactly once each.

Powertools BatchProcessor + process_partial_response (ReportBatchItemFailures): a command
still contended is an item failure (SQS redelivers it after the visibility timeout); a
poison message goes straight to the DLQ; a definite outcome is recorded on the operation.
"""

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.json import JSONObject
from counters.core.records import dataclass
from counters.deferral.queue import Replayer, ReplaySettings
from counters.runtime.batch import BatchProcessor, EventType, PartialItemFailureResponse, SQSRecord, process_partial_response
from counters.runtime.function import Function
from counters.services.ledgers import Ledgers, LedgerSettings
from counters.services.likes import Likes, LikeSettings
from counters.services.orders import Orders, OrderSettings
from counters.services.reservations import Reservations, ReservationSettings


@dataclass(frozen=True, kw_only=True)
class Settings(ReplaySettings, ReservationSettings, OrderSettings, LedgerSettings, LikeSettings):
    """This function's environment: the DLQ, and what every replayed service reads."""


def replayer(settings: Settings) -> Replayer:
    """Every service's replayable operations, by name."""
    replayables = {
        **Likes.from_settings(settings).replayables(),
        **Reservations.from_settings(settings).replayables(),
        **Orders.from_settings(settings).replayables(),
        **Ledgers.from_settings(settings).replayables(),
    }
    return Replayer(settings.table_name, settings.retry_dlq_url, executors=replayables, retry=settings.retry)


function = Function(Settings, replayer)
metrics = function.metrics
# A batch whose every record failed is still a partial response (all items), not an invocation error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    status = function.service.replay(
        record.body, message_id=record.message_id, receive_count=int(record.attributes.approximate_receive_count)
    )
    metrics.add_metric(name=f"Replay.{status}", unit=MetricUnit.Count, value=1)


@function.handler()
def lambda_handler(event: JSONObject, context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
