"""The reservations service's deferred commands: what a take or give-back that ran out of in-line
retries carries to the retry queue, and how the retry worker replays it.

Only exact, token-remembering approaches are re-driven ([`reserve_command`][counters.services.reservation_commands.reserve_command]); ``atomic`` and
``occ`` never blindly. A release is safe to re-drive on every strategy: the record's
``CONFIRMED -> RELEASED`` guard gives back once. The executors are
[`Reservations.replayables`][counters.services.reservations.service.Reservations.replayables].
"""

from __future__ import annotations

from counters.core.commands import Command, require
from counters.core.ids import valid_id
from counters.core.json import JSONObject
from counters.core.records import dataclass
from counters.primitives.approaches import Approach
from counters.store.resources_counters import Fields


@dataclass(frozen=True)
class ReservePayload:
    """A deferred take."""

    resourceId: str
    quantity: int
    idempotencyKey: str
    owner: str | None = None

    def __post_init__(self) -> None:
        require(valid_id(self.resourceId), "invalid resourceId")
        require(isinstance(self.quantity, int) and not isinstance(self.quantity, bool) and self.quantity >= 1, "invalid quantity")
        require(isinstance(self.idempotencyKey, str) and bool(self.idempotencyKey), "invalid idempotencyKey")
        require(self.owner is None or (isinstance(self.owner, str) and bool(self.owner)), "invalid owner")


@dataclass(frozen=True)
class SettleClaimPayload:
    """A deferred confirmation of an atomic/occ claim whose take applied."""

    reservationId: str
    allocation: dict[str, int]

    def __post_init__(self) -> None:
        require(valid_id(self.reservationId), "invalid reservationId")
        require(
            isinstance(self.allocation, dict)
            and bool(self.allocation)
            and all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 1 for k, v in self.allocation.items()),
            "invalid allocation",
        )


@dataclass(frozen=True)
class ReleasePayload:
    """A deferred give-back."""

    resourceId: str
    reservationId: str

    def __post_init__(self) -> None:
        require(valid_id(self.resourceId) and valid_id(self.reservationId), "invalid resourceId/reservationId")


def reserve_command(approach: Approach, resource_id: str, quantity: int, record: Fields) -> Command | None:
    """The take to re-drive, for exact, token-remembering approaches with a key only."""
    key = record.get("idempotencyKey")
    if not (approach.exact and approach.needs_token and key):
        return None
    owner = record.get("owner")
    payload: JSONObject = {
        "resourceId": resource_id,
        "quantity": quantity,
        "idempotencyKey": str(key),
        "owner": owner if isinstance(owner, str) else None,
    }
    return Command("reserve", payload, str(record["requestId"]))


def release_command(resource_id: str, rid: str, request_id: str) -> Command:
    """The deferred form of a release."""
    return Command("release", {"resourceId": resource_id, "reservationId": rid}, request_id)
