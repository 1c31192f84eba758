"""The committed sample events are what scripts/gen_events.py produces (`make events`), except
the ledger append's Idempotency-Key, which is minted when generated (keys expire)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from counters.primitives.ledger import parse_key
from devstack.template import ROOT

_spec = importlib.util.spec_from_file_location("gen_events", ROOT / "scripts" / "gen_events.py")
assert _spec and _spec.loader
gen_events: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_events)


def _event(name: str) -> dict[str, Any]:
    return json.loads((ROOT / "events" / name).read_text())


@pytest.mark.parametrize("entry", gen_events.EVENTS, ids=[e[0] for e in gen_events.EVENTS])
def test_committed_api_event_is_the_generated_request(entry: tuple[Any, ...]) -> None:
    name, method, path, resource, params, query, body, headers = entry
    event = _event(name)
    assert (event["httpMethod"], event["path"], event["resource"]) == (method, path, resource)
    assert event["requestContext"]["resourcePath"] == resource and event["requestContext"]["path"] == f"/dev{path}"
    assert event["pathParameters"] == params and event["queryStringParameters"] == query
    assert (json.loads(event["body"]) if event["body"] is not None else None) == body
    for key, value in headers.items():
        if value == gen_events.LEDGER_KEY:
            parse_key(event["headers"][key])  # a ULID/UUIDv7 (its age is the invoker's business: make ledger-key)
        else:
            assert event["headers"][key] == value, (name, key)
        assert event["multiValueHeaders"][key] == [event["headers"][key]]


def test_only_the_ledger_append_carries_a_minted_key() -> None:
    minted = [e[0] for e in gen_events.EVENTS if gen_events.LEDGER_KEY in e[7].values()]
    assert minted == [gen_events.LEDGER_APPEND]


@pytest.mark.parametrize("entry", gen_events.COGNITO_EVENTS, ids=[e[1] for e in gen_events.COGNITO_EVENTS])
def test_committed_cognito_event_is_its_source_plus_claims(entry: tuple[str, str, dict[str, str]]) -> None:
    source, name, claims = entry
    event, base = _event(name), _event(source)
    assert event["requestContext"].pop("authorizer") == {"claims": claims}
    assert event == base


@pytest.mark.parametrize("entry", gen_events.SQS_EVENTS, ids=[e[0] for e in gen_events.SQS_EVENTS])
def test_committed_sqs_event_carries_the_generated_commands(entry: tuple[str, list[tuple[str, dict[str, Any]]]]) -> None:
    name, messages = entry
    records = _event(name)["Records"]
    assert [(r["messageId"], json.loads(r["body"])) for r in records] == messages


def test_ledger_key_only_mints_a_key_for_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "events", tmp_path / "events")
    monkeypatch.setattr(gen_events, "ROOT", tmp_path)
    before = time.time()
    key = gen_events.fresh_ledger_key()
    event = json.loads((tmp_path / "events" / gen_events.LEDGER_APPEND).read_text())
    assert event["headers"]["Idempotency-Key"] == key and event["multiValueHeaders"]["Idempotency-Key"] == [key]
    assert before - 1 <= parse_key(key).at_ms / 1000 <= time.time() + 1
    event["headers"].pop("Idempotency-Key")
    original = _event(gen_events.LEDGER_APPEND)
    original["headers"].pop("Idempotency-Key")
    event["multiValueHeaders"].pop("Idempotency-Key")
    original["multiValueHeaders"].pop("Idempotency-Key")
    assert event == original  # nothing else changed


def test_committed_aggregator_event_carries_the_generated_hot_likes() -> None:
    """events/like_aggregator/hot_likes.json: every record passes the template's stream filter and
    reads as the hot like change gen_events describes (post, spread key, delta), in order."""
    from counters.services.likes import SPREAD, lane_of
    from counters.streams import hot_change
    from devstack.streams import matches, subscriptions

    patterns = next(s for s in subscriptions() if s.function == "LikeAggregatorFunction").filters
    records = _event("like_aggregator/hot_likes.json")["Records"]
    assert all(any(matches(pattern, r) for pattern in patterns) for r in records)  # Lambda ORs the filters
    changes = [hot_change(r) for r in records]
    want = [(gen_events.HOT_POST, f"S{lane_of(user, SPREAD)}", delta) for _, user, _, delta in gen_events.HOT_LIKES]
    assert [(c.parent, c.lane, c.delta) for c in changes if c is not None] == want
    assert [r["eventName"] for r in records] == [name for name, *_ in gen_events.HOT_LIKES]
    assert [int(r["dynamodb"]["SequenceNumber"]) for r in records] == sorted(int(r["dynamodb"]["SequenceNumber"]) for r in records)
