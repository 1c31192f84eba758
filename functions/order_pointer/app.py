"""Order pointer updates: advance POINTER#LAST_ORDER from the table's DynamoDB Stream.

Why a stream, not an inline write after the order
    The pointer is derived data. Inline, every order would pay one more write on the request
    path, and an order whose request dies between the two writes would never move the
    pointer (a 503 after the order committed, a Lambda timeout). The stream carries every
    committed ``ORDER#`` INSERT at least once, whoever wrote it and however its request
    ended, and its retries live outside the API's latency budget.

Why reordering is harmless
    Records of one shard arrive in order, but shards are processed in parallel, batches are
    retried, and records are redelivered. :meth:`counters.primitives.pointer.Pointer.advance` is one
    conditional write (``attribute_not_exists(#v) OR #v < :new``): a late or repeated
    update is ``rejected``/``duplicate``, never a step backward.

One write per batch
    Only the greatest order id of a batch can move the pointer, so the record handler skips
    every record below the batch's maximum (the maximum covers them) and advances once.
    Partial failures stay exact: if the advance fails, only that record is reported in
    ``batchItemFailures``, Lambda restarts the shard from it, and the skipped records before
    it are covered by it when the retry succeeds.

Across Regions (docs/orders.md "Global tables")
    On an MREC table each Region's function advances only its **own** Region's pointer item, from
    the orders **its** Region placed (``writerRegion``, stamped by the orders service): each
    Region's stream also carries the orders replicated into it, and this function skips them (their
    Region's own function counts them there). ``GET /orders/latest`` reads the max over Regions. On
    MRSC (and one Region) every record moves the one pointer item.

The event source filter (template.yaml) delivers only INSERTs of ``ORDER#`` items; the
handler checks again, so an unfiltered stream (the local stack, a misconfiguration) is safe.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.errors import ContentionError
from counters.core.json import JSONObject
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.primitives.pointer import Pointer
from counters.runtime.batch import (
    BatchProcessor,
    DynamoDBRecord,
    DynamoDBRecordEventName,
    EventType,
    PartialItemFailureResponse,
    process_partial_response,
)
from counters.runtime.function import Function
from counters.runtime.metrics import record as record_metrics
from counters.services.orders import POINTER, order_id_from_pk, order_policy, placed_here


@dataclass(frozen=True, kw_only=True)
class Settings(RegionSettings):
    """This function's environment: the table and the global table's topology."""


def pointer(settings: Settings) -> Pointer:
    """The LAST_ORDER pointer of this Region, with the orders feature's Region policy."""
    policy = order_policy(settings.topology)
    return Pointer(settings.table_name, POINTER, attribute="orderId", retry=settings.retry, policy=policy)


function = Function(Settings, pointer)
metrics = function.metrics
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def new_order_id(record: DynamoDBRecord) -> int | None:
    """The order id of an ``ORDER#`` INSERT this Region placed; ``None`` for any other record
    (on MREC: an order replicated in from another Region, whose own pointer counts it)."""
    if record.event_name is not DynamoDBRecordEventName.INSERT or record.dynamodb is None:
        return None
    if not placed_here(record.dynamodb.new_image, function.service.policy):
        return None
    return order_id_from_pk(str(record.dynamodb.keys.get("PK", "")))


@function.handler()
def lambda_handler(event: JSONObject, context: LambdaContext) -> PartialItemFailureResponse:
    records = event.get("Records")
    ids = [new_order_id(DynamoDBRecord(raw)) for raw in records if isinstance(raw, dict)] if isinstance(records, list) else []
    highest = max((i for i in ids if i is not None), default=0)  # 0: no order in the batch (ids start at 1)

    def advance(record: DynamoDBRecord) -> str:
        order_id = new_order_id(record)
        if order_id is None or order_id < highest:
            return "skipped"  # not an order, or covered by the batch's greatest id
        result = function.service.advance(order_id)
        record_metrics(metrics, "AdvancePointer", result)
        if result.outcome is Outcome.CONTENTION:
            raise ContentionError(f"pointer not advanced to {order_id} ({result.reason}); the stream retries it")
        return result.outcome.value  # applied, duplicate (redelivery) or rejected (stale): all done

    return process_partial_response(event=event, record_handler=advance, processor=processor, context=context)
