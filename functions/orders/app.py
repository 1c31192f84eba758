"""Orders API: auto-increment order ids, idempotent by key, and the LAST_ORDER pointer. Parse, call the layer, shape.

The sequence mode (``fast`` or ``gapless``) comes from the template parameter ``SequenceMode``
through ``SEQUENCE_MODE``; see counters.services.orders for what each guarantees.
"""

import os
from typing import Annotated

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from counters.core.errors import NotFound
from counters.core.failures import RetryPolicy
from counters.core.metrics import record
from counters.deferral.queue import Deferrer
from counters.http.resolver import ID_PATTERN, Body, build_app, json_response
from counters.primitives.sequence import SequenceMode
from counters.services.orders import Orders

TABLE_NAME = os.environ["TABLE_NAME"]  # read once at cold start
SEQUENCE_MODE = SequenceMode(os.environ.get("SEQUENCE_MODE", SequenceMode.FAST))  # a bad value fails the cold start

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"counters"})
app = build_app(logger, Deferrer.from_env())
orders = Orders(TABLE_NAME, mode=SEQUENCE_MODE, retry=RetryPolicy.from_env())

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


IdempotencyKey = Annotated[str, Header(alias="Idempotency-Key", pattern=ID_PATTERN, min_length=1, max_length=64)]
OrderIdPath = Annotated[int, Path(ge=1, le=MAX_ORDER_ID)]


@app.post("/orders")
def create_order(order: CreateOrder, idempotency_key: IdempotencyKey) -> Response[Order]:
    app.caller.require_self(order.customerId, "place an order")
    items = [line.model_dump() for line in order.items]
    placed = orders.place(key=idempotency_key, customer_id=order.customerId, items=items, owner=app.caller.owner)
    record(metrics, "PlaceOrder", placed.result)
    status = 201 if placed.created else 200
    return json_response(status, placed.order, headers={"Location": f"/orders/{placed.order['orderId']}"})


@app.get("/orders/latest")
def latest_order() -> Response[Latest]:
    return json_response(200, {"orderId": orders.latest()})


@app.get("/orders/<orderId>")
def get_order(orderId: OrderIdPath) -> Response[Order]:
    order = orders.get(orderId)
    app.caller.require_owner_or_hide(order["customerId"], "read this order", NotFound(f"order {orderId} not found"))
    return json_response(200, order)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
