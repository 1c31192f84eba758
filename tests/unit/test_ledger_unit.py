"""Ledger pieces that need no DynamoDB: keys, windows, chunk shape, the read rule, regions."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from counters.core.errors import IdempotencyKeyExpired, InvalidRequest
from counters.core.policy import IN_ORDER, RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.ledger import ENTRY_PREFIX, MAX_TX_ACTIONS, SNAPSHOT, Ledger, new_key, parse_key
from counters.store.ledger_items import Checkpoint, Entry, entry_id_of, entry_writer, snapshot_writer

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


MREC = RegionPolicy.of(Topology(GlobalTableMode.MREC, "us-east-1", ("eu-west-1", "us-east-1")))


def region_entry(ms: int, amount: int, region: str, key: str = "K") -> dict[str, Any]:
    return {"SK": {"S": f"{ENTRY_PREFIX}{ms:013d}-{key}#{region}"}, "amount": {"N": str(amount)}}


def region_snapshot(region: str, balance: int, through_ms: int, version: int = 1) -> dict[str, Any]:
    item = snapshot(balance, through_ms, version)
    item["SK"] = {"S": f"{SNAPSHOT}#{region}"}
    item["mergedThrough"] = {"S": f"{ENTRY_PREFIX}{through_ms:013d}-K#{region}"}
    return item


def test_keys_name_their_region_only_on_an_mrec_table() -> None:
    key = parse_key(new_key(NOW))
    assert key.sk_in("") == key.sk and key.withdrawn_sk("r") == f"WITHDRAWN#{key.entry_id}#r"  # single-Region: unchanged
    assert key.sk_in("eu-west-1") == f"{key.sk}#eu-west-1" and key.withdrawn_sk("r", "eu-west-1") == f"WITHDRAWN#{key.entry_id}#eu-west-1#r"
    assert (entry_writer(key.sk_in("eu-west-1")), entry_id_of(key.sk_in("eu-west-1"))) == ("eu-west-1", key.entry_id)
    assert (snapshot_writer(SNAPSHOT), snapshot_writer(f"{SNAPSHOT}#us-east-1"), snapshot_writer("WITHDRAWN#x")) == ("", "us-east-1", None)
    assert Ledger("t", dynamodb=FakeClient()).writer == ""
    assert Ledger("t", dynamodb=FakeClient(), policy=MREC).writer == "us-east-1"
    mrsc = Ledger("t", dynamodb=FakeClient(), policy=RegionPolicy.of(Topology(GlobalTableMode.MRSC, "a", ("a", "b", "c"))))
    assert (mrsc.writer, mrsc.store.writes) == ("", IN_ORDER)  # MRSC: one layout, no transactions


def test_an_mrec_balance_compares_each_entry_with_its_own_regions_checkpoint() -> None:
    """eu-west-1 merged through ms 3; us-east-1 through ms 2. The eu entry at ms 3 is merged (ignored), the
    us entry at ms 3 is pending; a key pending in both Regions (ms 4, "D") is counted in each and reported."""
    pages = [
        [region_entry(1, 1, "us-east-1"), region_entry(3, 10, "eu-west-1"), region_entry(3, 20, "us-east-1")],
        [region_entry(4, 5, "eu-west-1", "D"), region_entry(4, 5, "us-east-1", "D"), region_entry(6, 100, "eu-west-1")],
        [region_snapshot("eu-west-1", 1000, 3, 3), region_snapshot("us-east-1", 50, 2, 2)],
    ]
    fake = FakeClient(pages)
    read = Ledger("t", dynamodb=fake, policy=MREC).balance("l", page_size=3)
    assert (read.balance, read.pending_entries, read.ignored_entries) == (1000 + 50 + 20 + 5 + 5 + 100, 4, 2)
    assert read.duplicate_keys == ["0000000000004-D"] and read.versions == 5
    assert read.checkpoint is not None and read.checkpoint["balance"] == 50  # this Region's
    assert read.checkpoints is not None and sorted(read.checkpoints) == ["eu-west-1", "us-east-1"]
    assert {"S": "SNAPSHOT#~"} in fake.calls[0]["ExpressionAttributeValues"].values()
