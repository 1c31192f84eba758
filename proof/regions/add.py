"""The seed's hazard: a plain ``UpdateItem ADD`` counter written in several Regions of a global table.

**MREC** (the hazard). Each schedule is one counter (a fresh key). Both Regions add to it, 2-5
times each, at seeded instants inside a burst of :data:`BURST` simulated seconds: shorter than
most replication delays (:class:`testkit.regions.Delays`: median 0.4 s), so both Regions write
before they see each other's writes, the concurrent traffic global tables are for; this is by
design, and said so in the row. A third of the schedules also partition the Regions for minutes
from the start. An add whose outcome the client could not know (a 500) is re-sent once in another
Region: a client failing over. The proof's client faults are on in every Region. Then heal and
settle, and compare the converged value with the adds acknowledged.

Last-writer-wins keeps ONE Region's whole item, so the other Region's concurrent adds vanish: the
row holds when at least 95 % of schedules lose an acknowledged add (issue 21). Schedules whose
writes are spread wider than the replication delays lose less: that is what the design rule "one
writer Region per shared item" is for (docs/regions.md), not a flaw of this baseline.

**MRSC** (the contrast). The same schedules on the 3 Regions of an MRSC table (no partitions: its
replication cannot be paused): every write acts on the latest version, so no acknowledged add is
ever lost; a ``ReplicatedWriteConflictException`` refuses an add (not applied). The row holds when
no schedule loses an acknowledged add. A plain ADD is still not idempotent: a lost reply or a
failover re-send can count an add twice in either mode (the notes count those schedules).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from counters.core.failures import Failure, classify
from proof.checker import Report
from proof.regions import Schedule, ScheduleReport, Timeline, detach, global_table, region_faults, schedules
from testkit.faults import FaultInjector
from testkit.regions import GlobalTable, Mode

BURST = 0.1
"""Every Region's adds fall in this many simulated seconds (replication delays: median 0.4 s, minimum 5 ms)."""
PARTITION_SHARE = 1 / 3
PARTITION_SECONDS = (60.0, 600.0)


def _add(ddb: Any, table: str, key: dict[str, Any]) -> str:
    """One plain ADD, no retry: ``ok`` (acknowledged), ``fail`` (not applied) or ``unknown``."""
    try:
        ddb.update_item(TableName=table, Key=key, UpdateExpression="ADD n :one", ExpressionAttributeValues={":one": {"N": "1"}})
        return "ok"
    except (ClientError, BotoCoreError) as exc:
        failure = classify(exc)
        if failure is not None and failure.kind in (Failure.CONFLICT, Failure.THROTTLED, Failure.NOT_SENT, Failure.CONDITION):
            return "fail"
        return "unknown"


def _extra_applies(injectors: dict[str, FaultInjector]) -> int:
    """Faults after which an add applied without being acknowledged (or applied twice)."""
    return sum(i.injected["after_commit"] + i.injected["resend"] for i in injectors.values())


def _value(gt: GlobalTable, region: str, key: dict[str, Any]) -> int:
    got = gt.item(region, key)  # the emulator's own client: never faulted
    return int(got["n"]) if got else 0


@dataclass
class Tally:
    count: int = 0
    lost: int = 0
    mismatched: int = 0
    diverged: int = 0
    partitioned: int = 0
    failovers: int = 0
    one_sided: int = 0
    masked: int = 0
    totals: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("intents", "ok", "possible", "final", "over", "under", "unknown"), 0)
    )


def _schedule(gt: GlobalTable, schedule: Schedule, injectors: dict[str, FaultInjector], tally: Tally) -> None:
    key = {"PK": {"S": f"ADD#{schedule.index}"}, "SK": {"S": "COUNTER"}}
    rng = schedule.rng
    writers = gt.regions[:2] if gt.mode is Mode.MREC else gt.regions
    extra_before = _extra_applies(injectors)
    statuses: list[str] = []
    acked_in: set[str] = set()  # Regions with an acknowledged add
    timeline = Timeline(gt)
    for index, region in enumerate(writers):
        other = writers[(index + 1) % len(writers)]
        for t in schedule.times(rng.randint(2, 5), BURST):

            def step(region: str = region, other: str = other) -> None:
                status = _add(gt.client(region), gt.table_name, key)
                if status == "unknown":  # the client fails over and re-sends the same add
                    tally.failovers += 1
                    status = "ok" if _add(gt.client(other), gt.table_name, key) == "ok" else "unknown"
                statuses.append(status)
                if status == "ok":
                    acked_in.add(region)

            timeline.at(t, step)
    if gt.mode is Mode.MREC and rng.random() < PARTITION_SHARE:
        tally.partitioned += 1
        gt.partition(writers[0], writers[1])
        timeline.at(rng.uniform(*PARTITION_SECONDS), gt.heal)
    timeline.run()
    gt.heal()
    gt.settle()
    values = {region: _value(gt, region, key) for region in gt.regions}
    final = values[gt.regions[0]]
    acknowledged = statuses.count("ok")
    possible = len(statuses) - statuses.count("fail")
    tally.count += 1
    tally.diverged += len(set(values.values())) > 1
    tally.lost += final < acknowledged
    tally.one_sided += final >= acknowledged and len(acked_in) < 2
    tally.masked += final >= acknowledged and len(acked_in) >= 2 and _extra_applies(injectors) > extra_before
    tally.mismatched += final != acknowledged
    for name, value in (
        ("intents", len(statuses)),
        ("ok", acknowledged),
        ("unknown", statuses.count("unknown")),
        ("possible", possible),
        ("final", final),
        ("over", max(0, final - possible)),
        ("under", max(0, acknowledged - final)),
    ):
        tally.totals[name] += value


def _run(endpoint: str, seed: int, count: int, mode: Mode) -> Report:
    # the hazard itself: a key no layer family declares, written in place by every Region on purpose
    gt = global_table(endpoint, seed, mode, prefix=f"proof-add-{mode}", writers=False)
    injectors = region_faults(gt, seed)
    began = time.monotonic()
    tally = Tally()
    for schedule in schedules(seed, count):
        _schedule(gt, schedule, injectors, tally)
    spent = time.monotonic() - began
    faults = detach(injectors)
    stats = gt.stats
    gt.delete()
    hazard = mode is Mode.MREC
    hits = tally.lost if hazard else count - tally.lost
    if tally.diverged:
        hits = 0  # never claim anything on an emulator that failed to converge
    totals = tally.totals
    writers = 2 if hazard else 3
    report = ScheduleReport(
        name=f"plain ADD counter written in {writers} Regions ({mode}): lost acknowledged adds in {tally.lost}/{count} schedules ({tally.lost / count:.0%})",
        operations=totals["intents"],
        faults=faults,
        over=totals["over"],
        under=totals["under"],
        duplicates=0,
        breaches=0,
        bad_reads=0,
        final=totals["final"],
        acknowledged=totals["ok"],
        possible=totals["possible"],
        documented="loses updates (>= 95% of schedules)" if hazard else "loses no acknowledged add",
        unknown=totals["unknown"],
        schedules=count,
        hits=hits,
        threshold=0.95 if hazard else 1.0,
    )
    lost_none = count - tally.lost
    report.notes += [
        f"lost an acknowledged add in {tally.lost} of {count} schedules ({tally.lost / count:.1%}); value != acknowledged in {tally.mismatched}",
        f"of the {lost_none} that lost none, {tally.one_sided} had acknowledged adds in one Region only (the faults refused the others'), "
        f"{tally.masked} had an add applied without its acknowledgement (a lost reply, an SDK resend), which can make up for a lost one"
        if hazard
        else "a plain ADD is not idempotent: the over-count is adds applied twice (an SDK resend, a failover after a lost reply)",
        f"every Region's adds within {BURST} simulated s (MREC replication delay median 0.4 s); {tally.partitioned} schedules partitioned "
        f"for minutes; {tally.failovers} failover re-sends",
        f"Regions diverged after settle: {tally.diverged}",
        f"replicator: {stats.replicated} applied, {stats.dropped_lww} dropped by last-writer-wins, {stats.duplicates} duplicated, "
        f"{stats.held_by_partition} held by a partition"
        if hazard
        else f"ReplicatedWriteConflictException injected {stats.conflicts} times (each add refused, not applied)",
        f"{count / spent:.1f} schedules/s",
    ]
    if tally.diverged:
        report.notes.append("the emulator failed to converge: a bug in testkit/regions.py")
    return report


def scenarios(endpoint: str, seed: int, count: int) -> list[Report]:
    """Two rows: the hazard on MREC (>= 95 % of schedules lose an add) and MRSC (none does)."""
    return [_run(endpoint, seed, count, Mode.MREC), _run(endpoint, seed, count, Mode.MRSC)]
