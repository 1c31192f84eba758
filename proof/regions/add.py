"""The seed's hazard: a plain ``UpdateItem ADD`` counter written in two Regions of an MREC table.

Each schedule is one counter (a fresh key). Both Regions add to it, 2-5 times each, at seeded
instants inside a burst of :data:`BURST` simulated seconds: a burst shorter than most replication
delays (:class:`testkit.regions.Delays`: median 0.4 s), so both Regions write before they see each
other's writes, the concurrent traffic global tables are for. A third of the schedules also
partition the Regions for minutes from the start. An add whose outcome the client could not know
(a 500) is re-sent once in the other Region: a client failing over. The proof's client faults are on
in both Regions. Then heal and settle, and compare the converged value with the adds acknowledged.

Last-writer-wins keeps ONE Region's whole item, so the other Region's concurrent adds vanish: the
row's verdict holds when at least 95 % of schedules lose an acknowledged add (issue 21). Schedules
whose writes are spread wider than the replication delays lose less: that is the point of the
design rule "one writer Region per shared item" (docs/regions.md), not a flaw of this baseline.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from counters.core.failures import Failure, classify
from proof.checker import Report
from proof.regions import ScheduleReport, Timeline, detach, global_table, region_faults, schedules
from testkit.faults import FaultInjector
from testkit.regions import GlobalTable

BURST = 0.1
"""Both Regions' adds fall in this many simulated seconds (replication delays: median 0.4 s, minimum 5 ms)."""
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


def scenarios(endpoint: str, seed: int, count: int) -> list[Report]:
    gt = global_table(endpoint, seed, prefix="proof-add")
    a, b = gt.regions
    injectors = region_faults(gt, seed)
    began = time.monotonic()
    totals = {"intents": 0, "ok": 0, "possible": 0, "final": 0, "over": 0, "under": 0, "unknown": 0}
    lost = mismatched = diverged = partitioned = failovers = one_sided = masked = 0
    for schedule in schedules(seed, count):
        key = {"PK": {"S": f"ADD#{schedule.index}"}, "SK": {"S": "COUNTER"}}
        rng = schedule.rng
        extra_before = _extra_applies(injectors)
        statuses: list[str] = []
        acked_in: set[str] = set()  # Regions with an acknowledged add
        timeline = Timeline(gt)
        for region, other in ((a, b), (b, a)):
            for t in schedule.times(rng.randint(2, 5), BURST):

                def step(region: str = region, other: str = other) -> None:
                    status = _add(gt.client(region), gt.table_name, key)
                    if status == "unknown":  # the client fails over and re-sends the same add
                        nonlocal failovers
                        failovers += 1
                        again = _add(gt.client(other), gt.table_name, key)
                        status = "ok" if again == "ok" else "unknown"
                    statuses.append(status)
                    if status == "ok":
                        acked_in.add(region)

                timeline.at(t, step)
        cut = rng.random() < PARTITION_SHARE
        if cut:
            partitioned += 1
            gt.partition(a, b)
            timeline.at(rng.uniform(*PARTITION_SECONDS), gt.heal)
        timeline.run()
        gt.heal()
        gt.settle()
        values = {region: _value(gt, region, key) for region in gt.regions}
        final = values[a]
        diverged += len(set(values.values())) > 1
        acknowledged = statuses.count("ok")
        possible = len(statuses) - statuses.count("fail")
        lost += final < acknowledged
        one_sided += final >= acknowledged and len(acked_in) < 2
        masked += final >= acknowledged and len(acked_in) == 2 and _extra_applies(injectors) > extra_before
        mismatched += final != acknowledged
        totals["intents"] += len(statuses)
        totals["ok"] += acknowledged
        totals["unknown"] += statuses.count("unknown")
        totals["possible"] += possible
        totals["final"] += final
        totals["over"] += max(0, final - possible)
        totals["under"] += max(0, acknowledged - final)
    spent = time.monotonic() - began
    faults = detach(injectors)
    stats = gt.stats
    gt.delete()
    report = ScheduleReport(
        name=f"plain ADD counter written in 2 Regions (mrec): lost acknowledged adds in {lost}/{count} schedules ({lost / count:.0%})",
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
        documented="loses updates (>= 95% of schedules)",
        unknown=totals["unknown"],
        schedules=count,
        hits=lost,
        threshold=0.95,
    )
    report.notes += [
        f"lost an acknowledged add in {lost} of {count} schedules ({lost / count:.1%}); value != acknowledged in {mismatched}; "
        f"of the {count - lost} that lost none, {one_sided} had acknowledged adds in one Region only (the faults refused the other's), {masked} had an add applied without its acknowledgement (a lost reply, an SDK resend) which can make up for a lost one",
        f"both Regions' adds within {BURST} simulated s (replication delay median 0.4 s); {partitioned} schedules partitioned for minutes; "
        f"{failovers} failover re-sends",
        f"Regions diverged after settle: {diverged}",
        f"replicator: {stats.replicated} applied, {stats.dropped_lww} dropped by last-writer-wins, {stats.duplicates} duplicated, "
        f"{stats.held_by_partition} held by a partition",
        f"{count / spent:.1f} schedules/s",
    ]
    if diverged:
        report.notes.append("the emulator failed to converge: a bug in testkit/regions.py")
        report.hits = 0  # never claim the hazard on a broken emulator
    return [report]
