"""The ledger API's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from counters.http.models import Body, Header, IdPath, Query
from counters.primitives.ledger import AMOUNT_LIMIT

__all__ = ["Appended", "Checkpoint", "IdPath", "IdempotencyKey", "LedgerBalance", "NewEntry", "Verify"]


class Appended(Body):
    ledgerId: str
    entryId: str


class Checkpoint(Body):
    balance: int
    version: int
    mergedThrough: str | None
    mergedEntries: int


class LedgerBalance(Body):
    ledgerId: str
    balance: int
    pendingEntries: int
    checkpoint: Checkpoint | None
    # On an MREC global table the answer also carries "checkpoints" (each Region's, by Region) and
    # "duplicateKeys" (entry ids pending in two Regions: a failover re-send during a partition).


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
