"""The emulator enforces every item family's writer rule (counters.store.writers, issue 25 item 2):
a local write against its family's rule, or to a key no family declares, fails the run at the next
pump (testkit.regions.WriterCheck); docs/regions.md "Who writes what"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import counters.store.post_items as post_items
from counters.store.tables import Table
from testkit.regions import Delays, GlobalTable, Mode, WriterRuleViolation

A, B, C = "eu-west-1", "us-east-1", "us-west-2"
TALLY = "like tally of a Region"


@pytest.fixture
def make(dynamodb_endpoint: str) -> Iterator[Any]:
    made: list[GlobalTable] = []

    def build(mode: Mode = Mode.MREC) -> GlobalTable:
        regions = (A, B, C) if mode is Mode.MRSC else (A, B)
        gt = GlobalTable(dynamodb_endpoint, f"tally-wr-{uuid.uuid4().hex[:8]}", regions, mode, 3, Delays.fixed(0.5)).create()
        made.append(gt)
        return gt

    yield build
    for gt in made:
        gt.delete()


def put(gt: GlobalTable, region: str, pk: str, sk: str, tally: int = 1) -> None:
    gt.client(region).put_item(TableName=gt.table_name, Item={"PK": {"S": pk}, "SK": {"S": sk}, "likeTally": {"N": str(tally)}})


def test_a_region_writing_another_regions_tally_fails_the_run(make: Any) -> None:
    gt = make()
    put(gt, A, "POST#p1", f"TALLY#{A}")
    gt.pump()  # its own Region: allowed
    gt.advance(2.0)  # replicated to B: not a local write there
    put(gt, B, "POST#p1", f"TALLY#{A}", 2)  # a change (an unchanged put makes no stream record)
    with pytest.raises(WriterRuleViolation, match=f"us-east-1 wrote {TALLY}.*a per-Region item of eu-west-1"):
        gt.pump()
    assert gt.writers is not None and len(gt.writers.violations) == 1


def test_the_same_write_fails_as_undeclared_once_the_familys_rule_is_removed(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = tuple(w for w in post_items.WRITERS if w.item != TALLY)
    monkeypatch.setattr(post_items, "TABLE", Table("post_items", shapes, {}))
    gt = make()
    put(gt, A, "POST#p1", f"TALLY#{A}")  # even by its own Region: no family declares the key
    with pytest.raises(WriterRuleViolation, match="no item family declares"):
        gt.pump()


def test_an_undeclared_family_fails_the_run(make: Any) -> None:
    gt = make()
    put(gt, A, "WIDGET#1", "META")
    with pytest.raises(WriterRuleViolation, match="PK='WIDGET#1'.*no item family declares"):
        gt.settle()


def test_mrsc_checks_each_write_a_region_sends(make: Any) -> None:
    gt = make(Mode.MRSC)
    put(gt, B, "POST#p1", f"TALLY#{B}")
    gt.pump()
    put(gt, C, "LEDGER#l1", f"SNAPSHOT#{C}")  # a per-Region checkpoint: MREC's layout, refused on MRSC
    with pytest.raises(WriterRuleViolation, match="refused on MRSC"):
        gt.pump()


def test_a_table_without_layer_items_can_turn_the_check_off(dynamodb_endpoint: str) -> None:
    gt = GlobalTable(dynamodb_endpoint, f"tally-wr-{uuid.uuid4().hex[:8]}", (A, B), Mode.MREC, 3, Delays.fixed(0.5), writers=False).create()
    try:
        put(gt, A, "WIDGET#1", "META")
        put(gt, B, "WIDGET#1", "META")
        gt.settle()
        assert gt.writers is None
    finally:
        gt.delete()
