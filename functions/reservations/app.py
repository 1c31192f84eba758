"""Reservations API: resources with a capacity, reserved on any approach of seed 02. Parse, call the layer, shape.

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit

from counters.core.records import dataclass
from counters.http.function import ApiFunction, ApiSettings, retry_queue
from counters.http.powertools import Response
from counters.http.resolver import json_response
from counters.runtime.metrics import record
from counters.services.reservations import Reservations, ReservationSettings


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, ReservationSettings):
    """This function's environment."""


function = ApiFunction(Settings, Reservations.from_settings, deferrer=retry_queue)
app, logger, metrics = function.app, function.logger, function.metrics

if TYPE_CHECKING:
    from .contract import (
        CreateResource,
        IdempotencyKey,
        IdPath,
        Received,
        ReleasedReservation,
        Reservation,
        ReservationDetails,
        Reserve,
        Resource,
        Transfer,
        TransferKey,
        Transferred,
    )


@app.post("/resources")
def create_resource(body: CreateResource) -> Response[Resource]:
    app.caller.require_admin("creating a resource")
    created = function.service.create_resource(
        body.resourceId, capacity=body.capacity, strategy=body.strategy, shards=body.shards, shares=body.shares
    )
    metrics.add_metric(name="CreateResource.applied", unit=MetricUnit.Count, value=1)
    return json_response(201, created, headers={"Location": f"/resources/{body.resourceId}"})


@app.get("/resources/<resourceId>")
def get_resource(resourceId: IdPath) -> Response[Resource]:
    return json_response(200, function.service.get_resource(resourceId))


@app.post("/resources/<resourceId>/reservations")
def reserve(resourceId: IdPath, body: Reserve, idempotency_key: IdempotencyKey = None) -> Response[Reservation]:
    answer = function.service.reserve(resourceId, body.quantity, idempotency_key, owner=app.caller.owner)
    if answer.result is not None:
        record(metrics, "Reserve", answer.result)
    location = {"Location": f"/resources/{resourceId}/reservations/{answer.body['reservationId']}"}
    return json_response(201 if answer.created else 200, answer.body, headers=location)


@app.post("/resources/<resourceId>/transfers")
def transfer(resourceId: IdPath, body: Transfer, idempotency_key: TransferKey) -> Response[Transferred]:
    """MREC escrow: move units of this Region's share to another Region's (step 1; the target credits them)."""
    app.caller.require_admin("transferring capacity")
    answer = function.service.escrow.transfer(resourceId, body.to, body.quantity, idempotency_key)
    return json_response(201 if answer.created else 200, answer.body)


@app.post("/resources/<resourceId>/transfers/receive")
def receive(resourceId: IdPath) -> Response[Received]:
    """MREC escrow: credit this Region's share with every transfer to it that has replicated here (step 2).
    Not MREC: 409 unsupported_in_region_mode, as a transfer; a missing resource: 404."""
    app.caller.require_admin("receiving transfers")
    received: Received = {"resourceId": resourceId, "credited": function.service.escrow.receive(resourceId)}
    return json_response(200, received)


@app.get("/resources/<resourceId>/reservations/<reservationId>")
def get_reservation(resourceId: IdPath, reservationId: IdPath) -> Response[ReservationDetails]:
    return json_response(200, function.service.get_reservation(resourceId, reservationId, caller=app.caller))


@app.delete("/resources/<resourceId>/reservations/<reservationId>")
def release(resourceId: IdPath, reservationId: IdPath) -> Response[ReleasedReservation]:
    answer = function.service.release(resourceId, reservationId, caller=app.caller)
    if answer.result is not None:
        record(metrics, "Release", answer.result)
    released: ReleasedReservation = {**answer.body, "changed": answer.created}
    return json_response(200, released)


lambda_handler = function.lambda_handler
