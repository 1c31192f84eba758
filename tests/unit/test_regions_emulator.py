"""The emulator's pure parts (testkit/regions.py, proof/regions): delays, clock, versions, values,
the schedule helpers. The replication itself is tested on DynamoDB Local:
tests/integration/test_regions_emulator.py."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from proof.regions import REGISTRY, ScheduleReport, Timeline, schedules
from testkit.regions import Delays, SimClock, Version, key_id, to_plain


def test_delays_are_seeded_bounded_and_have_a_tail() -> None:
    """Mostly milliseconds to seconds, a tail up to minutes; the same seed draws the same delays."""
    delays = Delays()
    rng, rng_again = random.Random(1), random.Random(1)
    draws = [delays.draw(rng) for _ in range(5000)]
    assert draws == [delays.draw(rng_again) for _ in range(5000)]
    assert all(delays.low <= d <= delays.tail_max for d in draws)
    body = [d for d in draws if d <= delays.high]
    tail = [d for d in draws if d > delays.high]
    assert 0.01 < len(tail) / len(draws) < 0.06  # ~3 %
    assert max(tail) > 60  # minutes
    assert min(body) < 0.02 and sorted(body)[len(body) // 2] == pytest.approx(delays.median, rel=0.25)


def test_fixed_delays() -> None:
    rng = random.Random(0)
    assert {Delays.fixed(0.7).draw(rng) for _ in range(100)} == {0.7}
    assert Delays.fixed(0.7).duplicate == 0.0


def test_sim_clock_moves_only_forward_and_only_when_told() -> None:
    clock = SimClock(start=100.0)
    assert clock.now() == 100.0
    clock.advance(2.5)
    clock.set(50.0)  # never back
    assert clock.now() == 102.5
    clock.set(110.0)
    assert clock.now() == 110.0
    with pytest.raises(ValueError):
        clock.advance(-1)
    clock.live(True)
    assert clock.now() >= 110.0
    clock.live(False)
    frozen = clock.now()
    assert clock.now() == frozen


def test_versions_order_by_write_time_then_sequence_not_by_region() -> None:
    """Last-writer-wins: the later write time wins; equal times are broken by the emulator's sequence."""
    assert Version(1.0, 9, "b") < Version(2.0, 1, "a")
    assert Version(1.0, 1, "b") < Version(1.0, 2, "a")
    assert Version(1.0, 1, "a") == Version(1.0, 1, "z")  # the same version, wherever it came from


def test_items_come_back_as_plain_values_and_keys_are_canonical() -> None:
    image = {"PK": {"S": "a"}, "n": {"N": "3"}, "f": {"N": "1.5"}, "m": {"M": {"x": {"N": "2"}}}, "s": {"SS": ["b"]}}
    assert to_plain(image) == {"PK": "a", "n": 3, "f": 1.5, "m": {"x": 2}, "s": {"b"}}
    assert isinstance(to_plain({"n": {"N": "3"}})["n"], int) and not isinstance(to_plain({"n": {"N": "3"}})["n"], Decimal)
    assert key_id({"SK": {"S": "1"}, "PK": {"S": "2"}}) == key_id({"PK": {"S": "2"}, "SK": {"S": "1"}})


def test_each_schedule_has_its_own_seeded_random() -> None:
    first = [s.rng.random() for s in schedules(7, 5)]
    assert first == [s.rng.random() for s in schedules(7, 5)]
    assert len(set(first)) == 5
    assert [s.rng.random() for s in schedules(8, 5)] != first
    times = next(iter(schedules(1, 1))).times(10, 0.1)
    assert times == sorted(times) and all(0 <= t < 0.1 for t in times)


class FakeTable:
    def __init__(self) -> None:
        self.clock = SimClock(start=0.0)
        self.pumps = 0

    def advance(self, seconds: float) -> None:
        self.pump()
        self.clock.advance(seconds)

    def pump(self) -> None:
        self.pumps += 1


def test_timeline_runs_steps_in_time_order_at_their_time() -> None:
    gt: Any = FakeTable()
    seen: list[tuple[str, float]] = []
    timeline = Timeline(gt)
    for name, t in (("c", 3.0), ("a", 1.0), ("b", 1.0), ("d", 0.0)):
        timeline.at(t, lambda name=name: seen.append((name, gt.clock.now())))
    timeline.run()
    assert seen == [("d", 0.0), ("a", 1.0), ("b", 1.0), ("c", 3.0)]
    assert gt.pumps == 5  # before each step (the previous step's writes) and after the last


def test_a_schedule_report_holds_only_at_its_threshold() -> None:
    def row(hits: int, schedules: int) -> ScheduleReport:
        return ScheduleReport("r", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "loses", schedules=schedules, hits=hits, threshold=0.95)

    assert row(95, 100).verdict == "holds"
    assert row(94, 100).verdict == "VIOLATED"
    assert row(0, 0).verdict == "UNDERPOWERED"


def test_the_plain_add_hazard_is_registered() -> None:
    assert "add" in REGISTRY
