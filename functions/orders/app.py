"""Orders API: auto-increment order ids, idempotent by key, and the LAST_ORDER pointer. Parse, call the layer, shape.

The sequence mode (``fast`` or ``gapless``) comes from the template parameter ``SequenceMode``
through ``SEQUENCE_MODE``; see counters.services.orders for what each guarantees.
"""

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from counters.core.errors import NotFound
from counters.deferral.queue import Deferrer
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Header, Path, Response
from counters.http.resolver import ID_PATTERN, Body, json_response
from counters.runtime.metrics import record
from counters.services.orders import Orders, OrderSettings


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, OrderSettings):
    """This function's environment."""


function = ApiFunction(Settings, Orders.from_settings, deferrer=Deferrer.from_settings)
app, logger, metrics = function.app, function.logger, function.metrics

MAX_ORDER_ID = 10**15  # far beyond any sequence, and exact as a JSON number everywhere


class OrderLine(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sku: str = Field(pattern=ID_PATTERN)
    quantity: int = Field(ge=1, le=10_000)


class CreateOrder(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    customerId: str = Field(pattern=ID_PATTERN)
    items: list[OrderLine] = Field(min_length=1, max_length=50)


class Order(Body):
    orderId: int
    customerId: str
    items: list[OrderLine]
    createdAt: int | None


class Latest(Body):
    orderId: int | None


IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        pattern=ID_PATTERN,
        min_length=1,
        max_length=64,
        description="Required (400 idempotency_key_missing without it); per caller. The same key and body answer "
        "the same order (200); another body 422. An order and its key record are one transaction (MRSC: the key "
        "record first, and a re-send completes the order from it), so no request is ever seen in flight. Expiry: "
        "the key record's TTL is 24 hours (DynamoDB deletes it some time after that); once deleted, the key "
        "places a new order (docs/retries.md#idempotency-keys)",
    ),
]
OrderIdPath = Annotated[int, Path(ge=1, le=MAX_ORDER_ID)]


@app.post("/orders")
def create_order(order: CreateOrder, idempotency_key: IdempotencyKey) -> Response[Order]:
    app.caller.require_self(order.customerId, "place an order")
    items = [line.model_dump() for line in order.items]
    placed = function.service.place(key=idempotency_key, customer_id=order.customerId, items=items, owner=app.caller.owner)
    record(metrics, "PlaceOrder", placed.result)
    status = 201 if placed.created else 200
    return json_response(status, placed.order, headers={"Location": f"/orders/{placed.order['orderId']}"})


@app.get("/orders/latest")
def latest_order() -> Response[Latest]:
    return json_response(200, {"orderId": function.service.latest()})


@app.get("/orders/<orderId>")
def get_order(orderId: OrderIdPath) -> Response[Order]:
    order = function.service.read(orderId)
    owner = order["customerId"]  # a string (public_order); anything else matches no caller: refused
    owner = owner if isinstance(owner, str) else ""
    app.caller.require_owner_or_hide(owner, "read this order", NotFound(f"order {orderId} not found"))
    return json_response(200, order)


lambda_handler = function.lambda_handler
