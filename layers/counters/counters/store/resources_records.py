"""Reservation records: one per request token, the double-apply guard (and approach 5's marker).

| item | PK | SK |
|---|---|---|
| reservation | ``RSV#<reservationId>`` | ``RSV``: quantity, status, allocation, ``requestId`` (the marker of approach 5); MREC: ``RSV@<region>``, one per Region |

Here: the key, shape and writer rules, the attribute names, the [`Status`][counters.store.resources_records.Status]
and the record as read ([`Record`][counters.store.resources_records.Record]) and its Put;
[`ResourceStore`][counters.store.resources.ResourceStore] makes the calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from counters.core.records import dataclass
from counters.core.regions import REGION_ATTRIBUTE
from counters.store.expr import Put
from counters.store.layout import Shape
from counters.store.resources_counters import IS_NEW, Fields, Key
from counters.store.tables import Op, Table
from counters.store.writers import ANY, HOME, REFUSED, WriterRule, per_region

SHAPES: tuple[Shape, ...] = (
    Shape(
        "reservation",
        "RSV#<reservationId>",
        "RSV (MREC: RSV@<region>, one per Region)",
        "quantity, status, allocation, `requestId`; the marker of approach 5; TTL only once released",
    ),
)
WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "reservation record of a Region",
        "RSV#<reservationId>",
        "RSV@<Region>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "a failover re-send taken in two Regions keeps both records, and the later one is given back by `reconcile`; released "
        "only in the Region that took the units",
    ),
    WriterRule(
        "reservation record",
        "RSV#<reservationId>",
        "RSV",
        HOME,
        REFUSED,
        ANY,
        "MRSC: its create's condition sees every Region (one record per request token)",
    ),
)
TABLE = Table(
    "resources_records",
    WRITERS,
    {"record": Op("a reservation record", tuple(w.item for w in WRITERS))},
)
"""The records' (operation x mode) table: each record is written as its shape's rule says."""

STATUS, QUANTITY, ALLOCATION = "status", "quantity", "allocation"  # a transfer holds its quantity and requestId too
REQUEST_ID, RELEASED_BY, RELEASED_AT, EXPIRES_AT = "requestId", "releasedBy", "releasedAt", "expiresAt"


class Status(StrEnum):
    """A reservation record's status."""

    CONFIRMED = "CONFIRMED"
    RELEASED = "RELEASED"
    PENDING = "PENDING"  # atomic/occ with a key: claimed, not yet applied
    RELEASING = "RELEASED_PENDING"  # MRSC: released, the give-back not yet confirmed (no transaction to do both)
    UNKNOWN = "UNKNOWN"  # atomic/occ: the outcome is unknown (it may hold the quantity)


def record_key(token: str, region: str = "") -> Key:
    """The reservation record (the marker of approach 5) of a request token. On an MREC table each
    Region writes its own (``RSV@<region>``): a failover re-send taken in another Region during a
    partition never overwrites (or, dropping its claim, deletes) the first Region's record."""
    return {"PK": f"RSV#{token}", "SK": f"RSV@{region}" if region else "RSV"}


@dataclass(frozen=True)
class Record:
    """A reservation record (or approach 5's marker)."""

    reservation_id: str
    quantity: int
    status: Status
    resource_id: str | None = None
    request_id: str | None = None
    owner: str | None = None
    allocation: dict[str, int] | None = None
    created_at: int = 0
    released_at: int | None = None
    released_by: str | None = None
    region: str = ""
    """The Region that wrote it (multi-Region tables): an escrowed hold is given back there only."""

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Record | None:
        """The record an item holds, or None."""
        if not item:
            return None
        allocation = item.get(ALLOCATION)
        released_at = item.get(RELEASED_AT)
        return cls(
            reservation_id=str(item.get("reservationId") or str(item["PK"]).removeprefix("RSV#")),
            quantity=int(item.get(QUANTITY, -1)),
            status=Status(item.get(STATUS, Status.CONFIRMED)),
            resource_id=item.get("resourceId"),
            request_id=item.get(REQUEST_ID),
            owner=item.get("owner"),
            allocation={str(k): int(v) for k, v in allocation.items()} if allocation is not None else None,
            created_at=int(item.get("createdAt", 0)),
            released_at=int(released_at) if released_at is not None else None,
            released_by=item.get(RELEASED_BY),
            region=str(item.get(REGION_ATTRIBUTE, "")),
        )


def record_put(
    table: str, token: str, quantity: int, allocation: Mapping[str, int] | None, fields: Fields, status: Status, region: str = ""
) -> Put:
    """The reservation record, unless one exists (one record per request token: the double-apply
    guard). No TTL: a hold never expires (an expired record would strand its quantity; the
    release starts the TTL)."""
    item: dict[str, object] = {**record_key(token, region), **fields, QUANTITY: quantity, STATUS: status, "createdAt": int(time.time())}
    if allocation is not None:
        item[ALLOCATION] = dict(allocation)
    return Put(table, item=item).when(IS_NEW)
