"""What the reservations service answers and keeps: the public shapes, the answer to a take, the settings,
the ids and the constants ([`Reservations`][counters.services.reservations.service.Reservations] uses them)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Generic, Literal, NotRequired, Self, TypedDict, TypeVar, cast

from counters.core.outcome import Result
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.primitives import approaches, sharding
from counters.primitives.approaches import Reason
from counters.store.resources_counters import Resource
from counters.store.resources_records import Record, Status

NAMESPACE = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
CONFIRMED, RELEASED, PENDING, UNKNOWN, RELEASING = Status.CONFIRMED, Status.RELEASED, Status.PENDING, Status.UNKNOWN, Status.RELEASING
RELEASED_TTL_SECONDS = 30 * 24 * 3600
"""How long a released record is kept (it answers replays of the release and of its key)."""
CLAIM_SECONDS = 120
"""A claim still PENDING after this long was left by a caller that died (functions time out sooner)."""
INSUFFICIENT = (Reason.THRESHOLD, sharding.ShardReason.SOLD_OUT)
ESCROWED_CACHE = 1024
"""How many escrowed resources' META a service keeps (oldest dropped first)."""


class RegionShare(TypedDict):
    """One Region's share of an escrowed resource, as this Region's replica holds it."""

    capacity: int
    reserved: int
    available: int


class PublicResource(TypedDict):
    """A resource as the API shows it ([Reservations.get_resource][counters.services.reservations.service.Reservations.get_resource]).
    `regions` and `inFlight` are present for an escrowed resource (an MREC global table) only."""

    resourceId: str
    capacity: int
    reserved: int
    available: int
    strategy: str
    shards: int
    regions: NotRequired[dict[str, RegionShare]]
    """Each Region's share."""
    inFlight: NotRequired[int]
    """Units sent between Regions and not received yet."""


class PublicReservation(TypedDict):
    """A reservation as a take or a release answers it."""

    reservationId: str
    quantity: int
    status: Literal["CONFIRMED", "RELEASED"]


class ReleasedReservation(PublicReservation):
    """A release's answer: the reservation, and whether this request released it."""

    changed: bool
    """False: it was released already (a re-send finds its own release done)."""


class ReservationDetails(TypedDict):
    """A reservation as [Reservations.get_reservation][counters.services.reservations.service.Reservations.get_reservation]
    reads it: `releasedAt` is present once it is released."""

    reservationId: str
    quantity: int
    status: Literal["CONFIRMED", "RELEASED", "PENDING", "UNKNOWN"]
    """``PENDING``: an atomic/occ take that claimed its key is still completing (its re-send answers 409
    ``idempotency_key_in_flight``); ``UNKNOWN``: that take's outcome is not known, or its caller died
    (``PENDING`` for longer than ``CLAIM_SECONDS``): it may hold the quantity, and its re-send answers 500 ``outcome_unknown``."""
    resourceId: str
    createdAt: int
    releasedAt: NotRequired[int]


Transferred = TypedDict(
    "Transferred",
    {"transferId": str, "resourceId": str, "from": str, "to": str, "quantity": int, "status": Literal["SENT"]},
)
"""Units sent to another Region ([Reservations.escrow.transfer][counters.services.reservations.escrow.Escrow.transfer]):
`from` is this Region, `to` the receiving one, `status` `SENT` (`from` is a keyword: the functional
form of `TypedDict`)."""


class Received(TypedDict):
    """What receiving transfers credited ([Reservations.escrow.receive][counters.services.reservations.escrow.Escrow.receive]):
    the units of every transfer to this Region that had replicated here, 0 when none had."""

    resourceId: str
    credited: int


_B = TypeVar("_B", PublicReservation, Transferred)


def reservation_id(resource_id: str, idempotency_key: str, owner: str | None = None) -> str:
    """Deterministic per (resource, key) - and per owner when authorization is on, so one
    user's key never answers with another user's reservation."""
    scope = f"{resource_id}\n{idempotency_key}" if owner is None else f"{resource_id}\n{owner}\n{idempotency_key}"
    return str(uuid.uuid5(NAMESPACE, scope))


@dataclass
class Reservation(Generic[_B]):
    """The answer to a take: ``created`` (201) or a replay (200), the public body, the result.
    The body is a [PublicReservation][counters.services.reservations.model.PublicReservation] (a take, a
    release) or a [Transferred][counters.services.reservations.model.Transferred] (a transfer)."""

    created: bool
    body: _B
    result: Result | None = None


@dataclass(frozen=True, kw_only=True)
class ReservationSettings(RegionSettings):
    """The Region settings and each approach's own ([`Option`][counters.primitives.approaches.Option] s of its
    [`REGISTRY`][counters.primitives.approaches.REGISTRY] entry: ``ATOMIC_POLICY``, what ``atomic`` does after
    an unknown outcome, ``under`` never re-sends, ``over`` re-sends; ``OCC_HISTORY``; ``SET_MAX_TOKENS``)."""

    approach_options: Mapping[str, Mapping[str, int | str]] = field(default_factory=dict)
    """Each approach's constructor keywords by its name (unset: its settings' defaults)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The fields as [`Settings.from_env`][counters.core.settings.Settings.from_env] reads them, and every approach's settings."""
        environ = os.environ if environ is None else environ
        return replace(super().from_env(environ), approach_options=approaches.settings(environ))


def public_resource(resource: Resource, reserved: int, available: int) -> PublicResource:
    """A resource as the API shows it, with these counts."""
    return {
        "resourceId": resource.resource_id,
        "capacity": resource.capacity,
        "reserved": reserved,
        "available": available,
        "strategy": resource.strategy,
        "shards": resource.shards,
    }


def first(records: list[Record]) -> Record | None:
    """The record that answers for a token held in several Regions (MREC failover): the earliest."""
    return min(records, key=lambda r: (r.created_at, r.region), default=None)


def public_reservation(rid: str, quantity: int, status: Status) -> PublicReservation:
    """``RELEASED_PENDING`` (an MRSC release between its steps) reads as ``RELEASED``: it only ever completes."""
    shown = str(RELEASED if status is RELEASING else status)
    # a take or a release answers CONFIRMED or RELEASED only (PENDING, UNKNOWN are refused before)
    return {"reservationId": rid, "quantity": quantity, "status": cast(Literal["CONFIRMED", "RELEASED"], shown)}


def transfer_body(resource_id: str, tid: str, source: str, target: str, quantity: int) -> Transferred:
    """The answer for a transfer: its id, resource, source and target Regions, and quantity."""
    return {"transferId": tid, "resourceId": resource_id, "from": source, "to": target, "quantity": quantity, "status": "SENT"}
