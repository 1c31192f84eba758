"""The committed sample events are what scripts/gen_events.py produces (`make events`), except
the ledger append's Idempotency-Key, which is minted when generated (keys expire)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from datetime import UTC
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
    from counters.services.likes.model import SPREAD
    from counters.store.post_items import lane_of
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


# ---------------------------------------------------------------------- stamped when invoked
def _sqs_events() -> list[str]:
    return sorted(str(p.relative_to(ROOT / "events")) for p in (ROOT / "events").rglob("*.json") if '"md5OfBody"' in p.read_text())


@pytest.mark.parametrize("name", _sqs_events())
def test_every_sqs_events_md5_is_its_bodys(name: str) -> None:
    import hashlib

    for record in _event(name)["Records"]:
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode(), usedforsecurity=False).hexdigest(), name


def _ms(day: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)


def _fresh_at(name: str, event: dict[str, Any], now_ms: int) -> bool:
    """Whether ``event`` still does what `make invoke-events` expects of it at ``now_ms``, by the
    layer's own rules: a ledger key inside the retry window; a queued command whose operation
    record has not expired (DynamoDB Local enforces the TTL) and whose like is inside the replay
    horizon; hot likes not in the future and their tombstones not expired."""
    import hashlib

    from counters.core.commands import Command
    from counters.core.errors import CounterError
    from counters.deferral.operations import OPERATION_TTL_SECONDS
    from counters.primitives.ledger import Ledger
    from counters.primitives.toggle import HORIZON_MS

    if name == gen_events.LEDGER_APPEND:
        try:
            Ledger("t", dynamodb=object(), clock=lambda: now_ms / 1000).check_fresh(parse_key(event["headers"]["Idempotency-Key"]))
        except CounterError:
            return False
        return event["multiValueHeaders"]["Idempotency-Key"] == [event["headers"]["Idempotency-Key"]]
    if name.startswith("retry_worker/"):
        for record in event["Records"]:
            assert record["md5OfBody"] == hashlib.md5(record["body"].encode(), usedforsecurity=False).hexdigest()
            command = Command.from_message(record["body"])
            if command.created_at + OPERATION_TTL_SECONDS <= now_ms // 1000 or command.created_at > now_ms // 1000:
                return False
            at = command.payload.get("at")
            if at is not None and not (now_ms - HORIZON_MS < at <= now_ms):
                return False
        return True
    changes = [r["dynamodb"] for r in event["Records"]]
    return all(now_ms // 1000 - 60 <= c["ApproximateCreationDateTime"] <= now_ms // 1000 for c in changes) and all(
        int(c["NewImage"]["expiresAt"]["N"]) > now_ms // 1000 for c in changes if "expiresAt" in c["NewImage"]
    )


TODAY, TWO_WEEKS_ON = _ms("2026-11-25T14:30:00"), _ms("2026-12-09T14:30:00")


@pytest.mark.parametrize("name", gen_events.STAMPED)
def test_events_stamped_when_invoked_are_fresh_two_weeks_on(name: str) -> None:
    """`make invoke-events` stamps these events when it invokes them; the committed files carry
    fixed times (1795370000: 2026-11-22), which expire. A fake clock two weeks after this run:
    the committed event is stale there, the stamped one fresh, and only its times changed."""
    committed = _event(name)
    assert not _fresh_at(name, committed, TWO_WEEKS_ON)  # what broke on 29 Nov 2026 (the operation TTL) and later
    for now in (TODAY, TWO_WEEKS_ON):
        event = gen_events.stamped(name, committed, now)
        assert _fresh_at(name, event, now), (name, now)
    assert _event(name) == committed  # the committed file is not touched


def test_stamping_keeps_what_the_events_say() -> None:
    """Only times move: the same commands, the same hot like changes in the same order and spacing."""
    from counters.core.commands import Command
    from counters.streams import hot_change

    for name in ("retry_worker/replay_like.json", "retry_worker/poison.json"):
        before, after = _event(name), gen_events.stamped(name, _event(name), TWO_WEEKS_ON)
        for old, new in zip(before["Records"], after["Records"], strict=True):
            a, b = Command.from_message(old["body"]), Command.from_message(new["body"])
            assert (a.op, a.operation_id, {k: v for k, v in a.payload.items() if k != "at"}) == (
                b.op,
                b.operation_id,
                {k: v for k, v in b.payload.items() if k != "at"},
            )
            assert old["messageId"] == new["messageId"]
    before = _event("like_aggregator/hot_likes.json")["Records"]
    after = gen_events.stamped("like_aggregator/hot_likes.json", {"Records": before}, TWO_WEEKS_ON)["Records"]
    assert [(c.parent, c.lane, c.delta) for c in map(hot_change, before) if c] == [
        (c.parent, c.lane, c.delta) for c in map(hot_change, after) if c
    ]

    def spacing(records: list[dict[str, Any]]) -> list[int]:
        return [
            int(r["dynamodb"]["NewImage"]["changedAt"]["N"]) - int(records[0]["dynamodb"]["NewImage"]["changedAt"]["N"]) for r in records
        ]

    assert spacing(before) == spacing(after)
