"""Powertools' batch utility and the records it hands a stream or SQS consumer, imported after the
light event data classes ([`counters.runtime.light`][counters.runtime.light]).

A consumer's ``app.py`` takes these from here: importing ``aws_lambda_powertools.utilities.batch``
(or an event module) before the layer would run the data classes' ``__init__``, every event
Powertools knows. Powertools' batch ``base`` still imports asyncio itself.
"""

from __future__ import annotations

from counters.core.extras import needs_lambda_extra

try:
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord, DynamoDBRecordEventName
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
except ModuleNotFoundError as missing:  # without the [lambda] extra: say what to install
    raise needs_lambda_extra(__name__, missing) from missing

__all__ = [
    "BatchProcessor",
    "DynamoDBRecord",
    "DynamoDBRecordEventName",
    "EventType",
    "PartialItemFailureResponse",
    "SQSRecord",
    "process_partial_response",
]
