"""MREC escrow with no operator: this Region's stream credits transfers and gives back double takes.

On an MREC global table each Region owns a share of every resource's capacity
(docs/reservations.md "Global tables"). Two chores used to wait for someone to call a route:

* **step 2 of a transfer**: when a transfer to this Region arrives in its replica (the template's
  filter delivers ``RES#<id>#XFER`` items), credit it: one local transaction with its receipt,
  exactly once whatever the redeliveries;
* **reconcile a failover double take**: when a CONFIRMED reservation record arrives (``RSV#``), this
  Region's or another's, and this Region also took the key during a partition, the Region whose
  record is not the first gives its own back (the usual ``CONFIRMED``-guarded release, once).

The logic is :class:`counters.services.escrow_automation.EscrowAutomation`; the records are read by
:mod:`counters.streams.escrow`. Partial failures: a record whose action met contention (or whose
items have not replicated here yet) is reported in ``batchItemFailures``; Lambda restarts the shard
from it, and the actions before it are idempotent, so a redelivery changes nothing twice.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.json import JSONObject
from counters.core.records import dataclass
from counters.runtime.batch import BatchProcessor, DynamoDBRecord, EventType, PartialItemFailureResponse, process_partial_response
from counters.runtime.function import Function
from counters.services.escrow_automation import EscrowAutomation
from counters.services.reservations import ReservationSettings
from counters.streams.escrow import act


@dataclass(frozen=True, kw_only=True)
class Settings(ReservationSettings):
    """This function's environment: the table, the global table's topology, the atomic policy."""


function = Function(Settings, EscrowAutomation.from_settings)
metrics = function.metrics
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def handle(record: DynamoDBRecord) -> str:
    done = act(function.service, record.raw_event)  # raises on contention: this record is reported failed
    if done is None:
        return "skipped"
    return f"credited {done.credited}" if done.credited else ("reconciled" if done.reconciled else "nothing to do")


@function.handler()
def lambda_handler(event: JSONObject, context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=handle, processor=processor, context=context)
