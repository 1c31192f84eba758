"""A like over the layer against DynamoDB Local, traced (counters.core.tracing) into the SDK's
in-memory exporter: one span per logical DynamoDB call, retries as events, a fault's kind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from counters.core import tracing
from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from tests.conftest import api_event, invoke

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)


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
def likes_app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))


def test_a_like_under_injected_faults_is_traced_call_by_call(likes_app: Any, faults: Any, table: str, spans: InMemorySpanExporter) -> None:
    assert invoke(likes_app, api_event("POST", "/posts", {"postId": "p1", "authorId": "alice", "body": "hello"}))[0] == 201
    faults.add("conflict", operations={"TransactWriteItems"}, limit=1)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
    spans.clear()
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[1]["changed"] is True
    finished = spans.get_finished_spans()
    assert finished and all(span.name.startswith("tally DynamoDB.") for span in finished)
    assert all((span.attributes or {})["aws.dynamodb.table_names"] == (table,) for span in finished)
    (write,) = [span for span in finished if span.name == "tally DynamoDB.TransactWriteItems"]
    attributes = dict(write.attributes or {})
    assert (attributes["tally.outcome"], attributes["tally.attempts"], attributes["tally.unknown_seen"]) == ("applied", 3, True)
    kinds = sorted(str((event.attributes or {})["tally.failure"]) for event in write.events)
    assert kinds == ["conflict", "unknown"]  # the order is the injector's draw: not asserted
    assert float(str(attributes["aws.dynamodb.consumed_write_units"])) > 0  # DynamoDB Local reports capacity
    assert faults.calls["TransactWriteItems"] == 3


def test_untraced_the_same_like_records_nothing(likes_app: Any, spans: InMemorySpanExporter) -> None:
    tracing.configure(None)
    assert invoke(likes_app, api_event("POST", "/posts", {"postId": "p1", "authorId": "alice", "body": "hello"}))[0] == 201
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[1]["changed"] is True
    assert spans.get_finished_spans() == ()
