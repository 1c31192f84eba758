"""The ledger API's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function.
Its requests are written here; its answers are the service's result types."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from counters.http.models import Header, IdPath, Query, Read
from counters.primitives.ledger import AMOUNT_LIMIT
from counters.primitives.ledger.balance import PublicBalance
from counters.services import ledgers

__all__ = ["Appended", "Balance", "IdPath", "IdempotencyKey", "NewEntry", "Verify"]


class NewEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    amount: int = Field(ge=-AMOUNT_LIMIT, le=AMOUNT_LIMIT)


# A ULID (26 characters) or a UUIDv7 (36), minted on the first attempt; parsed by the layer.
IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=26,
        max_length=36,
        description="Required (400 idempotency_key_missing without it): a ULID or a UUIDv7, minted on the first "
        "attempt; its time is the entry's. The same key and amount answer the same entry (200); another amount "
        "422 idempotency_key_reused. No request is ever seen in flight (a re-send settles the entry itself). "
        "Expiry: a key older than the retry window (LedgerRetryWindowSeconds, default 600 s) is refused, 422 "
        "idempotency_key_expired (docs/retries.md#idempotency-keys)",
    ),
]


Verify = Annotated[bool, Query()]

# The answers: the services' own result types, named (their response models are derived: counters.http.models.answer)
Appended = ledgers.Appended
Balance = PublicBalance

READS = {
    "GET /ledgers/{ledgerId}": Read(
        strong="one strongly consistent Query of the checkpoint and every entry after it (verify: and a consistent re-read "
        "of the checkpoint's version)",
        as_of="on an MREC global table, the other Regions' entries and checkpoints as replicated to this Region "
        "(typically within a second)",
    ),
}
