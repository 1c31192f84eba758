"""Resources' transfers (MREC escrow): units moved from one Region's share to another's.

| item | PK | SK |
|---|---|---|
| transfer | ``RES#<id>#XFER`` | ``<transferId>``: units leaving a Region (its writer) |
| transfer receipt | ``RES#<id>#XFER`` | ``<transferId>#IN``: their receipt (the target's) |

The source Region debits its share and writes the transfer in one transaction; the target Region
credits its own share and writes the receipt once the transfer reaches its replica (``counters.streams.escrow``).
Here: the keys, shapes and writer rules, the transfer as read ([`Transfer`][counters.store.resources_transfers.Transfer])
and its Put; [`ResourceStore`][counters.store.resources.ResourceStore] makes the calls.
"""

from __future__ import annotations

import time
import uuid

from counters.core.records import dataclass
from counters.store.expr import Put
from counters.store.layout import Shape
from counters.store.resources_counters import IS_NEW, Fields, Key
from counters.store.tables import Op, Table
from counters.store.writers import REFUSED, WriterRule, per_region, refused

SHAPES: tuple[Shape, ...] = (
    Shape(
        "transfer", "RES#<id>#XFER", "<transferId>", "MREC escrow: units sent from one Region's share to another's (written by the sender)"
    ),
    Shape(
        "transfer receipt",
        "RES#<id>#XFER",
        "<transferId>#IN",
        "MREC escrow: the target Region credited the transfer (written by the target)",
    ),
)
WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "transfer receipt",
        "RES#<id>#XFER",
        "<transferId>#IN",
        REFUSED,
        per_region("own"),
        REFUSED,
        "written only by the transfer's target Region (its `target`), once per transfer",
        region_attribute="target",
    ),
    WriterRule(
        "transfer",
        "RES#<id>#XFER",
        "<transferId>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "its id is derived from (resource, source Region, Idempotency-Key) and only the source Region (its `source`) writes it: "
        "the same key sent in two Regions is two transfers, each debited and credited once",
        region_attribute="source",
    ),
)
_ESCROW_ONLY = (
    "they move escrowed shares between the Regions of an MREC global table; here one counter serves every Region "
    "(docs/reservations.md, Global tables)"
)
TABLE = Table(
    "resources_transfers",
    WRITERS,
    {
        "transfer": Op("transfers", ("transfer", "transfer receipt"), refused(_ESCROW_ONLY), per_region("own"), refused(_ESCROW_ONLY)),
    },
)
"""The transfers' (operation x mode) table ([`counters.store.tables`][counters.store.tables]): a transfer is MREC's alone."""

SOURCE, TARGET = "source", "target"  # a transfer's Regions
RECEIPT = "#IN"
"""The suffix of a receipt's sort key (``<transferId>#IN``)."""


def transfers_pk(resource_id: str) -> str:
    """The partition key of a resource's transfers."""
    return f"RES#{resource_id}#XFER"


TRANSFERS = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
"""The uuid5 namespace of transfer ids (the reservations service's)."""


def transfer_id(resource_id: str, source: str, idempotency_key: str) -> str:
    """A transfer's id: its resource, its source Region and its key (the source is part of its
    identity: the same key sent in two Regions is two transfers, never one record two Regions write)."""
    return str(uuid.uuid5(TRANSFERS, f"{resource_id}\ntransfer\n{source}\n{idempotency_key}"))


def transfer_key(resource_id: str, transfer_id: str, *, receipt: bool = False) -> Key:
    """The key of a transfer (or, with ``receipt``, of its receipt)."""
    return {"PK": transfers_pk(resource_id), "SK": transfer_id + (RECEIPT if receipt else "")}


@dataclass(frozen=True)
class Transfer:
    """Units sent from one Region's share to another's (MREC escrow); ``received``: its receipt exists here."""

    transfer_id: str
    source: str
    target: str
    quantity: int
    request_id: str = ""
    received: bool = False


def transfer_put(table: str, resource_id: str, transfer_id: str, fields: Fields, *, receipt: bool = False) -> Put:
    """A transfer (written by its source Region) or its receipt (by its target), never overwritten."""
    item = {**transfer_key(resource_id, transfer_id, receipt=receipt), **fields, "createdAt": int(time.time())}
    return Put(table, item=item).when(IS_NEW)
