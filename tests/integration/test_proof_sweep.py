"""The CI sweep of the multi-Region proof: a few seeded schedules of every approach on a seed of
this commit's own, so each commit's CI runs schedules no earlier commit ran (``make proof`` runs
the default seed at full count plus fresh seeds from the commit and the date).

A failure names the seed and the one command that replays it. Only a VIOLATED row fails the
sweep: with a dozen schedules a row may miss a perturbation it counts (UNDERPOWERED), which the
full ``make proof`` run is there to exercise. The baselines (``proof.regions.BASELINES``: plain
ADD, whose row is a share of schedules that must lose updates) are left to ``make proof``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from proof import regions

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SWEEP_SCHEDULES = int(os.environ.get("TALLY_SWEEP_SCHEDULES", "12"))
"""Schedules per approach in CI (about 30 s of wall time in all on a quiet 2-core machine)."""


def sweep_seed() -> int:
    """This commit's seed (``TALLY_SWEEP_SEED`` overrides it, to replay another one)."""
    if "TALLY_SWEEP_SEED" in os.environ:
        return int(os.environ["TALLY_SWEEP_SEED"])
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip() or "no-git"
    return regions.fresh_seeds(1, commit=commit, date="ci-sweep")[0]


@pytest.mark.parametrize("name", [n for n in regions.REGISTRY if n not in regions.BASELINES])
def test_the_multi_region_proof_holds_on_this_commits_seed(dynamodb_endpoint: str, name: str) -> None:
    seed = sweep_seed()
    rows = regions.run([name], dynamodb_endpoint, seed, SWEEP_SCHEDULES)
    print(f"sweep {name}: seed {seed}, {SWEEP_SCHEDULES} schedules: " + "; ".join(f"{r.name} {r.verdict}" for r in rows))
    broken = [r for r in rows if r.verdict == "VIOLATED"]
    assert not broken, (
        f"seed {seed} breaks {', '.join(r.name for r in broken)}: "
        + " | ".join("; ".join(r.notes[:5]) for r in broken)
        + f"\nreplay: {regions.replay_command(seed, [name], SWEEP_SCHEDULES)}"
    )
