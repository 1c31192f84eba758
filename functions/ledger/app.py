"""Ledger API (seed 02, approach 6): append entries idempotently, read exact balances."""

import os
from typing import Annotated

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Header, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from counters.core.failures import RetryPolicy
from counters.core.metrics import record
from counters.deferral.queue import Deferrer
from counters.http.resolver import Body, IdPath, build_app, json_response
from counters.primitives.approaches.ledger import AMOUNT_LIMIT
from counters.services.ledgers import Ledgers

# Settings read once at cold start.
TABLE_NAME = os.environ["TABLE_NAME"]
RETRY_WINDOW = float(os.environ.get("LEDGER_RETRY_WINDOW_SECONDS", "600"))
MARGIN = float(os.environ.get("LEDGER_COMPACTION_MARGIN_SECONDS", "900"))

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"counters"})
app = build_app(logger, Deferrer.from_env())
ledger = Ledgers(TABLE_NAME, retry_window=RETRY_WINDOW, margin=MARGIN, retry=RetryPolicy.from_env())


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


class NewEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    amount: int = Field(ge=-AMOUNT_LIMIT, le=AMOUNT_LIMIT)


# A ULID (26 characters) or a UUIDv7 (36), minted on the first attempt; parsed by the layer.
IdempotencyKey = Annotated[str, Header(alias="Idempotency-Key", min_length=26, max_length=36, description="A ULID or a UUIDv7")]


@app.post("/ledgers/<ledgerId>/entries")
def append(ledgerId: IdPath, entry: NewEntry, key: IdempotencyKey) -> Response[Appended]:
    app.caller.require_own_ledger(ledgerId, "append to this ledger")
    entry_id, created, result = ledger.post_entry(ledgerId, entry.amount, key)
    record(metrics, "LedgerAppend", result)
    return json_response(201 if created else 200, {"ledgerId": ledgerId, "entryId": entry_id})


@app.get("/ledgers/<ledgerId>")
def balance(ledgerId: IdPath, verify: Annotated[bool, Query()] = False) -> Response[LedgerBalance]:
    app.caller.require_ledger(ledgerId, "read this ledger")
    read = ledger.balance(ledgerId, verify=verify)  # verify: +1 RCU, no reliance on in-page read order
    return json_response(200, {"ledgerId": ledgerId, **read.as_dict()})


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
