"""The proof's power floor holds by construction: each fault kind and stream perturbation happens
``MIN_EACH`` times on its first opportunities, whatever the seed (20261126 once came out short)."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import boto3
import pytest

from proof.hot import AGGREGATOR_FAULTS, MIN_EACH, PERTURB, StreamHarness
from testkit.faults import FaultInjector

SEEDS = [20261126, 20261122, *range(300)]
BEFORE, AFTER = ("conflict", "throttle", "unavailable"), ("after_commit", "resend")


def _aggregator_faults(seed: int, calls: int) -> Counter[str]:
    """The harness's rules on a client (never called: the injector's draws, as each call makes them)."""
    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    injector = FaultInjector(client, seed=random.Random(seed + 3).randrange(2**32))
    for kind, rate in AGGREGATOR_FAULTS.items():
        injector.add(kind, rate=rate, operations={"UpdateItem"}, at_least=MIN_EACH)
    for _ in range(calls):
        if injector._draw("UpdateItem", BEFORE) is None:  # sent: then maybe a fault after it
            injector._draw("UpdateItem", AFTER)
    injector.detach()
    return injector.injected


@pytest.mark.parametrize("seed", SEEDS)
def test_every_aggregator_fault_kind_meets_the_floor_on_its_first_opportunities(seed: int) -> None:
    # five kinds, MIN_EACH each: that many calls suffice, whatever the draws
    injected = _aggregator_faults(seed, calls=len(AGGREGATOR_FAULTS) * MIN_EACH)
    assert all(injected[kind] >= MIN_EACH for kind in AGGREGATOR_FAULTS), dict(injected)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_stream_perturbation_is_drawn_until_it_meets_the_floor(seed: int) -> None:
    harness = SimpleNamespace(counts=Counter(), rng=random.Random(seed), perturb=dict(PERTURB))
    for kind in ("duplicate", "late", "restart", "crash", "bisect"):
        for _ in range(MIN_EACH):
            assert StreamHarness._draw(harness, kind)  # type: ignore[arg-type]
            harness.counts[kind] += 1
    for _ in range(MIN_EACH):
        assert StreamHarness._draw(harness, "contention", "reported")  # type: ignore[arg-type]
        harness.counts["reported"] += 1
