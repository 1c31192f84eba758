"""The multi-Region proof over HTTP, every row small: two local APIs over the MREC emulator, then
three over one MRSC store, with faults in every Region and a client that fails over
(proof/http_regions.py; ``make proof`` runs the rows at full size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proof import http_regions
from proof.http import details

# No whole-test time limit: every wait has its own hang guard (a request's answer, each settle's
# SETTLE_SECONDS, reported as a finding), so a loaded machine makes the rows slower, never red.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(0)]


def test_every_http_multi_region_row_holds(tmp_path: Path) -> None:
    reports = http_regions.run(list(http_regions.ROWS), seed=20261127, scale=0.15, log=tmp_path / "functions.log")
    assert {r.name.split(" over HTTP")[0] for r in reports} >= {"likes", "ledgers", "orders + pointer", "reservations atomic"}
    assert all(r.requests for r in reports if "refused" not in r.name), [r.name for r in reports if not r.requests]
    broken = [r for r in reports if r.verdict != "holds"]
    assert not broken, details(broken)
