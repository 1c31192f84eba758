"""Ledger compaction: on the EventBridge schedule (every ledger with due entries) and on
demand (``POST /ledgers/{ledgerId}/compact``, an admin route). On a global table it runs in every
Region: each compacts only the entries and checkpoint its own Region wrote (docs/ledgers.md).

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.json import JSONObject
from counters.core.records import dataclass
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Response
from counters.http.resolver import ProxyResponse, json_response
from counters.primitives.ledger.compaction import ScheduledSummary
from counters.services.ledgers import Ledgers, LedgerSettings

STOP_BEFORE_TIMEOUT_MS = 3000
ROUTE_MAX_CHUNKS = 100  # ~9,900 entries per request; "complete": false says call again


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, LedgerSettings):
    """This function's environment."""


function = ApiFunction(Settings, Ledgers.from_settings)  # nothing to defer: a compaction is re-run, not queued
app, logger, metrics = function.app, function.logger, function.metrics

if TYPE_CHECKING:
    from .contract import Compaction, IdPath


@app.post("/ledgers/<ledgerId>/compact")
def compact(ledgerId: IdPath) -> Response[Compaction]:
    app.caller.require_admin("compacting a ledger")
    report = function.service.compact(ledgerId, max_chunks=ROUTE_MAX_CHUNKS)
    metrics.add_metric(name="LedgerEntriesMerged", unit=MetricUnit.Count, value=report.merged)
    return json_response(200, report.as_dict())


def scheduled(context: LambdaContext) -> ScheduledSummary:
    report = function.service.compact_due(should_stop=lambda: context.get_remaining_time_in_millis() < STOP_BEFORE_TIMEOUT_MS)
    summary = report.as_dict()
    metrics.add_metric(name="LedgerEntriesMerged", unit=MetricUnit.Count, value=summary["merged"])
    metrics.add_metric(name="LedgersCompacted", unit=MetricUnit.Count, value=summary["ledgers"])
    if summary["incomplete"] or summary["stoppedEarly"]:
        logger.warning("compaction left work for the next run", extra=summary)
    return summary


@function.handler(correlation_paths.API_GATEWAY_REST)  # None on the schedule
def lambda_handler(event: JSONObject, context: LambdaContext) -> ScheduledSummary | ProxyResponse:
    if event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event":
        return scheduled(context)
    return app.resolve(event, context)
