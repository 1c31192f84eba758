"""Shared fixtures: DynamoDB Local for the session, tables built from template.yaml, handlers
imported with the template's environment, API Gateway events, the local HTTP API, faults."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import requests

# Tests never need real AWS credentials or a configured region.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        # The layer's clients refuse any DynamoDB/SQS call made outside its retry engine
        # (counters.core.engine.run): a call with no retry fails the test that reaches it. The
        # local stack's worker processes inherit it.
        "TALLY_ENGINE_GUARD": "1",
        # The tests run the stream consumers (the local stack's pollers, or a drain in the test):
        # hot likes, the order pointer and escrow transfers are accepted as on the stack.
        "TALLY_STREAM_CONSUMERS": "1",
    }
)

from devstack.api import LocalApi, match, proxy_event  # noqa: E402
from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.runtime import LambdaContext  # noqa: E402
from devstack.template import ROOT, read_stack  # noqa: E402
from testkit.answers import body_of, drifts  # noqa: E402
from testkit.faults import FaultInjector  # noqa: E402
from testkit.functions import handler_module, template_function  # noqa: E402

EVENTS = ROOT / "events"
HTTP_TIMEOUT = 120
"""Seconds a test's HTTP client waits for an answer from the local API: a hang guard, not a speed
bound (one request is several DynamoDB calls, each up to the layer's 5 s read timeout and its
retries on a loaded machine; 10 s failed there as a ReadTimeout that said nothing about the code)."""


# --------------------------------------------------------------------------- DynamoDB Local
@pytest.fixture(scope="session")
def dynamodb_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DynamoDB Local on a free port for the whole session (or TALLY_TEST_DYNAMODB_ENDPOINT if set)."""
    external = os.environ.get("TALLY_TEST_DYNAMODB_ENDPOINT")
    if external:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = external
        yield external
        return
    log = tmp_path_factory.mktemp("dynamodb") / "dynamodb-local.log"
    with DynamoDBLocal(log=log) as ddb_local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
        try:
            yield ddb_local.endpoint
        finally:
            os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)


@pytest.fixture(scope="session")
def ddb(dynamodb_endpoint: str) -> Any:
    """A plain client for arranging and asserting (never fault-injected)."""
    return dynamodb_client(dynamodb_endpoint)


def _new_table(ddb: Any) -> str:
    name = f"tally-test-{uuid.uuid4().hex[:10]}"
    create_table(ddb, read_stack(name))
    return name


@pytest.fixture
def table(ddb: Any) -> Iterator[str]:
    """A fresh table per test, created from template.yaml's definition."""
    name = _new_table(ddb)
    yield name
    ddb.delete_table(TableName=name)


@pytest.fixture
def layer_client(dynamodb_endpoint: str) -> Iterator[Any]:
    """The layer's process-wide client, new for this test so injected faults never leak."""
    from counters.core import client as dynamo

    dynamo.reset_client()
    yield dynamo.client()
    dynamo.reset_client()


@pytest.fixture
def faults(layer_client: Any) -> Iterator[FaultInjector]:
    injector = FaultInjector(layer_client, seed=7)
    yield injector
    injector.detach()


# --------------------------------------------------------------------------- handlers
@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext.for_function("test-function", 512, 10)


@pytest.fixture
def deferring_likes(load_function: Callable[..., Any], table: str, queues: Queues, layer_client: Any) -> tuple[Any, Any, Any]:
    """LikesFunction (a short in-line budget, so faults defer), RetryWorkerFunction and
    OperationsFunction, on one table and the retry queues: a like's whole deferred path."""
    from counters.core.failures import RetryPolicy
    from counters.services.likes import Likes

    fast = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
    likes = load_function("LikesFunction", table, queues.urls, build=lambda s: Likes(s.table_name, retry=fast))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    return likes, worker, operations


@pytest.fixture
def load_function(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """A function's handler module configured with the template's environment for ``table``
    (settings injected through ``module.function.configure``; nothing is re-imported)."""

    def load(
        function: str,
        table_name: str,
        refs: dict[str, str] | None = None,
        build: Callable[[Any], Any] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """``params`` are template parameters (``{"AuthMode": "COGNITO"}``); ``build(settings)``,
        if given, makes the function's service (e.g. with a fast retry policy)."""
        fn = template_function(function, table_name, refs=refs, params=params)
        for key, value in fn.environment.items():
            monkeypatch.setenv(key, value)  # Powertools reads its own variables per call
        module = handler_module(fn)
        settings = module.function.settings_type.from_env(fn.environment)
        module.function.configure(settings, build(settings) if build else None)
        return module

    return load


def api_event(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The REST proxy event API Gateway would send for this request (routes from template.yaml)."""
    stack = read_stack("unused")
    route, params, _ = match(stack.routes, method, path.split("?")[0])
    assert route is not None, f"no route for {method} {path}"
    raw = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
    data = raw.encode() if isinstance(raw, str) else (raw or b"")
    hdrs = {"Content-Type": ["application/json"], **{k: [v] for k, v in (headers or {}).items()}}
    return proxy_event(route, method, path, hdrs, data, "dev", params)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def invoke(module: Any, event: dict[str, Any], context: LambdaContext | None = None) -> tuple[int, Any]:
    """Call a handler; returns (status, parsed JSON body), the answer checked against docs/openapi.json."""
    response = module.lambda_handler(event, context or LambdaContext.for_function("test", 512, 10))
    body = response.get("body")
    parsed = json.loads(body) if body else None
    if isinstance(response, dict) and "httpMethod" in event:
        OFF_CONTRACT.extend(drifts(event["httpMethod"], event["path"], response["statusCode"], parsed))
    return response["statusCode"], parsed


# --------------------------------------------------------------------------- every answer against the document
OFF_CONTRACT: list[str] = []
"""The answers a test received that docs/openapi.json does not describe (testkit.answers): a test
that met one fails (``pytest_runtest_call`` below), naming the route, the status and the field."""
_send = requests.Session.send


def _checked_send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
    """Every HTTP answer a test receives from a local API (requests, schemathesis, the HTTP proof)."""
    response = _send(self, request, **kwargs)
    host = urlsplit(request.url or "").hostname
    if host in ("127.0.0.1", "localhost") and not kwargs.get("stream"):
        OFF_CONTRACT.extend(drifts(request.method or "", request.url or "", response.status_code, body_of(response.content)))
    return response


requests.Session.send = _checked_send  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    OFF_CONTRACT.clear()
    result = yield
    found, OFF_CONTRACT[:] = list(dict.fromkeys(OFF_CONTRACT)), []
    if found:
        raise AssertionError("answers off docs/openapi.json (objects closed):\n" + "\n".join(found[:20]))
    return result


# --------------------------------------------------------------------------- local HTTP API
@dataclass
class RunningApi:
    url: str
    table: str


@pytest.fixture(scope="session")
def local_api(ddb: Any) -> Iterator[RunningApi]:
    """The docker-free API (devstack) on a free port, backed by DynamoDB Local."""
    name = _new_table(ddb)
    api = LocalApi(read_stack(name), "127.0.0.1", 0, concurrency=4)
    api.warm()
    api.start()
    try:
        yield RunningApi(api.url, name)
    finally:
        api.stop()


@contextmanager
def moto_table(monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[Any]:
    """A moto DynamoDB with ``name`` built from template.yaml, the layer's client pointed at it
    (whatever endpoint an earlier test set): for fast unit tests of handlers."""
    from moto import mock_aws

    from counters.core import client as dynamo

    for variable in ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(variable, raising=False)
    with mock_aws():
        dynamo.reset_client()
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, read_stack(name))
        try:
            yield client
        finally:
            dynamo.reset_client()


def item_count(ddb: Any, table: str, pk: str | None = None, prefix: str | None = None) -> int:
    """How many items the table holds (optionally under one PK / SK prefix), consistently read."""
    total, kwargs = 0, {"TableName": table, "Select": "COUNT", "ConsistentRead": True}
    if pk is not None:
        kwargs["KeyConditionExpression"] = "PK = :pk" + (" AND begins_with(SK, :p)" if prefix else "")
        kwargs["ExpressionAttributeValues"] = {":pk": {"S": pk}, **({":p": {"S": prefix}} if prefix else {})}
        op = ddb.query
    else:
        op = ddb.scan
    while True:
        page = op(**kwargs)
        total += page["Count"]
        if "LastEvaluatedKey" not in page:
            return total
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def like_partitions(post_id: str) -> list[str]:
    """Every partition key a post's like items can live under: its spread keys, and the post's own
    (seed 01's item collection, for posts stored before ``spread``)."""
    from counters.services.likes.model import SPREAD

    return [f"POST#{post_id}"] + [f"POST#{post_id}#S{n}" for n in range(SPREAD)]


def likes_count(ddb: Any, table: str, post_id: str) -> int:
    """How many users like ``post_id``: its ``LIKE#`` items that are likes, not tombstones
    (``liked = false``, kept after an unlike to order later replays), under any of its partition keys."""
    total = 0
    for pk in like_partitions(post_id):
        kwargs: dict[str, Any] = {
            "TableName": table,
            "Select": "COUNT",
            "ConsistentRead": True,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :p)",
            "FilterExpression": "attribute_not_exists(liked) OR liked = :t",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":p": {"S": "LIKE#"}, ":t": {"BOOL": True}},
        }
        while True:
            page = ddb.query(**kwargs)
            total += page["Count"]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return total


def like_item(ddb: Any, table: str, post_id: str, user_id: str) -> dict[str, Any] | None:
    """A user's like state item of a post, wherever the post's layout keeps it (raw, or ``None``)."""
    from counters.services.likes.model import SPREAD
    from counters.store.post_items import hot_like_key

    for key in (hot_like_key(post_id, user_id, SPREAD), {"PK": f"POST#{post_id}", "SK": f"LIKE#USER#{user_id}"}):
        item = ddb.get_item(TableName=table, Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True).get("Item")
        if item:
            return item
    return None


def settled(read: Callable[[], dict[str, Any]], queue_depth: Callable[[], int], poll: float = 0.1) -> dict[str, Any]:
    """A 202's operation record once it is no longer PENDING. The verdict is bounded by work, not
    by a clock: once the retry queue is empty (every message received, handled and deleted, or
    moved to the DLQ), the worker is done with it, and the record is read one last time: still
    PENDING then is a failure however fast or slow the machine. A message that is never consumed
    is a hang, for pytest-timeout to report."""
    while True:
        record = read()
        if record["status"] != "PENDING":
            return record
        if queue_depth() == 0:
            return read()
        time.sleep(poll)


TIERS = ("unit", "integration", "e2e", "tooling")
"""The suite's tiers, one folder each (tests/<tier>/): each test is marked with its folder's tier
(``-m e2e``), and ``make test-<tier>`` runs one."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        parts = Path(item.fspath).relative_to(tests).parts
        if len(parts) < 2 or parts[0] not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: a test lives in one tier's folder, tests/{{{','.join(TIERS)}}}/")
        item.add_marker(getattr(pytest.mark, parts[0]))


# --------------------------------------------------------------------------- SQS
@pytest.fixture(scope="session")
def sqs_endpoint() -> Iterator[str]:
    """moto's SQS server for the session (the queue emulator the local stack uses)."""
    from devstack.sqs import SqsEmulator

    emulator = SqsEmulator().start()
    os.environ["AWS_ENDPOINT_URL_SQS"] = emulator.endpoint
    try:
        yield emulator.endpoint
    finally:
        os.environ.pop("AWS_ENDPOINT_URL_SQS", None)
        emulator.stop()


@dataclass
class Queues:
    sqs: Any
    urls: dict[str, str]
    attrs: dict[str, str]

    def depth(self, logical_id: str) -> int:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        got = self.sqs.get_queue_attributes(QueueUrl=self.urls[logical_id], AttributeNames=names)["Attributes"]
        return sum(int(got[n]) for n in names)


@pytest.fixture
def queues(sqs_endpoint: str, table: str) -> Iterator[Queues]:
    """The template's queues (redrive included), visibility 1 s so redelivery is quick."""
    from counters.core import client as commands
    from devstack.sqs import create_queues, sqs_client

    sqs = sqs_client(sqs_endpoint)
    urls, attrs = create_queues(sqs, table, visibility_override=1)
    commands.reset_sqs_client()
    yield Queues(sqs, urls, attrs)
    commands.reset_sqs_client()
    for url in urls.values():
        sqs.delete_queue(QueueUrl=url)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """tests/e2e/docs/: how many blocks of README.md and docs/*.md ran, were skipped (per reason) or are
    run by another test (a user property, so it reaches the summary from an xdist worker too)."""
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", []):
                if name == "docs_run" and getattr(report, "when", None) == "call":
                    terminalreporter.write_sep("-", "docs that run")
                    terminalreporter.write_line(str(value))
