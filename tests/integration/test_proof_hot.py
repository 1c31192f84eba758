"""The hot-post proof scenarios (proof/hot.py), small, and what they catch: a storm on hot posts
with the aggregator fed a perturbed stream, and the latest-wins order scenario in both modes,
hold; an aggregator without its checkpoint condition and a toggle without its staleness guard
are caught."""

from __future__ import annotations

import re
from typing import Any

import pytest

from counters.store import toggles
from counters.store.expr import Path
from proof import hot
from proof.scenarios import KIT
from tests.integration.test_hot_likes import without_the_checkpoint_condition

pytestmark = pytest.mark.xdist_group("proof-hot")


@pytest.fixture
def kit(dynamodb_endpoint: str, layer_client: Any) -> hot.Kit:
    return KIT


def test_hot_storm_under_a_perturbed_stream_is_exact(ddb: Any, kit: hot.Kit) -> None:
    (report,) = hot.likes_hot_scenario(ddb, 3, 8, 90, kit=kit)
    summary = "\n".join(report.notes)
    assert (report.over, report.under, report.duplicates, report.breaches, report.bad_reads) == (0, 0, 0, 0, 0), summary
    assert report.final > 0 and report.operations > 60, summary
    assert "deliveries" in summary and "crash" in summary and "late" in summary, summary


def test_latest_wins_scenario_predicts_every_answer(ddb: Any, kit: hot.Kit) -> None:
    reports = hot.likes_order_scenario(ddb, 4, 8, 45, kit=kit)
    assert [r.name.split("(")[1].split(";")[0] for r in reports] == ["standard", "hot"]
    for report in reports:
        summary = "\n".join(report.notes)
        assert (report.over, report.under, report.duplicates, report.breaches, report.bad_reads) == (0, 0, 0, 0, 0), summary
        assert "answered stale, as predicted" in summary and " 0 answered stale" not in summary, summary


def test_a_spread_grown_mid_storm_is_exact(ddb: Any, kit: hot.Kit) -> None:
    """ "spread grows mid-storm": growths, mode switches and a writer with a stale view of the spread
    under the proof's faults and a perturbed stream; the stale writer's second items are merged."""
    (report,) = hot.likes_grow_scenario(ddb, 5, 8, 60, kit=kit)
    summary = "\n".join(report.notes)
    assert (report.over, report.under, report.duplicates, report.breaches, report.bad_reads) == (0, 0, 0, 0, 0), summary
    assert report.verdict == "holds", summary
    assert "spreads at the end: {'g1': 128, 'g2': 128}" in summary, summary
    counted_on = re.search(r"lane groups' items \(tallyRev of G1..\): \{'g1': \[(\d+)\], 'g2': \[(\d+)\]\}", summary)
    assert counted_on and all(int(n) > 0 for n in counted_on.groups()), summary  # lanes past 64 were counted on G1


def test_an_aggregator_without_its_checkpoint_condition_is_caught(ddb: Any, kit: hot.Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    without_the_checkpoint_condition(monkeypatch)
    (report,) = hot.likes_hot_scenario(ddb, 3, 8, 60, kit=kit)
    assert report.verdict == "VIOLATED" and report.bad_reads > 0 and report.over > 0


def test_a_toggle_without_its_staleness_guard_is_caught(ddb: Any, kit: hot.Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toggles, "stored_is_older", lambda stamp: Path("changedAt").missing() | Path("changedAt").exists())
    for report in hot.likes_order_scenario(ddb, 4, 8, 30, kit=kit):
        assert report.verdict == "VIOLATED" and report.breaches > 0
