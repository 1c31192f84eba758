"""Ledger pieces that need no DynamoDB: keys, windows, chunk shape, the read rule, regions."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from counters.core.errors import IdempotencyKeyExpired, InvalidRequest
from counters.primitives.ledger import ENTRY_PREFIX, MAX_TX_ACTIONS, SNAPSHOT, Ledger, new_key, parse_key
from counters.store.ledger import Checkpoint, Entry

NOW = 1_800_000_000.0


class FakeClient:
    """Answers Query with canned pages; records what it was asked."""

    def __init__(self, pages: list[list[dict[str, Any]]] | None = None, region: str = "us-east-1") -> None:
        self.pages = pages or []
        self.calls: list[dict[str, Any]] = []
        self.meta = type("Meta", (), {"region_name": region})()

    def query(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        index = len(self.calls) - 1
        page: dict[str, Any] = {"Items": self.pages[index], "ConsumedCapacity": {"CapacityUnits": 1.0}}
        if index + 1 < len(self.pages):
            page["LastEvaluatedKey"] = {"PK": {"S": "x"}, "SK": {"S": self.pages[index][-1]["SK"]["S"]}}
        return page


def entry(ms: int, amount: int) -> dict[str, Any]:
    return {"SK": {"S": f"{ENTRY_PREFIX}{ms:013d}-K"}, "amount": {"N": str(amount)}}


def snapshot(balance: int, through_ms: int, version: int = 1) -> dict[str, Any]:
    return {
        "SK": {"S": SNAPSHOT},
        "balance": {"N": str(balance)},
        "mergedThrough": {"S": f"{ENTRY_PREFIX}{through_ms:013d}-K"},
        "version": {"N": str(version)},
    }


def test_keys_carry_their_time_and_normalise() -> None:
    key = new_key(NOW)
    parsed = parse_key(key.lower())
    assert parsed.key == key and parsed.at_ms == int(NOW * 1000)
    assert parsed.sk == f"ENTRY#{int(NOW * 1000):013d}-{key}"
    assert new_key(NOW) != key and new_key(NOW + 0.001) > key  # unique, and time-ordered
    hex_ms = f"{int(NOW * 1000):012x}"
    v7 = f"{hex_ms[:8]}-{hex_ms[8:]}-7{uuid.uuid4().hex[:3]}-9{uuid.uuid4().hex[:3]}-{uuid.uuid4().hex[:12]}"
    assert parse_key(v7.upper()).at_ms == int(NOW * 1000) and parse_key(v7.upper()).key == v7
    for bad in (None, "", str(uuid.uuid4()), "8" + key[1:], key + "0", "01MCC5RM0028T5CY4GNF6YY4HI"):
        with pytest.raises(InvalidRequest):
            parse_key(bad)


def test_retry_window_and_future_skew() -> None:
    ledger = Ledger("t", dynamodb=FakeClient(), retry_window=600, margin=900, clock=lambda: NOW)
    ledger.check_fresh(parse_key(new_key(NOW - 599)))
    ledger.check_fresh(parse_key(new_key(NOW + 59)))
    with pytest.raises(IdempotencyKeyExpired):
        ledger.check_fresh(parse_key(new_key(NOW - 601)))
    with pytest.raises(InvalidRequest):
        ledger.check_fresh(parse_key(new_key(NOW + 61)))
    assert ledger.cutoff_ms() == int((NOW - 1500) * 1000)


def resolved(request: dict[str, Any], part: str) -> str:
    """A request's expression with its name and value placeholders put back (values as JSON)."""
    text = request[part]
    values = request.get("ExpressionAttributeValues", {})
    for placeholder in sorted([*request.get("ExpressionAttributeNames", {}), *values], key=len, reverse=True):
        real = request["ExpressionAttributeNames"].get(placeholder) if placeholder.startswith("#") else None
        text = text.replace(placeholder, real if real is not None else json.dumps(values[placeholder], sort_keys=True))
    return text


def test_a_chunk_fits_one_transaction_with_guarded_actions() -> None:
    ledger = Ledger("t", dynamodb=FakeClient(), clock=lambda: NOW)
    entries = [Entry(f"{ENTRY_PREFIX}{i:013d}-K", i + 1) for i in range(99)]
    first = ledger.store.chunk("l", None, entries, int(NOW * 1000)).items()
    assert len(first) == MAX_TX_ACTIONS
    update = first[0]["Update"]
    assert resolved(update, "ConditionExpression") == "attribute_not_exists(PK)"
    assert f'balance = {{"N": "{sum(range(1, 100))}"}}' in resolved(update, "UpdateExpression")
    assert f'mergedThrough = {{"S": "{entries[-1].sk}"}}' in resolved(update, "UpdateExpression")
    assert all(resolved(a["Delete"], "ConditionExpression") == "attribute_exists(SK)" for a in first[1:])
    later = ledger.store.chunk("l", Checkpoint(balance=10, version=4, merged_entries=7), entries[:2], int(NOW * 1000)).items()
    condition, expression = resolved(later[0]["Update"], "ConditionExpression"), resolved(later[0]["Update"], "UpdateExpression")
    assert condition == 'version = {"N": "4"}'
    for assignment in ('version = {"N": "5"}', 'balance = {"N": "13"}', 'mergedEntries = {"N": "9"}'):
        assert assignment in expression
    with pytest.raises(ValueError):
        ledger.compact("l", chunk_size=100)


def test_balance_ignores_entries_the_checkpoint_read_last_already_merged() -> None:
    """Page 1 was read before a compaction merged 1..3; page 2 after it (1..3 deleted)."""
    pages = [[entry(1, 1), entry(2, 2)], [entry(4, 8), snapshot(balance=7, through_ms=3)]]
    fake = FakeClient(pages)
    read = Ledger("t", dynamodb=fake).balance("l", page_size=2)
    assert (read.balance, read.pending_entries, read.ignored_entries) == (15, 1, 2)
    assert read.capacity.calls == 2 and fake.calls[0]["ConsistentRead"] is True
    assert {"S": SNAPSHOT} in fake.calls[0]["ExpressionAttributeValues"].values()
