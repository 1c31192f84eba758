"""The reservations API's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function.
Its requests are written here; its answers are the service's result types."""

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from counters.core.ids import ID_PATTERN
from counters.http.models import Header, IdPath, Read
from counters.primitives.approaches import NAMES, names
from counters.services.reservations import PublicReservation, PublicResource, model

__all__ = [
    "CreateResource",
    "IdPath",
    "IdempotencyKey",
    "Received",
    "ReleasedReservation",
    "Reservation",
    "ReservationDetails",
    "Reserve",
    "Resource",
    "Transfer",
    "TransferKey",
    "Transferred",
]

KEY_PATTERN = r"^[\x21-\x7e]{1,128}$"  # printable ASCII, no spaces: it becomes part of a hash, not a key
if TYPE_CHECKING:
    Strategy = str
else:
    Strategy = Literal[NAMES]  # the approaches' registry: one of its names (an enum in the OpenAPI document)


class CreateResource(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    resourceId: str = Field(pattern=ID_PATTERN)
    capacity: int = Field(ge=0, le=1_000_000_000)
    strategy: Strategy
    shards: int = Field(default=1, ge=1, le=20)
    shares: dict[str, int] | None = Field(
        default=None, description="MREC global table: each Region's share of the capacity (default: an even split)"
    )


class Transfer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    to: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="the Region receiving the units (this Region sends them)")
    quantity: int = Field(ge=1, le=1_000_000_000)


class Reserve(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    quantity: int = Field(ge=1, le=1_000_000_000)


# The answers: the services' own result types, named (their response models are derived: counters.http.models.answer)
Resource = PublicResource
Reservation = PublicReservation
ReservationDetails = model.ReservationDetails
ReleasedReservation = model.ReleasedReservation
Received = model.Received
Transferred = model.Transferred


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=KEY_PATTERN,
        description=f"Required for the strategies that remember requests ({', '.join(names(keyed=True))}: 400 "
        f"idempotency_key_missing without it); optional for {' and '.join(names(keyed=False))} (without it a re-send takes again). "
        "The same key and quantity answer the same reservation (200); another quantity 422; while the first "
        "request with the key is still in flight 409 idempotency_key_in_flight. Keys are per caller. "
        "Expiry: a key lives as long as its reservation record: a held reservation never expires; a released "
        "one is kept 30 days after its release, then the key may take again (docs/retries.md#idempotency-keys)",
    ),
]
TransferKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        pattern=KEY_PATTERN,
        description="Required (400 idempotency_key_missing without it): the transfer id is derived from the resource "
        "and the key, so a re-send answers the same transfer (200) and another quantity or target 422. A transfer "
        "is one transaction, so no request is ever seen in flight. Expiry: never (the transfer record is kept) "
        "(docs/retries.md#idempotency-keys)",
    ),
]

READS = {
    "GET /resources/{resourceId}": Read(
        strong="unsharded: one strongly consistent read of the resource; sharded: one TransactGetItems snapshot of every "
        "shard (serializable)",
        as_of="escrowed (an MREC global table): every Region's share as replicated to this Region (this Region's own, "
        "strong; the others trail by the replication lag, typically a second); inFlight: units sent and not received here",
    ),
    "GET /resources/{resourceId}/reservations/{reservationId}": Read(
        strong="one strongly consistent read of the reservation record (MREC: one consistent Query of every Region's "
        "record of it that this replica holds)",
    ),
}
