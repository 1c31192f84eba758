"""The orders API's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function.
Its requests are written here; its answers are the service's result types."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from counters.core.ids import ID_PATTERN
from counters.http.models import Header, Path, Read
from counters.services import orders

__all__ = ["CreateOrder", "IdempotencyKey", "LatestOrder", "NewOrderLine", "Order", "OrderIdPath"]

MAX_ORDER_ID = 10**15  # far beyond any sequence, and exact as a JSON number everywhere


class NewOrderLine(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sku: str = Field(pattern=ID_PATTERN)
    quantity: int = Field(ge=1, le=10_000)


class CreateOrder(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    customerId: str = Field(pattern=ID_PATTERN)
    items: list[NewOrderLine] = Field(min_length=1, max_length=50)


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

# The answers: the services' own result types, named (their response models are derived: counters.http.models.answer)
Order = orders.PublicOrder
LatestOrder = orders.LatestOrder

READS = {
    "GET /orders/{orderId}": Read(strong="one strongly consistent read of the order"),
    "GET /orders/latest": Read(
        as_of="the LAST_ORDER pointer (one strongly consistent read), which the order-pointer function advances from the "
        "table's stream: it trails the orders placed by the stream's delivery (its iterator age, typically under a second)",
    ),
}
