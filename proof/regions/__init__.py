"""Multi-Region proof scenarios: seeded schedules over the local global table (testkit/regions.py).

Each approach registers ``scenarios(endpoint, seed, schedules) -> list[Report]`` in :data:`REGISTRY`
(one Report row per (approach, mode)); ``make proof`` runs them (``--regions``, ``--schedules``)
after the in-process scenarios. The helpers here keep every approach's runs alike:

* :func:`global_table`: a fresh table in every Region (per run; schedules use fresh ids on it);
* :func:`region_faults`: the proof's client faults (:data:`proof.scenarios.FAULT_RATES`) on each
  Region's client, as :func:`proof.scenarios.with_faults` puts them on the layer's client;
* :func:`schedules`: one independent seeded ``random.Random`` per schedule (a schedule's draws do
  not depend on how many draws the previous ones made);
* :class:`Timeline`: runs timed steps in simulated time, pumping the replicator after each step;
* :class:`ScheduleReport`: a row whose verdict is a share of schedules (a hazard that must show).
"""

from __future__ import annotations

import hashlib
import random
import shlex
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from proof.checker import Report
from testkit.faults import FaultInjector
from testkit.regions import Conflicts, Delays, GlobalTable, Mode, WriterRuleViolation

Scenario = Callable[[str, int, int], list[Report]]
"""``(endpoint, seed, schedules) -> rows``: one approach's multi-Region scenarios."""

SCHEDULES = 200
"""Schedules per approach by default (``--schedules``)."""
MREC_REGIONS = ("eu-west-1", "us-east-1")
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
WRITES = {"TransactWriteItems", "UpdateItem", "PutItem", "DeleteItem"}


def global_table(
    endpoint: str,
    seed: int,
    mode: Mode = Mode.MREC,
    *,
    regions: tuple[str, ...] | None = None,
    delays: Delays | None = None,
    conflicts: Conflicts | None = None,
    prefix: str = "proof-gt",
    writers: bool = True,
) -> GlobalTable:
    """A new global table (fresh name) in every Region of ``mode`` (MREC: 2 Regions, MRSC: 3).
    ``track_writes`` is on: every write of a schedule must go through ``gt.client(region)`` (or
    ``gt.layer(region)``), or pump sees it late."""
    regions = regions or (MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS)
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    return GlobalTable(endpoint, name, regions, mode, seed, delays, conflicts=conflicts, track_writes=True, writers=writers).create()


def region_faults(gt: GlobalTable, seed: int, exclude: frozenset[str] = frozenset()) -> dict[str, FaultInjector]:
    """The proof's client faults on every Region's client (replication itself is never faulted:
    it uses the emulator's own clients)."""
    from proof.scenarios import CONFLICTING, FAULT_RATES

    injectors = {}
    for index, region in enumerate(gt.regions):
        injector = FaultInjector(gt.client(region), seed=seed * 31 + index)
        for kind, rate in FAULT_RATES.items():
            if kind not in exclude:
                injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)
        injectors[region] = injector
    return injectors


def detach(injectors: dict[str, FaultInjector]) -> int:
    """Detach every injector; returns how many faults they injected in all."""
    for injector in injectors.values():
        injector.detach()
    return sum(sum(i.injected.values()) for i in injectors.values())


@dataclass
class Schedule:
    index: int
    rng: random.Random

    def times(self, count: int, window: float) -> list[float]:
        """``count`` sorted instants in [0, ``window``) of simulated time."""
        return sorted(self.rng.uniform(0, window) for _ in range(count))


def schedules(seed: int, count: int) -> Iterator[Schedule]:
    for index in range(count):
        yield Schedule(index, random.Random(f"{seed}:{index}"))


class Timeline:
    """Timed steps in simulated time: ``at(t, step)`` then ``run()`` executes them in time order
    (ties in insertion order), advancing the global table's clock (and so delivering what is due)
    between steps and pumping its streams right after each step."""

    def __init__(self, gt: GlobalTable) -> None:
        self.gt = gt
        self.steps: list[tuple[float, int, Callable[[], None]]] = []

    def at(self, t: float, step: Callable[[], None]) -> Timeline:
        self.steps.append((t, len(self.steps), step))
        return self

    def run(self) -> None:
        start = self.gt.clock.now()
        for t, _, step in sorted(self.steps, key=lambda s: (s[0], s[1])):
            self.gt.advance(max(0.0, start + t - self.gt.clock.now()))
            step()
        self.gt.pump()


@dataclass
class ScheduleReport(Report):
    """A row about schedules: ``hits`` of ``schedules`` showed the documented behaviour (e.g.
    lost updates); the verdict holds when their share reaches ``threshold``."""

    schedules: int = 0
    hits: int = 0
    threshold: float = 0.95
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def share(self) -> float:
        return self.hits / self.schedules if self.schedules else 0.0

    @property
    def verdict(self) -> str:
        if not self.schedules:
            return "UNDERPOWERED"
        return "holds" if self.share >= self.threshold else "VIOLATED"


def writer_rule_row(name: str, exc: WriterRuleViolation) -> Report:
    """The VIOLATED row of an approach whose run wrote an item against its family's writer rule
    (or a key no family declares: ``counters.store.writers``); the run stopped there."""
    return Report(
        f"{name}: every write by the Region its family's writer rule allows",
        operations=0,
        faults=0,
        over=0,
        under=0,
        duplicates=0,
        breaches=1,
        bad_reads=0,
        final=0,
        acknowledged=0,
        possible=0,
        documented="exact",
        notes=[str(exc)],
    )


def run(names: list[str], endpoint: str, seed: int, count: int) -> list[Report]:
    """Run the named approaches' scenarios; each row gets its wall time in its notes."""
    reports: list[Report] = []
    for name in names:
        if name not in REGISTRY:
            raise SystemExit(f"unknown --regions scenario {name!r}; one of {', '.join(REGISTRY)}")
        began = time.monotonic()
        try:
            rows = REGISTRY[name](endpoint, seed, count)
        except WriterRuleViolation as exc:  # an item written against its family's writer rule
            rows = [writer_rule_row(name, exc)]
        spent = time.monotonic() - began
        for row in rows:
            row.notes.append(f"{name}: {spent:.1f} s wall for {count} schedules")
        reports += rows
    return reports


def run_fresh(names: list[str], seed: int, count: int) -> list[Report]:
    """:func:`run` on a DynamoDB Local of its own: after the in-process scenarios, the shared one
    holds their tables and runs these schedules 3-4x slower (measured: orders 249 s vs 54 s)."""
    import os

    from counters.core.client import reset_clients
    from devstack.dynamodb_local import DynamoDBLocal

    before = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    with DynamoDBLocal() as local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = local.endpoint
        reset_clients()
        try:
            return run(names, local.endpoint, seed, count)
        finally:
            if before is None:
                os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
            else:
                os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = before
            reset_clients()


def fresh_seeds(count: int, *, commit: str, date: str) -> list[int]:
    """``count`` seeds nobody has run yet: a hash of the commit and the UTC date (so a new commit or
    a new day searches new schedules, and the same commit on the same day replays the same ones)."""
    return [int(hashlib.sha256(f"{commit}:{date}:{i}".encode()).hexdigest()[:12], 16) % 10**9 for i in range(count)]


def replay_command(seed: int, names: list[str], schedules: int) -> str:
    """The one command that replays a multi-Region run of ``seed``."""
    return shlex.join(
        [
            "python",
            "-m",
            "proof",
            "--seed",
            str(seed),
            "--only",
            "",
            "--http",
            "",
            "--http-regions",
            "",
            "--regions",
            ",".join(names),
            "--schedules",
            str(schedules),
        ]
    )


def describe(count: int) -> str:
    return (
        f"Multi-Region ({count} seeded schedules per approach, testkit/regions.py: one DynamoDB Local, a table per Region, "
        "MREC replication with seeded delays, reordering, duplicates and partitions in simulated time; the client faults on in every Region)."
    )


from proof.regions import add, creations, ledger, likes, orders, reservations  # noqa: E402 - the approaches use the helpers above

REGISTRY: dict[str, Scenario] = {
    "add": add.scenarios,
    "ledger": ledger.scenarios,
    "likes": likes.scenarios,
    "reservations": reservations.scenarios,
    "orders": orders.scenarios,
    "creations": creations.scenarios,
}

BASELINES = frozenset({"add"})
"""Scenarios that show a hazard of a plain approach (a share of schedules must lose updates) rather
than a guarantee of Tally's: run on the default seed at full count, left out of the fresh-seed
search and the CI sweep, where a few dozen schedules make a share a coin toss."""
