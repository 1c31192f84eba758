"""Schedules of the seeded proof that once failed, kept as tests (each runs alone in seconds:
proof/regions/orders.py "Replaying one schedule").

``regions: orders + pointer (MREC, 2 Regions)``, seed 20261127, schedule 202611270026 (issue 28):
VIOLATED, "eu-west-1's pointer 172 after settle, greatest order 178". The table was right (after
settle eu-west-1 held us-east-1's pointer item at 178); the final ``GET /orders/latest`` in
eu-west-1 met four faults in a row and answered 503, the check skipped it and compared the read
from before the heal (172). The check now re-sends that read until answered, as a client does.
"""

from __future__ import annotations

from typing import Any

from proof.regions import orders
from testkit.regions import Mode

SEED, SCHEDULE = 20261127, 202611270026
DRAWS = (4962, 5210, 5820, 0)
"""Where the run's seeded sources stood when schedule 26 began (eu-west-1's faults, us-east-1's
faults, replication delays, MRSC conflicts): words drawn, measured on the full run."""


def test_orders_mrec_schedule_202611270026_holds(dynamodb_endpoint: str) -> None:
    tally = orders.replay(dynamodb_endpoint, Mode.MREC, SEED, SCHEDULE, DRAWS)
    assert tally.schedules == 1 and tally.faults
    assert (tally.duplicates, tally.bad_reads, tally.breaches) == (0, 0, 0), tally.problems


def test_the_settled_pointer_read_is_resent_until_answered_never_an_earlier_read(dynamodb_endpoint: str) -> None:
    """The guard on its own, with no random fault: every fault rule off, then the final read in
    eu-west-1 fails once (503: throttled on every attempt). The check must compare a re-sent answer,
    not the last read from before the heal (nor leave the Region unchecked)."""
    tally = orders.Tally()
    run = orders.Run(dynamodb_endpoint, Mode.MREC, SEED, tally)
    for injector in run.injectors:
        injector.clear()
    eu_west = run.injectors[orders.MREC_REGIONS.index("eu-west-1")]
    before: dict[str, int] = {}
    read_pointers = run.read_pointers

    def fail_the_settled_read_once(seed: int, *, settled: bool = False) -> Any:
        if settled:
            before.update({r.name: r.reads[-1] for r in run.where.values() if r.reads})
            eu_west.add("throttle", operations={"GetItem"}, rate=1.0, limit=orders.RETRY.max_attempts)
        return read_pointers(seed, settled=settled)

    run.read_pointers = fail_the_settled_read_once  # type: ignore[method-assign]
    try:
        run.schedule(SCHEDULE)
    finally:
        run.close()
    assert eu_west.injected["throttle"] == orders.RETRY.max_attempts  # one whole read failed
    assert before["eu-west-1"] < tally.orders  # an earlier read in its place would be a breach
    assert (tally.duplicates, tally.bad_reads, tally.breaches) == (0, 0, 0), tally.problems
    assert [r.reads[-1] for r in run.where.values()] == [tally.orders] * 2


def test_the_gapless_mrec_row_meets_faults_on_seed_678985949(dynamodb_endpoint: str) -> None:
    """``regions: orders gapless (MREC: home Region only)`` on fresh seed 678985949 (60 schedules
    per approach) read UNDERPOWERED: its 6 schedules sent each step to a random Region, placed 4
    orders and met no fault. The row now runs at least ``GAPLESS_MREC_MIN`` schedules of three home
    requests each: the same seed meets the client faults."""
    seed, tally = 678985949, orders.Tally()
    run = orders.GaplessRun(dynamodb_endpoint, Mode.MREC, seed, tally)
    try:
        for n in range(orders.GAPLESS_MREC_MIN):
            run.schedule(seed * 10_000 + n)
    finally:
        run.close()
    report = orders._report("regions: orders gapless (MREC: home Region only)", tally, 0.0)
    assert tally.acknowledged >= 2 * orders.GAPLESS_MREC_MIN and tally.faults, tally
    assert report.verdict == "holds", report.notes
