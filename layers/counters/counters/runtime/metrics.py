"""EMF metrics for one primitive call, the same in every function (no pydantic, no resolver)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from counters.core.outcome import Result

if TYPE_CHECKING:
    from aws_lambda_powertools import Metrics


def record(metrics: Metrics, operation: str, result: Result) -> None:
    """EMF metrics for one primitive call: its outcome, what it cost, how often it retried."""
    from aws_lambda_powertools.metrics import MetricUnit  # the [lambda] extra: importing this module needs only the core

    metrics.add_metric(name=f"{operation}.{result.outcome.value}", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="ConsumedWCU", unit=MetricUnit.Count, value=result.capacity.write_units)
    metrics.add_metric(name="ConsumedRCU", unit=MetricUnit.Count, value=result.capacity.read_units)
    metrics.add_metric(name="Retries", unit=MetricUnit.Count, value=max(0, result.attempts - 1))
