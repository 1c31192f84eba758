"""Retry worker: replays deferred commands from the retry queue, exactly once each.

Powertools BatchProcessor + process_partial_response (ReportBatchItemFailures): a command
still contended is an item failure (SQS redelivers it after the visibility timeout); a
poison message goes straight to the DLQ; a definite outcome is recorded on the operation.
"""

import os

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.failures import RetryPolicy
from counters.deferral.queue import Replayer
from counters.primitives.sequence import SequenceMode
from counters.services.ledgers import Ledgers
from counters.services.likes import Likes
from counters.services.orders import Orders
from counters.services.reservations import Reservations

TABLE_NAME = os.environ["TABLE_NAME"]  # read once at cold start
DLQ_URL = os.environ["RETRY_DLQ_URL"]

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"counters"})
# A batch whose every record failed is still a partial response (all items), not an invocation error.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
RETRY = RetryPolicy.from_env()
REPLAYABLES = {
    **Likes(TABLE_NAME, retry=RETRY).replayables(),
    **Reservations(TABLE_NAME, retry=RETRY, atomic_policy=os.environ.get("ATOMIC_POLICY", "under")).replayables(),
    **Orders(TABLE_NAME, retry=RETRY, mode=SequenceMode(os.environ.get("SEQUENCE_MODE", SequenceMode.FAST))).replayables(),
    **Ledgers(
        TABLE_NAME,
        retry=RETRY,
        retry_window=float(os.environ.get("LEDGER_RETRY_WINDOW_SECONDS", "600")),
        margin=float(os.environ.get("LEDGER_COMPACTION_MARGIN_SECONDS", "900")),
    ).replayables(),
}
replayer = Replayer(TABLE_NAME, DLQ_URL, executors=REPLAYABLES, retry=RETRY)


def record_handler(record: SQSRecord) -> None:
    status = replayer.replay(record.body, message_id=record.message_id, receive_count=int(record.attributes.approximate_receive_count))
    metrics.add_metric(name=f"Replay.{status}", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
