"""The Regions bench (bench/regions.py) on DynamoDB Local through the emulator: its convergence
samples and its measured write units are what the emulator did, not an artefact of the bench."""

from __future__ import annotations

import pytest

import bench  # noqa: F401 - puts the repository and the layer on sys.path
from bench import regions
from counters.core.regions import GlobalTableMode


def test_per_region_counter_converges_exact_and_plain_add_loses_updates(dynamodb_endpoint: str) -> None:
    counter, hazard = regions.SUBJECTS[0], regions.SUBJECTS[2]
    summaries = regions.convergence(dynamodb_endpoint, seeds=3, writes=8, partition_seconds=60.0, subjects=[counter, hazard])
    by_name = {s.subject: s for s in summaries}
    kept = by_name[counter.name]
    assert (kept.exact, kept.samples) == (3, 3)
    assert kept.sim is not None and kept.sim[0] >= 0.99 * regions.MIN_STEP  # held writes: not exact at the heal itself
    lost = by_name[hazard.name]
    assert lost.exact < lost.samples and lost.lost[1] >= 1


def test_write_units_count_every_replicated_write_and_mrsc_refuses_transactions(dynamodb_endpoint: str) -> None:
    ops = [op for op in regions.OPERATIONS if op.name in ("reservation (atomic)", "reservation (crt)")]
    rows = {(r.operation, r.mode): r for r in regions.wcu(dynamodb_endpoint, samples=3, operations=ops)}
    atomic = rows["reservation (atomic)", GlobalTableMode.MREC].measured
    # one UpdateItem of one small item per reservation: 1 unit here, and 1 replicated write in the
    # other Region per reservation (not one per batch of versions of the same item)
    assert atomic.local == pytest.approx(1.0)
    assert atomic.replicated == pytest.approx(1.0)
    assert regions.total(rows["reservation (atomic)", GlobalTableMode.MREC]) == pytest.approx(2.0)
    assert rows["reservation (atomic)", GlobalTableMode.NONE].measured.local == pytest.approx(1.0)
    assert rows["reservation (atomic)", GlobalTableMode.MRSC].measured.local == pytest.approx(1.0)
    assert rows["reservation (crt)", GlobalTableMode.MRSC].measured.refused == "refused (no transactions on MRSC)"
    assert rows["reservation (crt)", GlobalTableMode.MRSC].model is None
