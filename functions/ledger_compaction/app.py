"""Ledger compaction: on the EventBridge schedule (every ledger with due entries) and on
demand (``POST /ledgers/{ledgerId}/compact``, an admin route). Runs in COMPACTION_REGION only."""

import os

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.errors import WrongRegion
from counters.http.resolver import Body, IdPath, build_app, json_response
from counters.primitives.approaches.ledger import Ledger

# Settings read once at cold start.
TABLE_NAME = os.environ["TABLE_NAME"]
RETRY_WINDOW = float(os.environ.get("LEDGER_RETRY_WINDOW_SECONDS", "600"))
MARGIN = float(os.environ.get("LEDGER_COMPACTION_MARGIN_SECONDS", "900"))
COMPACTION_REGION = os.environ.get("COMPACTION_REGION", "")
STOP_BEFORE_TIMEOUT_MS = 3000
ROUTE_MAX_CHUNKS = 100  # ~9,900 entries per request; "complete": false says call again

logger = Logger()
metrics = Metrics()
copy_config_to_registered_loggers(source_logger=logger, include={"counters"})
app = build_app(logger)
ledger = Ledger(TABLE_NAME, retry_window=RETRY_WINDOW, margin=MARGIN, compaction_region=COMPACTION_REGION)


class Compaction(Body):
    ledgerId: str
    outcome: str
    merged: int
    chunks: int
    lostRaces: int
    complete: bool


@app.post("/ledgers/<ledgerId>/compact")
def compact(ledgerId: IdPath) -> Response[Compaction]:
    app.caller.require_admin("compacting a ledger")
    report = ledger.compact(ledgerId, max_chunks=ROUTE_MAX_CHUNKS)
    metrics.add_metric(name="LedgerEntriesMerged", unit=MetricUnit.Count, value=report.merged)
    return json_response(200, report.as_dict())


def scheduled(context: LambdaContext) -> dict:
    try:
        report = ledger.compact_due(should_stop=lambda: context.get_remaining_time_in_millis() < STOP_BEFORE_TIMEOUT_MS)
    except WrongRegion as exc:
        # A global table's other regions deploy the same schedule: doing nothing is the job.
        logger.info("compaction skipped", extra={"reason": exc.message})
        return {"skipped": exc.code, "message": exc.message}
    summary = report.as_dict()
    metrics.add_metric(name="LedgerEntriesMerged", unit=MetricUnit.Count, value=summary["merged"])
    metrics.add_metric(name="LedgersCompacted", unit=MetricUnit.Count, value=summary["ledgers"])
    if summary["incomplete"] or summary["stoppedEarly"]:
        logger.warning("compaction left work for the next run", extra=summary)
    return summary


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)  # None on the schedule
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    if event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event":
        return scheduled(context)
    return app.resolve(event, context)
