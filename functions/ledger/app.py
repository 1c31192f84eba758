"""Ledger API (seed 02, approach 6): append entries idempotently, read exact balances.

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counters.core.records import dataclass
from counters.http.function import ApiFunction, ApiSettings, retry_queue
from counters.http.powertools import Response
from counters.http.resolver import json_response
from counters.runtime.metrics import record
from counters.services.ledgers import Ledgers, LedgerSettings

if TYPE_CHECKING:
    from .contract import Appended, Balance, IdempotencyKey, IdPath, NewEntry, Verify


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, LedgerSettings):
    """This function's environment."""


function = ApiFunction(Settings, Ledgers.from_settings, deferrer=retry_queue)
app, logger, metrics = function.app, function.logger, function.metrics


@app.post("/ledgers/<ledgerId>/entries")
def append(ledgerId: IdPath, entry: NewEntry, key: IdempotencyKey) -> Response[Appended]:
    app.caller.require_own_ledger(ledgerId, "append to this ledger")
    entry_id, created, result = function.service.post_entry(ledgerId, entry.amount, key)
    record(metrics, "LedgerAppend", result)
    appended: Appended = {"ledgerId": ledgerId, "entryId": entry_id}
    return json_response(201 if created else 200, appended)


@app.get("/ledgers/<ledgerId>")
def balance(ledgerId: IdPath, verify: Verify = False) -> Response[Balance]:
    app.caller.require_ledger(ledgerId, "read this ledger")
    read = function.service.balance(ledgerId, verify=verify)  # verify: +1 RCU, no reliance on in-page read order
    return json_response(200, read.public(ledgerId))


lambda_handler = function.lambda_handler
