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

Outside Lambda only (inside one, botocore's error goes through as before, and the function's log
has it), a setup a new user gets wrong names its fix too ([`mistake`][counters.core.configuration.mistake],
[`client_mistake`][counters.core.configuration.client_mistake]):

* **no credentials** (``NoCredentialsError``): [`CredentialsNotFound`][counters.core.errors.CredentialsNotFound];
* **no Region** (``NoRegionError``, making the client): [`RegionNotSet`][counters.core.errors.RegionNotSet];
* **an endpoint without its scheme** (``ValueError: Invalid endpoint``): [`EndpointInvalid`][counters.core.errors.EndpointInvalid];
* **a table of another layout**: a key schema other than ``PK``/``SK``, a key of another type, or a
  counted attribute stored as a string: [`TableLayoutMismatch`][counters.core.errors.TableLayoutMismatch]. DynamoDB
  answers each with a ``ValidationException`` (in a transaction, a ``ValidationError`` reason) and no
  code of its own, so these are told by the message's pattern ([`KEY_MISMATCH`][counters.core.configuration.KEY_MISMATCH],
  [`OPERAND_MISMATCH`][counters.core.configuration.OPERAND_MISMATCH]) and only those shapes; a throttle, a conflict
  or a failed condition is classified before this is asked, so contention never becomes one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from counters.core.errors import (
    ConfigurationError,
    CredentialsNotFound,
    EndpointInvalid,
    EndpointUnreachable,
    RegionNotSet,
    TableLayoutMismatch,
    TableNotFound,
)
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
        f"create it from template.yaml (sam deploy; locally, the quickstart's create_table.py), "
        f"or check TABLE_NAME and the region (AWS_REGION / AWS_DEFAULT_REGION)"
    )
    return TableNotFound(message, cause_code="ResourceNotFoundException", table=tables[0] if len(tables) == 1 else None)


def client_mistake(service: str, exc: BaseException) -> ConfigurationError | None:
    """What making ``service``'s client raised (``NoRegionError``, ``ValueError: Invalid endpoint``)
    as the error naming its fix, outside Lambda; ``None``: raise botocore's."""
    if in_lambda():
        return None
    name = SERVICE_NAME.get(service, service)
    if isinstance(exc, NoRegionError):
        return RegionNotSet(
            f"no AWS Region to send {name} calls to (NoRegionError): set AWS_DEFAULT_REGION, e.g. "
            f"AWS_DEFAULT_REGION=us-east-1 (outside Lambda botocore reads AWS_DEFAULT_REGION, not AWS_REGION), "
            f"or a region in the ~/.aws/config profile AWS_PROFILE names",
            cause_code="NoRegionError",
        )
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid endpoint"):
        own = ENDPOINT_ENV.get(service, f"AWS_ENDPOINT_URL_{service.upper()}")
        variable = own if os.environ.get(own) or not os.environ.get("AWS_ENDPOINT_URL") else "AWS_ENDPOINT_URL"
        value = os.environ.get(variable, "")
        example = "http://" + (value.split("://", 1)[-1] or "127.0.0.1:8000")
        return EndpointInvalid(
            f"{variable}={value!r} is not an endpoint URL ({exc}): give it its scheme, e.g. {variable}={example}",
            cause_code="ValueError",
        )
    return None


KEY_MISMATCH = (
    "One of the required keys was not given a value",
    "The provided key element does not match the schema",
    "The number of conditions on the keys is invalid",
    "Type mismatch for key",
)
"""The ``ValidationException`` messages of a request whose key is not the table's: another key
schema (a missing or an extra key attribute) or a key of another type (AWS and DynamoDB Local)."""
OPERAND_MISMATCH = ("An operand in the update expression has an incorrect data type",)
"""The message of an ``ADD`` (or ``SET #n = #n + :d``) on an attribute that is not a number."""


def _validation_messages(exc: ClientError) -> list[str]:
    """The messages of a ``ValidationException``, or of a cancelled transaction's ``ValidationError`` reasons."""
    error = exc.response.get("Error", {})
    if error.get("Code") == "ValidationException":
        return [str(error.get("Message", ""))]
    if error.get("Code") == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons") or ()
        return [str(r.get("Message", "")) for r in reasons if r.get("Code") == "ValidationError"]
    return []


def _keys(params: dict[str, Any]) -> str:
    """The item keys a request names, as ``PK='POST#p1' SK='META'`` (for a message)."""
    keys = [params["Key"]] if "Key" in params else []
    for action in params.get("TransactItems") or ():
        keys += [body["Key"] for body in action.values() if isinstance(body, dict) and "Key" in body]
    shown = [" ".join(f"{name}={next(iter(value.values()))!r}" for name, value in key.items()) for key in keys]
    return "; ".join(shown) or "(no key)"


def mistake(operation: Callable[..., Any], exc: ClientError | BotoCoreError, params: dict[str, Any]) -> ConfigurationError | None:
    """A failure the engine does not classify (so never contention) as the setup mistake it shows:
    a missing table anywhere; outside Lambda also no credentials and a table of another layout
    (the module's list). ``None``: raise botocore's error."""
    missing = missing_table(operation, exc, params)
    if missing is not None or in_lambda():
        return missing
    service = _service(operation)
    if isinstance(exc, NoCredentialsError):
        return CredentialsNotFound(
            f"no AWS credentials to sign {SERVICE_NAME.get(service, service)} calls to {_endpoint(operation) or 'AWS'} "
            f"(NoCredentialsError): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (DynamoDB Local takes any values, "
            f"e.g. AWS_ACCESS_KEY_ID=dummy AWS_SECRET_ACCESS_KEY=dummy), or AWS_PROFILE naming a profile that has them",
            cause_code="NoCredentialsError",
        )
    if not isinstance(exc, ClientError) or service != "dynamodb":
        return None
    tables = _tables(params)
    named = ", ".join(map(repr, tables)) or "(unnamed)"
    for message in _validation_messages(exc):
        if any(shape in message for shape in KEY_MISMATCH):
            return TableLayoutMismatch(
                f"table {named} does not have the key the layer writes (ValidationException: {message}): the layer's "
                f"items are keyed PK (string, HASH) and SK (string, RANGE), as template.yaml's CountersTable: create "
                f"a table with that key schema (AttributeType S for both; the quickstart's create_table.py), or set "
                f"TABLE_NAME to one that has it",
                cause_code="ValidationException",
            )
        if any(shape in message for shape in OPERAND_MISMATCH):
            return TableLayoutMismatch(
                f"an attribute the layer counts in is not a number in table {named} (ValidationException: {message}), "
                f"on the item {_keys(params)}: the layer's counters (likeTally, capacities, sequences, tallies) are "
                f"numbers (N); an item written by hand or by another program holds one as a string (S): store it as "
                f"a number, or delete the item and let the layer create it",
                cause_code="ValidationException",
            )
    return None
