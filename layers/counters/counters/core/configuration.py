"""Failures that are a setup to fix, not load to retry: an endpoint never reached, a table not there.

[`counters.core.engine.run`][counters.core.engine.run] asks this module, once per call, whether a failure is one of
these; if so it raises a [`ConfigurationError`][counters.core.errors.ConfigurationError] whose message names the
fix, instead of answering contention (or letting botocore's raw error through):

* **A missing table** (``ResourceNotFoundException`` from DynamoDB, never retryable) becomes
  [`TableNotFound`][counters.core.errors.TableNotFound], naming the table, the endpoint and the region.
* **An endpoint that cannot be connected to** (every attempt of the budget failed before sending:
  ``EndpointConnectionError``, ``ConnectTimeoutError``) becomes
  [`EndpointUnreachable`][counters.core.errors.EndpointUnreachable], naming the endpoint and the variables that
  set it, but only **outside Lambda** and only if this process **never reached** that endpoint.
  Inside a Lambda function (``AWS_LAMBDA_FUNCTION_NAME`` is set: by Lambda, by ``sam local``, by
  the local stack) a lost connection is transient: it stays a not-applied failure, retried and
  answered 503 as before. A process that reached the endpoint once (a long-running script whose
  DynamoDB restarts, a request whose earlier writes applied) is losing a connection, not
  misconfigured, so it keeps that answer too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from counters.core.errors import EndpointUnreachable, TableNotFound
from counters.core.failures import Classified, Failure

LAMBDA_ENV = "AWS_LAMBDA_FUNCTION_NAME"
"""Set in every Lambda execution environment (and by ``sam local`` and the local stack)."""
ENDPOINT_ENV = {"dynamodb": "AWS_ENDPOINT_URL_DYNAMODB", "sqs": "AWS_ENDPOINT_URL_SQS"}
"""The service's own endpoint variable; ``AWS_ENDPOINT_URL`` applies to every service."""
SERVICE_NAME = {"dynamodb": "DynamoDB", "sqs": "SQS"}

_reached: set[str] = set()
"""Endpoints this process has had an answer from (or at least a connection to)."""


def in_lambda() -> bool:
    """True inside a Lambda function (or its local emulation)."""
    return bool(os.environ.get(LAMBDA_ENV))


def _meta(operation: Callable[..., Any]) -> Any:
    return getattr(getattr(operation, "__self__", None), "meta", None)


def _endpoint(operation: Callable[..., Any]) -> str | None:
    """The URL a botocore client's operation is sent to (``None``: not a botocore client's)."""
    url = getattr(_meta(operation), "endpoint_url", None)
    return str(url) if url else None


def _service(operation: Callable[..., Any]) -> str:
    return str(getattr(getattr(_meta(operation), "service_model", None), "service_name", "dynamodb"))


def note(operation: Callable[..., Any], exc: BaseException | None, failure: Classified | None) -> None:
    """Remember that ``operation``'s endpoint was reached, unless this attempt (``exc``) could not connect."""
    if exc is None or isinstance(exc, ClientError) or (failure is not None and failure.kind is not Failure.NOT_SENT):
        endpoint = _endpoint(operation)
        if endpoint is not None and endpoint not in _reached:
            _reached.add(endpoint)


def unreachable(operation: Callable[..., Any], failure: Classified | None, attempts: int) -> EndpointUnreachable | None:
    """The error to raise when a call's budget ran out on connection failures alone (see the module doc)."""
    endpoint = _endpoint(operation)
    if endpoint is None or failure is None or failure.kind is not Failure.NOT_SENT or in_lambda() or endpoint in _reached:
        return None
    service = _service(operation)
    own = ENDPOINT_ENV.get(service, f"AWS_ENDPOINT_URL_{service.upper()}")
    if os.environ.get(own):
        source = f"{own} sets it"
    elif os.environ.get("AWS_ENDPOINT_URL"):
        source = f"AWS_ENDPOINT_URL sets it ({own} is not set)"
    else:
        region = getattr(_meta(operation), "region_name", None)
        source = f"neither {own} nor AWS_ENDPOINT_URL is set, so it is AWS's endpoint for region {region}"
    name = SERVICE_NAME.get(service, service)
    message = (
        f"cannot connect to {name} at {endpoint} ({failure.code}, {attempts} attempts; {source}): "
        f"start {name} there, or set {own} (or AWS_ENDPOINT_URL) to the endpoint it listens on"
    )
    return EndpointUnreachable(message, cause_code=failure.code, endpoint=endpoint)


def _tables(params: dict[str, Any]) -> list[str]:
    """The tables a request names (``TableName``, each transaction action's, a batch's)."""
    names = [params["TableName"]] if "TableName" in params else []
    for action in params.get("TransactItems") or ():
        names += [body["TableName"] for body in action.values() if isinstance(body, dict) and "TableName" in body]
    names += list(params.get("RequestItems") or ())
    return sorted({str(n) for n in names})


def missing_table(operation: Callable[..., Any], exc: ClientError | BotoCoreError, params: dict[str, Any]) -> TableNotFound | None:
    """A DynamoDB ``ResourceNotFoundException`` as [`TableNotFound`][counters.core.errors.TableNotFound] (anything else: ``None``)."""
    if not isinstance(exc, ClientError) or _service(operation) != "dynamodb":
        return None
    if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
        return None
    tables = _tables(params)
    named = repr(tables[0]) if len(tables) == 1 else ", ".join(map(repr, tables)) or "(unnamed)"
    region = getattr(_meta(operation), "region_name", None)
    message = (
        f"DynamoDB table {named} does not exist at {_endpoint(operation) or 'its endpoint'} in region {region}: "
        f"create it from template.yaml (sam deploy; locally, docs/layer.md's create-table), "
        f"or check TABLE_NAME and the region (AWS_REGION / AWS_DEFAULT_REGION)"
    )
    return TableNotFound(message, cause_code="ResourceNotFoundException", table=tables[0] if len(tables) == 1 else None)
