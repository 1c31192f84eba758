"""Reservations API: resources with a capacity, reserved on any approach of seed 02. Parse, call the layer, shape."""

from dataclasses import dataclass
from typing import Annotated, Literal

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from counters.deferral.queue import Deferrer
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Header, Response
from counters.http.resolver import ID_PATTERN, Body, IdPath, json_response
from counters.runtime.metrics import record
from counters.services.reservations import Reservations, ReservationSettings

KEY_PATTERN = r"^[\x21-\x7e]{1,128}$"  # printable ASCII, no spaces: it becomes part of a hash, not a key


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, ReservationSettings):
    """This function's environment."""


function = ApiFunction(Settings, Reservations.from_settings, deferrer=Deferrer.from_settings)
app, logger, metrics = function.app, function.logger, function.metrics


class CreateResource(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    resourceId: str = Field(pattern=ID_PATTERN)
    capacity: int = Field(ge=0, le=1_000_000_000)
    strategy: Literal["atomic", "occ", "occ_history", "crt", "marker", "set"]
    shards: int = Field(default=1, ge=1, le=20)
    shares: dict[str, int] | None = Field(
        default=None, description="MREC global table: each Region's share of the capacity (default: an even split)"
    )


class Transfer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    to: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="the Region receiving the units (this Region sends them)")
    quantity: int = Field(ge=1, le=1_000_000_000)


class Transferred(Body):
    transferId: str
    resourceId: str
    from_: str = Field(alias="from", description="the Region that sent the units (this one)")
    to: str = Field(description="the Region receiving them")
    quantity: int
    status: Literal["SENT"]


class Received(Body):
    resourceId: str
    credited: int


class Reserve(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    quantity: int = Field(ge=1, le=1_000_000_000)


class ResourceState(Body):
    resourceId: str
    capacity: int
    reserved: int
    available: int
    strategy: str
    shards: int


class ReservationState(Body):
    reservationId: str
    quantity: int
    status: Literal["CONFIRMED", "RELEASED"]


class Released(ReservationState):
    changed: bool


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=KEY_PATTERN,
        description="Required for the strategies that remember requests (occ_history, crt, marker, set: 400 "
        "idempotency_key_missing without it); optional for atomic and occ (without it a re-send takes again). "
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


@app.post("/resources")
def create_resource(body: CreateResource) -> Response[ResourceState]:
    app.caller.require_admin("creating a resource")
    created = function.service.create_resource(
        body.resourceId, capacity=body.capacity, strategy=body.strategy, shards=body.shards, shares=body.shares
    )
    metrics.add_metric(name="CreateResource.applied", unit=MetricUnit.Count, value=1)
    return json_response(201, created, headers={"Location": f"/resources/{body.resourceId}"})


@app.get("/resources/<resourceId>")
def get_resource(resourceId: IdPath) -> Response[ResourceState]:
    return json_response(200, function.service.get_resource(resourceId))


@app.post("/resources/<resourceId>/reservations")
def reserve(resourceId: IdPath, body: Reserve, idempotency_key: IdempotencyKey = None) -> Response[ReservationState]:
    answer = function.service.reserve(resourceId, body.quantity, idempotency_key, owner=app.caller.owner)
    if answer.result is not None:
        record(metrics, "Reserve", answer.result)
    location = {"Location": f"/resources/{resourceId}/reservations/{answer.body['reservationId']}"}
    return json_response(201 if answer.created else 200, answer.body, headers=location)


@app.post("/resources/<resourceId>/transfers")
def transfer(resourceId: IdPath, body: Transfer, idempotency_key: TransferKey) -> Response[Transferred]:
    """MREC escrow: move units of this Region's share to another Region's (step 1; the target credits them)."""
    app.caller.require_admin("transferring capacity")
    answer = function.service.transfer(resourceId, body.to, body.quantity, idempotency_key)
    return json_response(201 if answer.created else 200, answer.body)


@app.post("/resources/<resourceId>/transfers/receive")
def receive(resourceId: IdPath) -> Response[Received]:
    """MREC escrow: credit this Region's share with every transfer to it that has replicated here (step 2).
    Not MREC: 409 unsupported_in_region_mode, as a transfer; a missing resource: 404."""
    app.caller.require_admin("receiving transfers")
    return json_response(200, {"resourceId": resourceId, "credited": function.service.receive(resourceId)})


@app.get("/resources/<resourceId>/reservations/<reservationId>")
def get_reservation(resourceId: IdPath, reservationId: IdPath) -> Response[ReservationState]:
    return json_response(200, function.service.get_reservation(resourceId, reservationId, caller=app.caller))


@app.delete("/resources/<resourceId>/reservations/<reservationId>")
def release(resourceId: IdPath, reservationId: IdPath) -> Response[Released]:
    answer = function.service.release(resourceId, reservationId, caller=app.caller)
    if answer.result is not None:
        record(metrics, "Release", answer.result)
    return json_response(200, {**answer.body, "changed": answer.created})


lambda_handler = function.lambda_handler
