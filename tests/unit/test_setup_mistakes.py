"""Setup mistakes outside Lambda name their fix (counters.core.configuration): no credentials, no
Region, an endpoint without its scheme, and a table of another layout (the ValidationException
shapes, told by pattern). Inside Lambda botocore's error goes through as before; a throttle or a
conflict is never turned into one. tests/integration/test_setup_mistakes_local.py meets the table
shapes on DynamoDB Local, whose messages these patterns were taken from.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

from counters import Likes
from counters.core import client as dynamo
from counters.core.configuration import KEY_MISMATCH, LAMBDA_ENV, OPERAND_MISMATCH
from counters.core.engine import run
from counters.core.errors import (
    ConfigurationError,
    ContentionError,
    CounterError,
    CredentialsNotFound,
    EndpointInvalid,
    RegionNotSet,
    TableLayoutMismatch,
)
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome

NO_SLEEP = RetryPolicy(max_attempts=3, sleep=lambda _s: None)
KEY = {"PK": {"S": "POST#p"}, "SK": {"S": "META"}}


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Outside Lambda, no profile files, the layer's client made anew from the environment set."""
    monkeypatch.delenv(LAMBDA_ENV, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{refused_port()}")
    dynamo.reset_client()
    yield monkeypatch
    dynamo.reset_client()


def test_no_credentials_names_the_variables_to_set(fresh_client: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        fresh_client.delenv(name, raising=False)
    fresh_client.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(CredentialsNotFound) as raised:
        Likes("counters", retry=NO_SLEEP).posts.get_post("p1")
    error = raised.value
    assert isinstance(error, ConfigurationError) and isinstance(error, CounterError)
    assert isinstance(error.__cause__, NoCredentialsError)
    assert "AWS_ACCESS_KEY_ID" in error.message and "AWS_SECRET_ACCESS_KEY" in error.message and "dummy" in error.message
    fresh_client.setenv(LAMBDA_ENV, "LikesFunction")  # inside Lambda: botocore's error, as documented
    dynamo.reset_client()
    with pytest.raises(NoCredentialsError):
        Likes("counters", retry=NO_SLEEP).posts.get_post("p1")


def test_no_region_names_aws_default_region(fresh_client: pytest.MonkeyPatch) -> None:
    fresh_client.delenv("AWS_DEFAULT_REGION", raising=False)
    fresh_client.delenv("AWS_REGION", raising=False)
    with pytest.raises(RegionNotSet, match=r"set AWS_DEFAULT_REGION, e\.g\. AWS_DEFAULT_REGION=us-east-1") as raised:
        Likes("counters", retry=NO_SLEEP).posts.get_post("p1")
    assert isinstance(raised.value.__cause__, NoRegionError)
    fresh_client.setenv(LAMBDA_ENV, "LikesFunction")
    with pytest.raises(NoRegionError):
        dynamo.client()


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"])
def test_an_endpoint_without_its_scheme_names_the_variable_and_the_url_it_should_be(
    fresh_client: pytest.MonkeyPatch, variable: str
) -> None:
    fresh_client.delenv("AWS_ENDPOINT_URL_DYNAMODB")
    fresh_client.setenv(variable, "127.0.0.1:8000")
    with pytest.raises(EndpointInvalid) as raised:
        Likes("counters", retry=NO_SLEEP).posts.get_post("p1")
    assert f"{variable}='127.0.0.1:8000'" in raised.value.message
    assert f"e.g. {variable}=http://127.0.0.1:8000" in raised.value.message
    fresh_client.setenv(LAMBDA_ENV, "LikesFunction")
    with pytest.raises(ValueError, match="Invalid endpoint"):
        dynamo.client()


class FakeClient:
    """A botocore-like DynamoDB client whose ``update_item`` raises each scripted error in turn."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.meta = SimpleNamespace(
            endpoint_url="http://fake.invalid:8000", region_name="us-east-1", service_model=SimpleNamespace(service_name="dynamodb")
        )

    def update_item(self, **params: Any) -> dict[str, Any]:
        if self.errors:
            raise self.errors.pop(0)
        return {}

    transact_write_items = update_item


def validation(message: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": message}}, "UpdateItem")


def cancelled(*reasons: dict[str, str]) -> ClientError:
    body = {"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"}, "CancellationReasons": list(reasons)}
    return ClientError(body, "TransactWriteItems")  # type: ignore[arg-type]  # botocore's TypedDict omits CancellationReasons


@pytest.fixture
def outside_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LAMBDA_ENV, raising=False)


@pytest.mark.parametrize("message", [*KEY_MISMATCH, *OPERAND_MISMATCH])
def test_each_validation_shape_is_a_layout_mismatch_naming_the_table(outside_lambda: None, message: str) -> None:
    fake = FakeClient(validation(f"One or more parameter values were invalid: {message}"))
    with pytest.raises(TableLayoutMismatch) as raised:
        run(fake.update_item, {"TableName": "mine", "Key": KEY}, policy=NO_SLEEP)
    assert "'mine'" in raised.value.message and message in raised.value.message
    expected = "PK (string, HASH) and SK (string, RANGE)" if message in KEY_MISMATCH else "PK='POST#p' SK='META'"
    assert expected in raised.value.message


def test_a_cancelled_transaction_s_validation_reason_is_one_too(outside_lambda: None) -> None:
    """AWS reports a transaction's bad operand as a ValidationError reason."""
    fake = FakeClient(cancelled({"Code": "None"}, {"Code": "ValidationError", "Message": OPERAND_MISMATCH[0]}))
    with pytest.raises(TableLayoutMismatch, match="is not a number"):
        run(fake.transact_write_items, {"TransactItems": [{"Update": {"TableName": "mine", "Key": KEY}}]}, policy=NO_SLEEP)


def test_contention_is_never_a_setup_mistake(outside_lambda: None) -> None:
    """A conflict (or throttle) in the same cancellation is classified first: retried, then contention."""
    conflict = cancelled({"Code": "TransactionConflict"}, {"Code": "ValidationError", "Message": OPERAND_MISMATCH[0]})
    fake = FakeClient(conflict, conflict, conflict)
    report = run(fake.transact_write_items, {"TransactItems": [{"Update": {"TableName": "mine", "Key": KEY}}]}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts) == (Outcome.CONTENTION, 3)
    assert not isinstance(ContentionError(), ConfigurationError)


def test_another_validation_error_and_any_inside_lambda_go_through_as_botocore_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LAMBDA_ENV, raising=False)
    with pytest.raises(ClientError, match="Invalid UpdateExpression"):
        run(FakeClient(validation("Invalid UpdateExpression: Syntax error")).update_item, {"TableName": "t", "Key": KEY}, policy=NO_SLEEP)
    monkeypatch.setenv(LAMBDA_ENV, "LikesFunction")
    with pytest.raises(ClientError) as raised:
        run(FakeClient(validation(KEY_MISMATCH[0])).update_item, {"TableName": "t", "Key": KEY}, policy=NO_SLEEP)
    assert not isinstance(raised.value, CounterError)
