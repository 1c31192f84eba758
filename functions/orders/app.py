"""Orders API: auto-increment order ids, idempotent by key, and the LAST_ORDER pointer. Parse, call the layer, shape.

The sequence mode (``fast`` or ``gapless``) comes from the template parameter ``SequenceMode``
through ``SEQUENCE_MODE``; see counters.services.orders for what each guarantees.

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counters.core.errors import NotFound
from counters.core.records import dataclass
from counters.http.function import ApiFunction, ApiSettings, retry_queue
from counters.http.powertools import Response
from counters.http.resolver import json_response
from counters.runtime.metrics import record
from counters.services.orders import Orders, OrderSettings


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, OrderSettings):
    """This function's environment."""


function = ApiFunction(Settings, Orders.from_settings, deferrer=retry_queue)
app, logger, metrics = function.app, function.logger, function.metrics

if TYPE_CHECKING:
    from counters.core.json import JSONValue

    from .contract import CreateOrder, IdempotencyKey, LatestOrder, Order, OrderIdPath


@app.post("/orders")
def create_order(order: CreateOrder, idempotency_key: IdempotencyKey) -> Response[Order]:
    app.caller.require_self(order.customerId, "place an order")
    items: list[dict[str, JSONValue]] = [{"sku": line.sku, "quantity": line.quantity} for line in order.items]
    placed = function.service.place(key=idempotency_key, customer_id=order.customerId, items=items, owner=app.caller.owner)
    record(metrics, "PlaceOrder", placed.result)
    status = 201 if placed.created else 200
    return json_response(status, placed.order, headers={"Location": f"/orders/{placed.order['orderId']}"})


@app.get("/orders/latest")
def latest_order() -> Response[LatestOrder]:
    latest: LatestOrder = {"orderId": function.service.latest()}
    return json_response(200, latest)


@app.get("/orders/<orderId>")
def get_order(orderId: OrderIdPath) -> Response[Order]:
    order = function.service.read(orderId)
    owner = order["customerId"]  # a string (public_order); anything else matches no caller: refused
    owner = owner if isinstance(owner, str) else ""
    app.caller.require_owner_or_hide(owner, "read this order", NotFound(f"order {orderId} not found"))
    return json_response(200, order)


lambda_handler = function.lambda_handler
