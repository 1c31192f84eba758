"""Ledgers across Regions (issue 21): seeded schedules on the local global table (:mod:`testkit.regions`).

Each schedule, on fresh ledger ids of one table per mode, with the emulator's simulated clock as every
Region's ledger clock (retry window 60 s, margin 90 s, clock skew 30 s or 120 s: the slow path and its
fence on most appends), the proof's client faults on every Region's client:

* appends in every Region, each followed by a pump and a seeded advance of simulated time; some keys
  minted up to 55 s before they are sent (a client's first attempt earlier), some appends stalled between
  their freshness check and their Put while their Region compacts past them (the issue's stranded entry);
* MREC: a partition of 3 to 8 simulated minutes (longer than window + margin) between the two Regions,
  with appends and compactions in both Regions throughout; MRSC: the same traffic over 3 Regions;
* a client failover: the answer of an append in one Region is lost, the client re-sends the same key
  and amount in another Region;
* heal, settle: every Region's balance must be the expected value; then every Region compacts
  everything, settle again, and every Region's balance must still be it (and, MREC, the Regions converge).

Every client re-sends its intent (same key) until it gets a definite answer. The expected value is the
sum of acknowledged amounts, plus, in MREC, the amount of each failover re-send that the ledger documents
as counted twice: the re-send reached a Region whose replica did not hold the first attempt's entry yet
(docs/ledgers.md, "Global tables"). The scenario checks that no other case counts twice (a re-send made
after the entry replicated must be answered ``duplicate``), that those doubles happened only then, and
that a balance read right after the heal reports them in ``duplicate_keys`` when both entries are pending.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3

from counters.core.client import CLIENT_CONFIG
from counters.core.errors import CounterError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.core.policy import RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.ledger import Ledger, new_key, parse_key
from proof.checker import Report
from proof.scenarios import CONFLICTING, FAULT_RATES
from testkit.faults import FaultInjector
from testkit.regions import Delays, GlobalTable, Mode

WINDOW, MARGIN = 60.0, 90.0
SKEWS = (30.0, 120.0)  # 120 > margin: every append of a key older than 30 s is fenced
MREC_REGIONS = ("eu-west-1", "us-east-1")
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
RETRY = RetryPolicy(max_attempts=4, base_delay=0.0005, max_delay=0.002)
RESENDS = 12
BATCH = 6  # schedules sharing one timeline (partition, heal, settle), each on its own ledger id


@dataclass
class Tally:
    """What the schedules of one mode add up to."""

    schedules: int = 0
    operations: int = 0
    acknowledged: int = 0
    expected: int = 0
    over: int = 0
    under: int = 0
    unknown: int = 0
    faults: int = 0
    mismatched_regions: int = 0
    doubled: int = 0
    doubled_reported: int = 0
    doubled_hidden: int = 0
    failovers: int = 0
    failover_duplicates: int = 0
    wrong_doubles: int = 0
    stranded: int = 0
    compactions: int = 0
    merged: int = 0
    fenced: int = 0
    not_converged: int = 0
    notes: list[str] = field(default_factory=list)


class Schedule:
    """One seeded schedule on one ledger id."""

    def __init__(self, gt: GlobalTable, ledgers: dict[str, Ledger], plain: dict[str, Any], rng: random.Random, tally: Tally) -> None:
        self.gt, self.ledgers, self.plain, self.rng, self.tally = gt, ledgers, plain, rng, tally
        self.ledger_id = f"l-{uuid.uuid4().hex[:10]}"
        self.regions = list(ledgers)
        self.acknowledged = 0
        self.unknown_amounts: list[int] = []
        self.doubled: dict[str, int] = {}  # entry id -> amount counted twice (a failover during a partition)

    # -- client side
    def send(self, region: str, amount: int, key: str) -> str:
        """One attempt: ok | fail | unknown."""
        try:
            result = self.ledgers[region].append(self.ledger_id, amount, key)
        except CounterError:
            return "unknown"
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return "ok"
        if result.outcome is Outcome.REJECTED:
            return "fail"
        return "unknown"  # contention, ambiguous: the client re-sends the same key

    def intent(self, region: str, amount: int, key: str) -> str:
        """A client sends until it gets a definite answer (``RESENDS`` attempts at most)."""
        self.tally.operations += 1
        status, maybe_applied = "unknown", False
        for _ in range(RESENDS):
            status = self.send(region, amount, key)
            if status != "unknown":
                break
            maybe_applied = True
        if status == "fail" and maybe_applied:
            status = "unknown"  # key_expired after an unknown attempt: this request added nothing, an earlier one may have
        self.settle_intent(status, amount)
        return status

    def settle_intent(self, status: str, amount: int) -> None:
        if status == "ok":
            self.acknowledged += amount
        elif status == "unknown":
            self.unknown_amounts.append(amount)

    # -- steps
    def append(self) -> None:
        region = self.rng.choice(self.regions)
        amount = self.rng.choice([-3, -2, -1, 1, 2, 3, 5, 7, 11])
        key = new_key(self.gt.clock.now() - self.rng.uniform(0.0, 55.0) * (self.rng.random() < 0.4))
        self.intent(region, amount, key)

    def stalled_append(self) -> None:
        """The Put waits past window + margin while its own Region compacts past its key."""
        region = self.rng.choice(self.regions)
        ledger = self.ledgers[region]
        fired: list[int] = []

        def stall(stage: str) -> None:
            if stage == "put_sending" and not fired:
                fired.append(1)
                self.gt.advance(WINDOW + MARGIN + 5)
                self.intent(region, self.rng.choice([1, 2, 3]), new_key(self.gt.clock.now()))  # a later entry to merge past
                self.compact(region)

        ledger.hook = stall
        try:
            status = self.intent(region, self.rng.choice([4, 6, 8]), new_key(self.gt.clock.now()))
        finally:
            ledger.hook = None
        self.tally.stranded += status == "fail"

    def compact(self, region: str | None = None) -> None:
        region = region or self.rng.choice(self.regions)
        try:
            report = self.ledgers[region].compact(self.ledger_id)
        except CounterError:
            return
        self.tally.compactions += 1
        self.tally.merged += report.merged

    def failover(self) -> None:
        """The first attempt in ``first`` is applied but its answer lost; the client re-sends in ``second``."""
        first, second = self.rng.sample(self.regions, 2)
        amount = self.rng.choice([10, 20, 30])
        key = new_key(self.gt.clock.now())
        self.tally.failovers += 1
        self.tally.operations += 1
        status = "unknown"
        for _ in range(RESENDS):  # the first Region applies it; the client never hears
            if self.send(first, amount, key) != "unknown":
                break
        self.gt.advance(self.rng.uniform(0.0, 3.0))
        entry = parse_key(key)
        replicated = self.gt.mode is Mode.MRSC or self.holds(second, entry.sk_in(first))
        for _ in range(RESENDS):
            status = self.send(second, amount, key)
            if status != "unknown":
                break
        if status == "fail":
            status = "unknown"  # refused here, but the first attempt's outcome was never known to the client
        self.settle_intent(status, amount)
        if self.gt.mode is Mode.MREC and self.holds(first, entry.sk_in(first)) and self.holds(second, entry.sk_in(second)):
            self.doubled[entry.entry_id] = amount  # written in both Regions: counted in both (documented)
            self.tally.wrong_doubles += replicated  # only a re-send that could not see the first entry may double
        elif replicated and status == "ok":
            self.tally.failover_duplicates += 1

    def holds(self, region: str, sk: str) -> bool:
        """Does ``region``'s replica hold this item now (the harness looks; the ledger cannot)?"""
        item = self.plain[region].get_item(
            TableName=self.gt.table_name, Key={"PK": {"S": f"LEDGER#{self.ledger_id}"}, "SK": {"S": sk}}, ConsistentRead=True
        )
        return "Item" in item

    def balance(self, region: str) -> Any:
        for _ in range(RESENDS):
            try:
                return self.ledgers[region].balance(self.ledger_id)
            except CounterError:
                continue
        raise RuntimeError("no balance read succeeded")

    # -- the schedule
    # -- the phases of a schedule (run_batch runs several schedules' phases in lockstep on one timeline)
    def steps(self) -> list[Any]:
        steps = [self.append, self.append, self.compact, self.failover]
        if self.rng.random() < 0.3:
            steps.append(self.stalled_append)
        self.rng.shuffle(steps)
        return steps

    def late(self) -> None:
        for region in self.regions:
            self.compact(region)  # every Region compacts its own entries while the partition lasts
        if self.rng.random() < 0.5:
            self.failover()  # late in the partition (MREC: the first entry cannot have replicated)

    def after_heal(self) -> None:
        if self.rng.random() < 0.5:
            self.failover()  # after the heal: a short seeded gap, mostly replicated, sometimes not yet

    def first_check(self) -> int:
        expected = self.acknowledged + sum(self.doubled.values())
        first_reads = {r: self.balance(r) for r in self.regions}
        for entry_id in self.doubled:
            reported = any(entry_id in (read.duplicate_keys or []) for read in first_reads.values())
            self.tally.doubled_reported += reported
            self.tally.doubled_hidden += not reported  # one of the two was merged before the heal
        self.check(expected, [read.balance for read in first_reads.values()])
        return expected

    def final_check(self, expected: int) -> None:
        self.check(expected, [self.balance(r).balance for r in self.regions], final=True)

    def check(self, expected: int, balances: list[int], *, final: bool = False) -> None:
        low = expected + sum(a for a in self.unknown_amounts if a < 0)
        high = expected + sum(a for a in self.unknown_amounts if a > 0)
        over = sum(max(0, b - high) for b in balances)
        under = sum(max(0, low - b) for b in balances)
        self.tally.over += over
        self.tally.under += under
        self.tally.mismatched_regions += len(set(balances)) > 1
        if final:
            self.tally.acknowledged += self.acknowledged
            self.tally.expected += expected
            self.tally.unknown += len(self.unknown_amounts)
            self.tally.doubled += len(self.doubled)
            self.tally.schedules += 1


def run_batch(gt: GlobalTable, batch: list[Schedule], rng: random.Random) -> None:
    """Several schedules (one ledger id each) on one timeline: one partition, heal and settle for all."""
    for _ in range(2):
        for schedule in batch:
            schedule.append()
        gt.advance(rng.uniform(0.1, 5.0))
    partitioned = gt.mode is Mode.MREC
    if partitioned:
        gt.partition(*MREC_REGIONS)
    length = rng.uniform(WINDOW + MARGIN + 10, 360.0)  # longer than window + margin: compactions merge inside it
    end = gt.clock.now() + length
    plans = [schedule.steps() for schedule in batch]
    for n in range(max(len(plan) for plan in plans)):
        for plan in plans:
            if n < len(plan):
                plan[n]()
        gt.advance(rng.uniform(10.0, length / 5))  # pumps first: every write since the last step is stamped now
    gt.advance(max(0.0, end - gt.clock.now()))
    for schedule in batch:
        schedule.late()
    if partitioned:
        gt.heal()
    gt.settle()
    for schedule in batch:
        schedule.after_heal()
    gt.settle()
    expected = [schedule.first_check() for schedule in batch]
    gt.advance(WINDOW + MARGIN + 10)
    for schedule in batch:
        for region in schedule.regions:
            schedule.compact(region)
    gt.settle()
    for schedule, value in zip(batch, expected, strict=True):
        schedule.final_check(value)


def _plain_client(endpoint: str, region: str) -> Any:
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID", "local"), os.environ.get("AWS_SECRET_ACCESS_KEY", "local")
    return boto3.client(
        "dynamodb", region_name=region, endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, config=CLIENT_CONFIG
    )


def _mode_scenarios(endpoint: str, seed: int, schedules: int, mode: Mode) -> Report:
    regions = MREC_REGIONS if mode is Mode.MREC else MRSC_REGIONS
    gt = GlobalTable(
        endpoint, f"proof-ledger-{mode}-{uuid.uuid4().hex[:6]}", regions=regions, mode=mode, seed=seed, delays=Delays()
    ).create()
    topology_mode = GlobalTableMode.MREC if mode is Mode.MREC else GlobalTableMode.MRSC
    injectors: list[FaultInjector] = []
    for i, region in enumerate(regions):
        injector = FaultInjector(gt.client(region), seed=seed * 31 + i)
        for kind, rate in FAULT_RATES.items():
            injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)
        injectors.append(injector)
    plain = {r: _plain_client(endpoint, gt.store_region if mode is Mode.MRSC else r) for r in regions}
    tally = Tally()
    started = time.monotonic()
    batch: list[Schedule] = []
    try:
        for n in range(schedules):
            rng = random.Random(seed * 1_000_003 + n)
            skew = rng.choice(SKEWS)
            ledgers = {
                r: Ledger(
                    gt.table_name,
                    dynamodb=gt.client(r),
                    retry=RETRY,
                    retry_window=WINDOW,
                    margin=MARGIN,
                    clock_skew=skew,
                    policy=RegionPolicy.of(Topology(topology_mode, r, tuple(sorted(regions)))),
                    clock=gt.clock.now,
                )
                for r in regions
            }
            batch.append(Schedule(gt, ledgers, plain, rng, tally))
            if len(batch) == BATCH or n == schedules - 1:
                run_batch(gt, batch, random.Random(seed * 7919 + n))
                batch = []
        if mode is Mode.MREC and not gt.converged():
            tally.not_converged += 1
    finally:
        for injector in injectors:
            tally.faults += sum(injector.injected.values())
            injector.detach()
        gt.delete()
    return _report(mode, tally, time.monotonic() - started, gt)


def _report(mode: Mode, tally: Tally, seconds: float, gt: GlobalTable) -> Report:
    documented = "exact"
    report = Report(
        name=f"ledger across Regions ({mode.upper()}, {len(gt.regions)} Regions, {tally.schedules} schedules)"
        + (
            f"; failover re-sends that beat replication counted in each Region that took them: {tally.doubled} of {tally.failovers} (documented)"
            if mode is Mode.MREC
            else ""
        ),
        operations=tally.operations,
        faults=tally.faults,
        over=tally.over,
        under=tally.under,
        duplicates=tally.wrong_doubles,
        breaches=0,
        bad_reads=tally.mismatched_regions + tally.not_converged,
        final=tally.expected,
        acknowledged=tally.acknowledged,
        possible=tally.expected,
        documented=documented,
        unknown=tally.unknown,
    )
    report.notes.append(
        f"{tally.schedules} schedules in {seconds:.1f} s; {tally.compactions} compactions merged {tally.merged} entries; "
        f"{tally.stranded} stalled appends refused after their entry was stranded; replication: {gt.stats.as_dict()}"
    )
    report.notes.append(
        f"failovers: {tally.failovers}; answered duplicate after replication: {tally.failover_duplicates}; "
        f"counted in two Regions (re-sent before the first entry replicated, documented): {tally.doubled} "
        f"(reported in duplicateKeys after the heal: {tally.doubled_reported}; one entry already merged: {tally.doubled_hidden})"
    )
    if mode is Mode.MRSC and tally.doubled:
        report.duplicates += tally.doubled  # MRSC promises exactly one entry per key
    if tally.compactions == 0 or tally.merged == 0:
        report.unexercised.append("compaction")
    if tally.failovers == 0:
        report.unexercised.append("failover")
    if mode is Mode.MREC and gt.stats.as_dict().get("held_by_partition", 0) == 0:
        report.unexercised.append("partition")
    return report


def scenarios(endpoint: str, seed: int, schedules: int = 150) -> list[Report]:
    """Two rows: MREC (2 Regions) and MRSC (3 Regions); ``schedules`` split between them (2:1)."""
    mrec = max(1, schedules * 2 // 3)
    return [_mode_scenarios(endpoint, seed, mrec, Mode.MREC), _mode_scenarios(endpoint, seed, max(1, schedules - mrec), Mode.MRSC)]
