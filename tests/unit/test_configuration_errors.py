"""Errors that say what to do (issue 27, item 3): a setup to fix is not reported as load to retry.

* An endpoint no attempt could connect to: outside Lambda, :class:`EndpointUnreachable` naming the
  endpoint and the variables that set it (it used to be ``ContentionError: DynamoDB is busy``);
  inside Lambda, or once the endpoint has answered, still contention (503, retried).
* A missing table: :class:`TableNotFound` naming the table (it used to be botocore's raw
  ``ResourceNotFoundException``); an API answers it as a bare 500, the fix in the log only.
* The Lambda glue without the ``[lambda]`` extra: the ``ModuleNotFoundError`` says what to install.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from moto import mock_aws

from counters import Likes
from counters.core import client as dynamo
from counters.core.configuration import LAMBDA_ENV
from counters.core.engine import read, run
from counters.core.errors import ContentionError, EndpointUnreachable, TableNotFound
from counters.core.extras import LAMBDA_EXTRA
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from devstack.template import ROOT
from tests.conftest import api_event, invoke

NO_SLEEP = RetryPolicy(max_attempts=3, sleep=lambda _s: None)
KEY = {"PK": {"S": "POST#p"}, "SK": {"S": "META"}}


def refused_port() -> int:
    """A local port nothing listens on (bound, then closed): connecting is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeClient:
    """A botocore-like client at a unique endpoint whose ``get_item`` raises each scripted error in turn."""

    count = 0

    def __init__(self, *errors: BaseException) -> None:
        FakeClient.count += 1
        self.errors = list(errors)
        url = f"http://fake-{FakeClient.count}.invalid:8000"
        self.meta = SimpleNamespace(endpoint_url=url, region_name="us-east-1", service_model=SimpleNamespace(service_name="dynamodb"))

    def get_item(self, **params: Any) -> dict[str, Any]:
        if self.errors:
            raise self.errors.pop(0)
        return {"Item": {}}


def refused(client: FakeClient) -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url=client.meta.endpoint_url)


@pytest.fixture
def outside_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LAMBDA_ENV, raising=False)


@pytest.fixture
def refused_endpoint(monkeypatch: pytest.MonkeyPatch, outside_lambda: None) -> Iterator[str]:
    """The layer's DynamoDB client pointed at a refused port through AWS_ENDPOINT_URL_DYNAMODB."""
    endpoint = f"http://127.0.0.1:{refused_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    dynamo.reset_client()
    yield endpoint
    dynamo.reset_client()


# -- an endpoint that cannot be connected to ------------------------------------------------------
def test_a_refused_endpoint_outside_lambda_names_the_endpoint_and_the_variables_that_set_it(refused_endpoint: str) -> None:
    with pytest.raises(EndpointUnreachable) as raised:
        read(dynamo.client().get_item, NO_SLEEP, TableName="t", Key=KEY)
    error = raised.value
    assert not isinstance(error, ContentionError)  # not "DynamoDB is busy; retry the request"
    assert (error.endpoint, error.cause_code) == (refused_endpoint, "EndpointConnectionError")
    assert refused_endpoint in error.message
    assert "AWS_ENDPOINT_URL_DYNAMODB" in error.message and "AWS_ENDPOINT_URL)" in error.message
    assert "3 attempts" in error.message  # the engine's whole budget was spent first


def test_the_quickstart_against_a_refused_endpoint_says_what_to_fix(refused_endpoint: str) -> None:
    """docs/layer.md's first call, a user's view: a library error with the fix, not contention."""
    likes = Likes("counters", retry=NO_SLEEP)
    with pytest.raises(EndpointUnreachable, match="AWS_ENDPOINT_URL_DYNAMODB"):
        likes.posts.create_post(author_id="alice", body="hello", idempotency_key="quickstart-1")
    with pytest.raises(EndpointUnreachable, match=refused_endpoint):
        likes.posts.get_post("p1")


def test_the_message_says_which_variable_set_the_endpoint(monkeypatch: pytest.MonkeyPatch, outside_lambda: None) -> None:
    endpoint = f"http://127.0.0.1:{refused_port()}"
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    dynamo.reset_client()
    try:
        with pytest.raises(EndpointUnreachable, match=r"AWS_ENDPOINT_URL sets it \(AWS_ENDPOINT_URL_DYNAMODB is not set\)"):
            read(dynamo.client().get_item, NO_SLEEP, TableName="t", Key=KEY)
    finally:
        dynamo.reset_client()


def test_inside_lambda_a_lost_connection_is_still_contention(refused_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a Lambda function (or sam local, or the local stack) it is retried and answered 503 as before."""
    monkeypatch.setenv(LAMBDA_ENV, "LikesFunction")
    report = run(dynamo.client().get_item, {"TableName": "t", "Key": KEY}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts, report.failure and report.failure.code) == (Outcome.CONTENTION, 3, "EndpointConnectionError")
    with pytest.raises(ContentionError) as raised:
        read(dynamo.client().get_item, NO_SLEEP, TableName="t", Key=KEY)
    assert raised.value.status == 503


def test_an_endpoint_that_answered_once_is_losing_a_connection_not_misconfigured(outside_lambda: None) -> None:
    fake = FakeClient()
    assert run(fake.get_item, {}, policy=NO_SLEEP).outcome is Outcome.APPLIED  # reached once
    fake.errors = [refused(fake)] * 3
    assert run(fake.get_item, {}, policy=NO_SLEEP).outcome is Outcome.CONTENTION


def test_a_connection_refused_after_a_read_timeout_is_not_called_unreachable(outside_lambda: None) -> None:
    """A read timeout means it connected (and the write may have applied): the call stays contention."""
    fake = FakeClient()
    fake.errors = [ReadTimeoutError(endpoint_url=fake.meta.endpoint_url), refused(fake), refused(fake)]
    report = run(fake.get_item, {}, policy=NO_SLEEP)
    assert (report.outcome, report.unknown_seen) == (Outcome.CONTENTION, True)


def test_a_refusal_within_the_budget_is_retried_as_before(outside_lambda: None) -> None:
    fake = FakeClient()
    fake.errors = [refused(fake), refused(fake)]
    report = run(fake.get_item, {}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts) == (Outcome.APPLIED, 3)


# -- a missing table ------------------------------------------------------------------------------
@pytest.fixture
def moto_dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        dynamo.reset_client()
        yield boto3.client("dynamodb", region_name="us-east-1")
        dynamo.reset_client()


def test_a_missing_table_names_the_table_and_the_fix(moto_dynamodb: Any) -> None:
    with pytest.raises(TableNotFound) as raised:
        Likes("no-such-table", retry=NO_SLEEP).posts.get_post("p1")
    error = raised.value
    assert isinstance(error.__cause__, ClientError)  # chained: botocore's error is kept
    assert (error.table, error.cause_code) == ("no-such-table", "ResourceNotFoundException")
    assert "'no-such-table'" in error.message and "us-east-1" in error.message
    assert "template.yaml" in error.message and "TABLE_NAME" in error.message


def test_a_transaction_on_a_missing_table_names_it_too(moto_dynamodb: Any) -> None:
    put = {"Put": {"TableName": "gone", "Item": {"PK": {"S": "a"}, "SK": {"S": "b"}}}}
    with pytest.raises(TableNotFound, match="'gone'"):
        run(dynamo.client().transact_write_items, {"TransactItems": [put]}, policy=NO_SLEEP)


def test_an_api_answers_a_missing_table_as_a_bare_500(moto_dynamodb: Any, load_function: Any) -> None:
    """The fix is for the operator (logged); the client learns nothing about the deployment."""
    module = load_function("LikesFunction", "tally-missing-table")
    status, body = invoke(module, api_event("GET", "/posts/p1"))
    assert (status, body) == (500, {"error": "internal_error", "message": "internal error; the request may be retried"})


# -- the Lambda glue without its extra ------------------------------------------------------------
@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("counters.http.function", "aws_lambda_powertools"),  # no pydantic at run time (counters.http.validation)
        ("counters.http.resolver", "aws_lambda_powertools"),
        ("counters.http.models", "aws_lambda_powertools"),  # the contracts' base: Powertools' Path, Header, Query
        ("counters.http.models", "pydantic"),
        ("counters.runtime.function", "aws_lambda_powertools"),  # Logger and Metrics, no pydantic
    ],
)
def test_the_lambda_glue_without_the_extra_says_what_to_install(module: str, absent: str) -> None:
    probe = f"""
import sys
sys.modules[{absent!r}] = None  # as if not installed: importing it raises ModuleNotFoundError
try:
    import {module}
except ModuleNotFoundError as error:
    print(error.name)
    print(error)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "layers" / "counters")},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    name, message = done.stdout.splitlines()
    assert name.split(".")[0] == absent  # still a ModuleNotFoundError for that module: code catching ImportError sees no change
    assert LAMBDA_EXTRA in message and LAMBDA_EXTRA == "pip install 'tally-counters[lambda]'"
    if absent == "aws_lambda_powertools":  # the first thing each module needs: the message names the module imported
        assert message.startswith(f"{module} needs the [lambda] extra"), message
