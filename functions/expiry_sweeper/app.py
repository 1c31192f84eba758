"""Expiry sweeper: on an MRSC global table (no DynamoDB TTL), deletes the items whose ``expiresAt``
has passed, a bounded part of the table per scheduled run (counters.primitives.expiry; docs/regions.md,
"Expiry on MRSC"). Only the template's mrsc stacks have it."""

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.json import JSONObject
from counters.primitives.expiry import ExpirySettings, ExpirySweeper
from counters.runtime.function import Function

STOP_BEFORE_TIMEOUT_MS = 5000

function = Function(ExpirySettings, ExpirySweeper.from_settings)
logger, metrics = function.logger, function.metrics


@function.handler()
def lambda_handler(event: JSONObject, context: LambdaContext) -> dict[str, int | bool | float]:
    report = function.service.sweep(should_stop=lambda: context.get_remaining_time_in_millis() < STOP_BEFORE_TIMEOUT_MS)
    summary = report.as_dict()
    metrics.add_metric(name="ExpiredItemsDeleted", unit=MetricUnit.Count, value=report.deleted)
    metrics.add_metric(name="ExpiryPagesScanned", unit=MetricUnit.Count, value=report.pages)
    if report.contended or report.stopped_early:
        logger.warning("the expiry sweep left work for the next run", extra=summary)
    else:
        logger.info("expiry sweep", extra=summary)
    return summary
