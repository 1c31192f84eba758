"""An MREC Region's stream, read for what escrow does by itself ([docs/reservations.md, "Global tables"](../reservations.md#global-tables)).

Two kinds of record matter, and the template's filter (``EscrowFunction``'s ``FilterCriteria``)
delivers only them; [`escrow_event`][counters.streams.escrow.escrow_event] checks again, so an unfiltered stream is safe:

* a **transfer** (``RES#<id>#XFER`` / ``<transferId>``, written once by its source Region) as it
  appears in a Region's replica: [`TransferArrived`][counters.streams.escrow.TransferArrived]. Its target credits it (step 2);
* a **reservation record** (``RSV#<reservationId>`` / ``RSV@<region>``) that is ``CONFIRMED``, of
  this Region or replicated in: [`RecordArrived`][counters.streams.escrow.RecordArrived]. When two Regions both took the key (a
  failover re-send during a partition), the later one gives its own back.

Receipts (``<transferId>#IN``), released records and every other item are ``None``: nothing to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counters.core.records import dataclass
from counters.services.escrow_automation import Done, EscrowAutomation
from counters.store.items import from_item
from counters.store.resources_records import STATUS, Status
from counters.store.resources_transfers import RECEIPT, SOURCE, TARGET

__all__ = ["RecordArrived", "TransferArrived", "act", "escrow_event"]

TRANSFERS_SUFFIX = "#XFER"
RESOURCE_PREFIX, RECORD_PREFIX = "RES#", "RSV#"


@dataclass(frozen=True)
class TransferArrived:
    """A transfer is in this Region's replica (written here, or replicated in)."""

    resource_id: str
    transfer_id: str
    source: str
    target: str


@dataclass(frozen=True)
class RecordArrived:
    """A CONFIRMED reservation record of ``region`` is in this Region's replica."""

    resource_id: str
    reservation_id: str
    region: str


def escrow_event(record: Mapping[str, Any]) -> TransferArrived | RecordArrived | None:
    """A stream record (as Lambda delivers it; NEW_IMAGE or NEW_AND_OLD_IMAGES) as what escrow
    does about it, or ``None`` (a removal, a receipt, a record not CONFIRMED, any other item)."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return None
    ddb = record.get("dynamodb") or {}
    item = from_item({**(ddb.get("NewImage") or {}), **(ddb.get("Keys") or {})}) or {}
    pk, sk = str(item.get("PK", "")), str(item.get("SK", ""))
    if pk.startswith(RESOURCE_PREFIX) and pk.endswith(TRANSFERS_SUFFIX):
        if sk.endswith(RECEIPT) or SOURCE not in item or TARGET not in item:
            return None
        resource_id = pk.removeprefix(RESOURCE_PREFIX).removesuffix(TRANSFERS_SUFFIX)
        return TransferArrived(resource_id, sk, str(item[SOURCE]), str(item[TARGET]))
    if pk.startswith(RECORD_PREFIX) and sk.startswith("RSV@") and item.get(STATUS) == Status.CONFIRMED.value:
        owner = item.get("resourceId")
        if not isinstance(owner, str):
            return None
        return RecordArrived(owner, pk.removeprefix(RECORD_PREFIX), sk.removeprefix("RSV@"))
    return None


def act(automation: EscrowAutomation, record: Mapping[str, Any]) -> Done | None:
    """Do what one stream record asks of this Region (``None``: nothing). Raises what the action
    raises ([`ContentionError`][counters.core.errors.ContentionError] while a transfer is not credited, a busy
    release): the caller reports the record failed and it is redelivered."""
    found = escrow_event(record)
    if isinstance(found, TransferArrived):
        return automation.transfer_arrived(found.resource_id, found.transfer_id, found.target)
    if isinstance(found, RecordArrived):
        return automation.record_arrived(found.resource_id, found.reservation_id)
    return None
