"""OpenTelemetry spans around the engine's logical calls (counters.core.tracing), with the SDK's
in-memory exporter over moto: one span per call, its retries as events, a fault's kind on it;
nothing recorded and nothing imported when tracing is off or the API is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from counters.core import client as dynamo
from counters.core import tracing
from counters.core.engine import run
from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from testkit.faults import FaultInjector

TABLE = "tally-tracing"
NO_SLEEP = RetryPolicy(max_attempts=4, sleep=lambda _s: None)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider.get_tracer(tracing.NAME))
    yield exporter
    tracing.configure(None)
    provider.shutdown()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto with the template's table; the layer's client pointed at it, fault-injectable."""
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(variable, raising=False)
    with mock_aws():
        dynamo.reset_client()
        create_table(boto3.client("dynamodb", region_name="us-east-1"), read_stack(TABLE))
        try:
            yield dynamo.client()
        finally:
            dynamo.reset_client()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def events(span: ReadableSpan) -> list[tuple[str, Any, Any]]:
    return [(e.name, (e.attributes or {})["tally.attempt"], (e.attributes or {})["tally.failure"]) for e in span.events]


def test_a_like_is_one_span_per_logical_call_with_its_retries_as_events(aws: Any, spans: InMemorySpanExporter) -> None:
    likes = Likes(TABLE, retry=NO_SLEEP)
    likes.posts.create_post(author_id="alice", body="hello", post_id="p1")
    faults = FaultInjector(aws).add("throttle", operations={"TransactWriteItems"}, limit=2)
    spans.clear()
    assert likes.toggling.like("p1", "u1").changed is True
    (span,) = named(spans, "tally DynamoDB.TransactWriteItems")
    attributes = dict(span.attributes or {})
    assert attributes["rpc.system"] == "aws-api"
    assert (attributes["rpc.service"], attributes["rpc.method"]) == ("DynamoDB", "TransactWriteItems")
    assert attributes["aws.dynamodb.table_names"] == (TABLE,)
    assert (attributes["tally.outcome"], attributes["tally.attempts"], attributes["tally.contended_retries"]) == ("applied", 3, 2)
    assert "tally.failure" not in attributes  # applied: the last attempt did not fail
    assert isinstance(attributes["aws.dynamodb.consumed_write_units"], float)
    assert events(span) == [("attempt_failed", 1, "throttled"), ("attempt_failed", 2, "throttled")]
    assert faults.injected["throttle"] == 2


def test_an_injected_fault_shows_its_failure_kind(aws: Any, spans: InMemorySpanExporter) -> None:
    likes = Likes(TABLE, retry=NO_SLEEP)
    likes.posts.create_post(author_id="alice", body="hello", post_id="p1")
    FaultInjector(aws).add("conflict", operations={"TransactWriteItems"})  # every attempt: past the budget
    spans.clear()
    with pytest.raises(ContentionError):
        likes.toggling.like("p1", "u1")
    (span,) = named(spans, "tally DynamoDB.TransactWriteItems")
    attributes = dict(span.attributes or {})
    assert (attributes["tally.outcome"], attributes["tally.attempts"], attributes["tally.failure"]) == ("contention", 4, "conflict")
    assert attributes["aws.error_code"] == "TransactionConflict"  # the cancellation reason the engine classified
    assert [kind for _, _, kind in events(span)] == ["conflict"] * 4


def test_an_unknown_outcome_is_marked_on_its_span(aws: Any, spans: InMemorySpanExporter) -> None:
    FaultInjector(aws).add("after_commit", operations={"PutItem"}, limit=1)
    item = {"PK": {"S": "X#1"}, "SK": {"S": "X"}}
    report = run(aws.put_item, {"TableName": TABLE, "Item": item}, policy=NO_SLEEP, write=True)
    (span,) = named(spans, "tally DynamoDB.PutItem")
    attributes = dict(span.attributes or {})
    assert (attributes["tally.outcome"], attributes["tally.attempts"], attributes["tally.unknown_seen"]) == ("applied", 2, True)
    assert events(span) == [("attempt_failed", 1, "unknown")]
    assert report.attempts == 2


def test_an_error_the_engine_lets_through_is_recorded_on_the_span(aws: Any, spans: InMemorySpanExporter) -> None:
    with pytest.raises(Exception) as raised:
        run(aws.get_item, {"TableName": "no-such-table", "Key": {"PK": {"S": "a"}, "SK": {"S": "b"}}}, policy=NO_SLEEP)
    (span,) = named(spans, "tally DynamoDB.GetItem")
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]
    assert str((span.events[0].attributes or {})["exception.type"]).endswith(type(raised.value).__name__)


def test_nested_calls_of_a_hook_are_child_spans_and_a_queue_names_its_url(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_SQS", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        run(sqs.send_message, {"QueueUrl": url, "MessageBody": "{}"}, policy=NO_SLEEP)
    (span,) = named(spans, "tally SQS.SendMessage")
    attributes = dict(span.attributes or {})
    assert (attributes["rpc.service"], attributes["messaging.destination.name"]) == ("SQS", url)
    assert "aws.dynamodb.table_names" not in attributes


def test_off_records_nothing(aws: Any, spans: InMemorySpanExporter) -> None:
    tracing.configure(None)
    likes = Likes(TABLE, retry=NO_SLEEP)
    likes.posts.create_post(author_id="alice", body="hello", post_id="p1")
    assert likes.toggling.like("p1", "u1").changed is True
    assert spans.get_finished_spans() == ()


def test_only_otel_turns_it_on() -> None:
    for value in ("", "xray", "none", "X-Ray"):
        assert tracing._tracer_from({tracing.ENV: value}) is None
    assert tracing._tracer_from({}) is None
    assert tracing._tracer_from({tracing.ENV: "otel"}) is not None
    assert tracing._tracer_from({tracing.ENV: " OTel "}) is not None


# ---------------------------------------------------------------------------- the cold start
PROBE = (
    "import sys; {block}import app; from counters.core import tracing; import json; "
    "print(json.dumps([tracing.enabled(), sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry')]))"
)


def _handler_imports(environ: dict[str, str], block: str = "") -> tuple[bool, list[str]]:
    fn = read_stack("unused").functions["LikesFunction"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(map(str, [fn.code_dir, *fn.layers])), **environ}
    out = subprocess.run([sys.executable, "-c", PROBE.format(block=block)], env=env, cwd=fn.code_dir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    enabled, modules = json.loads(out.stdout.strip().splitlines()[-1])
    return enabled, modules


@pytest.mark.parametrize("provider", ["", "xray", "none"])
def test_a_handler_imports_no_opentelemetry_unless_asked(provider: str) -> None:
    assert _handler_imports({tracing.ENV: provider} if provider else {}) == (False, [])


def test_asked_for_it_imports_the_api_only() -> None:
    enabled, modules = _handler_imports({tracing.ENV: "otel"})
    assert enabled is True and "opentelemetry.trace" in modules  # the probe sees the import
    assert not any(m.startswith("opentelemetry.sdk") for m in modules)  # the SDK is the ADOT layer's


def test_asked_for_it_without_the_api_installed_it_does_nothing() -> None:
    block = "sys.modules['opentelemetry'] = None; "  # as in a layer built without [otel] and no ADOT layer
    assert _handler_imports({tracing.ENV: "otel"}, block) == (False, ["opentelemetry"])  # only the None the probe put there


def test_a_span_reports_its_own_call_s_capacity_when_the_caller_shares_a_total(aws: Any, spans: InMemorySpanExporter) -> None:
    from counters.core.outcome import Capacity

    total = Capacity()
    for n in (1, 2):
        item = {"PK": {"S": f"X#{n}"}, "SK": {"S": "X"}}
        run(aws.put_item, {"TableName": TABLE, "Item": item}, policy=NO_SLEEP, write=True, capacity=total)
    first, second = named(spans, "tally DynamoDB.PutItem")
    own = [span.attributes["aws.dynamodb.consumed_write_units"] for span in (first, second) if span.attributes]
    assert total.write_units > 0 and own == [total.write_units / 2, total.write_units / 2]
