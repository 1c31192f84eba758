"""Ledger API (seed 02, approach 6): append entries idempotently, read exact balances."""

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from counters.deferral.queue import Deferrer
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Header, Query, Response
from counters.http.resolver import Body, IdPath, json_response
from counters.primitives.ledger import AMOUNT_LIMIT, LedgerSettings
from counters.runtime.metrics import record
from counters.services.ledgers import Ledgers


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, LedgerSettings):
    """This function's environment."""


function = ApiFunction(Settings, Ledgers.from_settings, deferrer=Deferrer.from_settings)
app, logger, metrics = function.app, function.logger, function.metrics


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


@app.post("/ledgers/<ledgerId>/entries")
def append(ledgerId: IdPath, entry: NewEntry, key: IdempotencyKey) -> Response[Appended]:
    app.caller.require_own_ledger(ledgerId, "append to this ledger")
    entry_id, created, result = function.service.post_entry(ledgerId, entry.amount, key)
    record(metrics, "LedgerAppend", result)
    return json_response(201 if created else 200, {"ledgerId": ledgerId, "entryId": entry_id})


@app.get("/ledgers/<ledgerId>")
def balance(ledgerId: IdPath, verify: Annotated[bool, Query()] = False) -> Response[LedgerBalance]:
    app.caller.require_ledger(ledgerId, "read this ledger")
    read = function.service.balance(ledgerId, verify=verify)  # verify: +1 RCU, no reliance on in-page read order
    return json_response(200, {"ledgerId": ledgerId, **read.as_dict()})


lambda_handler = function.lambda_handler
