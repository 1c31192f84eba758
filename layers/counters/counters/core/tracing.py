"""OpenTelemetry spans around the engine's logical calls, when asked for and installed.

One span per call of ``counters.core.engine.run`` (every DynamoDB and SQS call of the layer,
retries included): named ``tally DynamoDB.UpdateItem`` (``tally SQS.SendMessage``...), with

* ``rpc.system`` ``aws-api``, ``rpc.service``, ``rpc.method`` and ``aws.dynamodb.table_names``
  (or ``messaging.destination.name``, the queue URL) as the AWS SDK semantic conventions name them;
* ``tally.attempts``, ``tally.outcome`` (``applied``/``rejected``/``contention``), ``tally.failure``
  and ``aws.error_code`` (the last classified failure), ``tally.contended_retries``,
  ``tally.unknown_seen``, ``tally.stopped``, ``aws.dynamodb.consumed_read_units`` /
  ``aws.dynamodb.consumed_write_units`` (this call's attempts', ``ReturnConsumedCapacity=TOTAL``);
* one event ``attempt_failed`` per failed attempt (``tally.attempt``, ``tally.failure``,
  ``aws.error_code``): a retry is the attempt after such an event;
* an exception the engine lets through (a library error that names its fix, or a botocore
  error it does not classify) recorded on the span, whose status is then ERROR.

Off unless ``TALLY_TRACING=otel`` (template.yaml's ``TracingProvider``): then, and only then, this
module imports ``opentelemetry.trace`` (the API; ``tally-counters[otel]``, or the ADOT Lambda
layer's copy), once, at import. Otherwise, or when the API is not installed, ``traced``
returns the call's result untouched and nothing else is imported (the cold start is unchanged:
tests/unit/test_tracing.py checks it). The API without an SDK is a no-op tracer: the SDK (with its
exporter) is the ADOT layer's, set up by its ``AWS_LAMBDA_EXEC_WRAPPER`` before the handler loads.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from counters.core.failures import Classified
    from counters.core.outcome import Capacity, Outcome

ENV = "TALLY_TRACING"
"""``otel``: spans through the OpenTelemetry API; anything else (``xray``, ``none``, unset): none."""
NAME = "counters"

P = ParamSpec("P")


class _Ended(Protocol):
    """What a span's attributes are read from (``counters.core.engine.Report``)."""

    outcome: Outcome
    failure: Classified | None
    attempts: int
    contended_retries: int
    unknown_seen: bool
    stopped: bool
    capacity: Capacity


R = TypeVar("R", bound=_Ended)


def _tracer_from(environ: Mapping[str, str]) -> Tracer | None:
    if environ.get(ENV, "").strip().lower() != "otel":
        return None
    try:
        from opentelemetry import trace
    except ImportError:  # asked for, not installed: no spans (docs/operating.md says which layer brings it)
        return None
    return trace.get_tracer(NAME)


_tracer: Tracer | None = _tracer_from(os.environ)


def configure(tracer: Tracer | None) -> None:
    """Use ``tracer`` from now on (``None``: no spans). For tests; the environment decides otherwise."""
    global _tracer
    _tracer = tracer


def enabled() -> bool:
    """Whether engine calls are traced now (``TALLY_TRACING=otel`` and the API installed, or ``configure``)."""
    return _tracer is not None


def traced(run: Callable[P, R]) -> Callable[P, R]:
    """Wrap the engine's ``run(operation, params, ...)`` in one span per logical call."""

    @functools.wraps(run)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        tracer = _tracer
        if tracer is None:
            return run(*args, **kwargs)
        operation, params = args[0] if args else kwargs["operation"], args[1] if len(args) > 1 else kwargs["params"]
        service, method = _names(operation)
        shared = kwargs.get("capacity")  # the caller's running totals: the span reports this call's share
        before = (float(getattr(shared, "read_units", 0.0)), float(getattr(shared, "write_units", 0.0)))
        with tracer.start_as_current_span(f"tally {service}.{method}", attributes=_request(service, method, params)) as span:
            report = run(*args, **kwargs)
            span.set_attributes(_ended(report, before))
            return report

    return wrapper


def attempt_failed(attempt: int, failure: Classified) -> None:
    """An event on the current logical call's span: attempt ``attempt`` failed as ``failure`` says."""
    if _tracer is None:
        return
    from opentelemetry import trace  # imported already: _tracer is not None

    trace.get_current_span().add_event(
        "attempt_failed", {"tally.attempt": attempt, "tally.failure": str(failure.kind), "aws.error_code": failure.code}
    )


def _names(operation: Any) -> tuple[str, str]:
    """(``DynamoDB``, ``UpdateItem``) for a bound botocore operation (``client.update_item``)."""
    meta = getattr(getattr(operation, "__self__", None), "meta", None)
    name = getattr(operation, "__name__", "call")
    model = getattr(meta, "service_model", None)
    service = getattr(model, "service_id", None) or "DynamoDB"
    method = getattr(meta, "method_to_api_mapping", {}).get(name, name)
    return str(service), str(method)


def _request(service: str, method: str, params: Any) -> dict[str, str | list[str]]:
    attributes: dict[str, str | list[str]] = {"rpc.system": "aws-api", "rpc.service": service, "rpc.method": method}
    tables = _tables(params)
    if tables:
        attributes["aws.dynamodb.table_names"] = tables
    if "QueueUrl" in params:
        attributes["messaging.destination.name"] = str(params["QueueUrl"])
    return attributes


def _tables(params: Mapping[str, Any]) -> list[str]:
    """Every table a request names: ``TableName``, ``TransactItems[*].<Action>.TableName``, ``RequestItems`` keys."""
    names = {params["TableName"]} if "TableName" in params else set()
    for item in params.get("TransactItems", ()):
        names.update(action["TableName"] for action in item.values() if isinstance(action, Mapping) and "TableName" in action)
    names.update(params.get("RequestItems", {}))
    return sorted(str(name) for name in names)


def _ended(report: _Ended, before: tuple[float, float]) -> dict[str, str | int | float | bool]:
    attributes: dict[str, str | int | float | bool] = {
        "tally.outcome": str(report.outcome),
        "tally.attempts": report.attempts,
        "tally.contended_retries": report.contended_retries,
        "tally.unknown_seen": report.unknown_seen,
        "tally.stopped": report.stopped,
        "aws.dynamodb.consumed_read_units": report.capacity.read_units - before[0],
        "aws.dynamodb.consumed_write_units": report.capacity.write_units - before[1],
    }
    if report.failure is not None:
        attributes["tally.failure"] = str(report.failure.kind)
        attributes["aws.error_code"] = report.failure.code
    return attributes
