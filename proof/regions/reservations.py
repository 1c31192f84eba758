"""Reservations across Regions (issue 21): seeded schedules on the local global table.

**MREC, 2 Regions, escrow.** Each schedule creates a resource (an even split of its capacity between
the Regions) and sends more reservations than the capacity, each to a seeded Region, with the
proof's client faults on every Region's client, replication delays, reordering and duplicates,
and simulated time moving between operations. A partition of simulated minutes holds replication
while reservations go on; during it the Region with more left sends a transfer to the other
(re-sent, and re-sent again after the heal), and a client fails over: it re-sends an acknowledged
reservation's Idempotency-Key in the other Region. Each Region's ``EscrowFunction`` reads that
Region's stream under the template's subscription (:class:`testkit.escrow.EscrowConsumers`, with the
Region's client faults) at seeded moments (after 30 % of the operations): it credits the transfers that arrive and gives back
failover double takes; **nobody calls** ``receive_transfers`` or ``reconcile``. After the heal the
emulator settles and the consumers poll, in rounds, until a poll finds nothing (the row reports how
many rounds acted). After heal + settle every Region must hold: total reserved <= capacity, every share item
consistent (``reserved + available == capacity``), shares + transfers in flight == capacity, every
acknowledged reservation CONFIRMED, nothing confirmed that was never asked (over), and the Regions
identical.

**MRSC, 3 Regions.** The single-item strategies (atomic, occ, occ_history, set) reserve from every
Region with faults and injected ``ReplicatedWriteConflictException``; the transaction-based ones
(crt, marker, and write sharding) must be refused with nothing written.

A failover re-send during a partition may take the key's quantity in both Regions (each from its
own share, each with its own record): never oversold; after the heal the later Region's consumer
gives its twin back (:meth:`~counters.services.reservations.escrow.Escrow.reconcile`, counted in the notes). ``stranded`` units are held with no record (atomic's documented double
apply under an SDK re-send, or a take whose record was never written).

:func:`bench_transfer_latency` measures an escrow transfer from step 1 to units usable in the target
Region, in simulated seconds (replication) and in wall milliseconds (the layer's own calls).
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from counters.core.errors import AmbiguousOutcome, ContentionError, CounterError, InsufficientCapacity, UnsupportedInMode, WrongRegion
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.approaches import NAMES, approach_class, names
from counters.services.reservations import Reservations
from proof.checker import Report
from proof.scenarios import CONFLICTING, FAULT_RATES
from testkit.escrow import EscrowConsumers
from testkit.faults import FaultInjector
from testkit.regions import GlobalTable, Mode

MREC_REGIONS = ("eu-west-1", "us-east-1")
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
POLICY = RetryPolicy(max_attempts=10, base_delay=0.0005, max_delay=0.002)
MREC_ROWS = (*((n, 1) for n in NAMES), ("crt", 2))  # every approach, and a sharded share
MRSC_ROWS = tuple((n, 1) for n in names(transactional=False))
MRSC_REFUSED = (*((n, 1) for n in names(transactional=True)), ("atomic", 2))  # and write sharding
DOCUMENTED = {n: approach_class(n).promise() for n in NAMES}  # atomic's policy here: under


@dataclass
class Tally:
    """One row's counts over its schedules."""

    operations: int = 0
    acknowledged: int = 0
    unknown: int = 0
    final: int = 0
    over: int = 0
    under: int = 0
    breaches: int = 0
    stranded: int = 0
    transfers: int = 0
    failovers: int = 0
    failover_replays: int = 0
    refused: int = 0
    refunded: int = 0
    credited: int = 0
    rounds: int = 0  # the most stream rounds after a heal that still acted (credit or give-back)
    notes: list[str] = field(default_factory=list)


@dataclass
class Case:
    """One schedule's resource and what its clients were told."""

    rid: str
    capacity: int
    asked: dict[str, int] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    transferred: bool = False
    failed_over: set[str] = field(default_factory=set)


def _table(endpoint: str, mode: Mode, seed: int) -> GlobalTable:
    regions = MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS
    return GlobalTable(endpoint, f"proof-rsv-{mode}-{uuid.uuid4().hex[:8]}", regions=regions, mode=mode, seed=seed).create()


def _services(gt: GlobalTable, mode: GlobalTableMode, seed: int) -> dict[str, Reservations]:
    regions = tuple(sorted(gt.regions))
    return {
        r: Reservations(
            gt.table_name, dynamodb=gt.client(r), retry=POLICY, topology=Topology(mode, r, regions), rng=random.Random(seed + i)
        )
        for i, r in enumerate(regions)
    }


def _faults(gt: GlobalTable, seed: int) -> dict[str, FaultInjector]:
    return {r: FaultInjector(gt.client(r), seed=seed + i) for i, r in enumerate(gt.regions)}


def _faults_on(injectors: dict[str, FaultInjector]) -> None:
    for injector in injectors.values():
        for kind, rate in FAULT_RATES.items():
            injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)


def _faults_off(injectors: dict[str, FaultInjector]) -> None:
    for injector in injectors.values():
        injector.clear()


def _quietly(call: Callable[[], object]) -> object:
    """A call made as a background job would (e.g. a stream consumer crediting transfers): its
    failures are retried on the next occasion."""
    try:
        return call()
    except (ContentionError, AmbiguousOutcome):
        return None


def _reserve(svc: Reservations, rid: str, quantity: int, key: str) -> str:
    """``ack`` (201/200), ``refused`` (409), or ``unknown`` (ambiguous, contention)."""
    try:
        svc.reserve(rid, quantity, key)
        return "ack"
    except InsufficientCapacity:
        return "refused"
    except (ContentionError, AmbiguousOutcome):
        return "unknown"


def _check(gt: GlobalTable, cases: list[Case], tally: Tally) -> None:
    """After heal + settle: the same items in every Region, and escrow's invariants in each, for
    every schedule's resource (one scan per Region for the whole row)."""
    if not gt.converged():
        tally.breaches += 1
        tally.notes.append("the Regions differ after settle")
    items = {region: gt.items(region) for region in gt.regions}
    for case in cases:
        per_region = [_observe(items[region], case, region, tally) for region in gt.regions]
        if any(p != per_region[0] for p in per_region):
            tally.breaches += 1
            tally.notes.append(f"{case.rid}: Regions differ after settle")
        reserved, confirmed, held = per_region[0]
        tally.acknowledged += sum(case.asked[k] for k in case.acked)
        tally.unknown += sum(case.asked[k] for k in case.unknown - case.acked)
        tally.final += sum(confirmed.values())
        tally.under += sum(case.asked[k] for k in case.acked if k not in confirmed)
        tally.over += sum(q for k, q in confirmed.items() if k not in case.acked and k not in case.unknown)
        tally.stranded += max(0, reserved - held)


def _observe(items: list[dict[str, Any]], case: Case, region: str, tally: Tally) -> tuple[int, dict[str, int], int]:
    rid, capacity = case.rid, case.capacity
    shares = [i for i in items if str(i["PK"]).startswith(f"RES#{rid}@") or (i["PK"] == f"RES#{rid}" and "reserved" in i)]
    moves = [i for i in items if i["PK"] == f"RES#{rid}#XFER"]
    sent = {i["SK"]: int(i["quantity"]) for i in moves if not str(i["SK"]).endswith("#IN")}
    received = {str(i["SK"]).removesuffix("#IN") for i in moves if str(i["SK"]).endswith("#IN")}
    in_flight = sum(q for tid, q in sent.items() if tid not in received)
    records = [i for i in items if str(i["PK"]).startswith("RSV#") and i.get("resourceId") == rid]  # MREC: one per Region
    reserved = sum(int(s["reserved"]) for s in shares)
    quotas = sum(int(s.get("capacity", capacity)) for s in shares)
    bad = [s for s in shares if int(s["reserved"]) + int(s["available"]) != int(s.get("capacity", capacity)) or int(s["available"]) < 0]
    confirmed = {r["idempotencyKey"]: int(r["quantity"]) for r in records if r["status"] == "CONFIRMED"}
    holders = Counter(r["idempotencyKey"] for r in records if r["status"] == "CONFIRMED")
    twice = sum(confirmed[k] * (n - 1) for k, n in holders.items())  # a key held in two Regions (a double take not given back)
    if in_flight:  # every transfer arrived after the heal: its target's consumer credits it, nobody else
        tally.breaches += 1
        tally.notes.append(f"{rid}@{region}: {in_flight} units sent but never credited after the heal")
    if twice:
        tally.breaches += 1
        tally.notes.append(f"{rid}@{region}: {twice} units held twice by keys taken in two Regions, after the heal")
    held = sum(int(r["quantity"]) for r in records if r["status"] in ("CONFIRMED", "PENDING", "UNKNOWN"))
    if reserved > capacity or bad or quotas + in_flight != capacity or reserved < held - unknown_of(records):
        tally.breaches += 1
        tally.notes.append(f"{rid}@{region}: reserved {reserved}/{capacity}, shares+in flight {quotas}+{in_flight}, bad items {len(bad)}")
    return reserved, confirmed, held


def unknown_of(records: list[dict[str, Any]]) -> int:
    """Quantities whose records say "may hold" (atomic/occ after an ambiguous take): maybe not taken."""
    return sum(int(r["quantity"]) for r in records if r["status"] in ("PENDING", "UNKNOWN"))


def create(svc: dict[str, Reservations], region: str, rid: str, **options: Any) -> None:
    """Create a resource as a client would: in ``region``, or (MREC: 409 ``wrong_region``) in the
    home Region the refusal names (docs/regions.md, Creations)."""
    try:
        svc[region].create_resource(rid, **options)
    except WrongRegion as refused:
        svc[refused.region].create_resource(rid, **options)


def mrec_schedule(
    gt: GlobalTable,
    svc: dict[str, Reservations],
    faults: dict[str, FaultInjector],
    strategy: str,
    shards: int,
    n: int,
    tally: Tally,
    consumers: EscrowConsumers,
) -> Case:
    rng = random.Random(n * 7919 + len(strategy))
    a, b = gt.regions
    case = Case(f"m{n}-{uuid.uuid4().hex[:6]}", rng.randint(4, 7))
    rid, asked, acked, unknown = case.rid, case.asked, case.acked, case.unknown
    create(svc, rng.choice(gt.regions), rid, capacity=case.capacity, strategy=strategy, shards=shards)
    gt.settle()
    requests = case.capacity + rng.randint(2, 3)
    split_at = sorted(rng.sample(range(requests), 2))  # the partition: from the first to the second
    failover_at = rng.randrange(requests)
    sent: tuple[str, str, int] | None = None  # the partition's transfer: source, target, quantity
    _faults_on(faults)
    try:
        for i in range(requests):
            if i == split_at[0]:
                gt.partition(a, b)
            region = rng.choice(gt.regions)
            key = f"k{i}"
            asked[key] = rng.randint(1, 2)
            outcome = _reserve(svc[region], rid, asked[key], key)
            tally.operations += 1
            if outcome == "ack":
                acked.add(key)
            elif outcome == "unknown":
                unknown.add(key)
            if i == split_at[0]:  # a transfer during the partition, from the Region with more left
                left = {r: _available(svc[r], rid) for r in gt.regions}
                source = max(gt.regions, key=lambda r: left[r])
                if left[source] > 0:
                    sent = (source, b if source == a else a, max(1, left[source] // 2))
                    for _ in range(2):  # a re-send: the same transfer
                        _quietly(lambda s=sent: svc[s[0]].escrow.transfer(rid, s[1], s[2], f"t-{rid}"))
                    tally.transfers += 1
                    case.transferred = True
            if i == failover_at and acked:  # a client fails over and re-sends an acknowledged key elsewhere
                again = sorted(acked)[rng.randrange(len(acked))]
                elsewhere = rng.choice([r for r in gt.regions if r != region])
                tally.failovers += 1
                case.failed_over.add(again)
                tally.failover_replays += _quietly(lambda e=elsewhere, k=again: svc[e].shared.known(_rid(rid, k))) is not None
                if _reserve(svc[elsewhere], rid, asked[again], again) == "unknown":
                    unknown.add(again)
            partitioned = split_at[0] <= i < split_at[1]
            gt.advance(rng.choice((10.0, 30.0, 60.0)) if partitioned else rng.choice((0.01, 0.2, 1.0, 5.0)))
            if rng.random() < 0.3:  # each Region's EscrowFunction, on what its stream holds now (it lags: not every step)
                consumers.poll()
            if i == split_at[1]:
                gt.heal()
                if sent is not None:  # a re-send after the heal: still the same transfer
                    _quietly(lambda s=sent: svc[s[0]].escrow.transfer(rid, s[1], s[2], f"t-{rid}"))
    finally:
        _faults_off(faults)
    gt.heal()
    return case


ROUNDS = 10
"""Stream rounds after the heal before the row reports that the consumers never went quiet."""


def finish(gt: GlobalTable, cases: list[Case], tally: Tally, consumers: EscrowConsumers) -> None:
    """Heal; then rounds of settle (every replicated write delivered) + every Region's stream consumer
    polling, until a poll consumes nothing; check. Nobody calls a route: what the consumers credit
    and give back is all that happens."""
    gt.heal()
    for round_ in range(1, ROUNDS + 1):
        gt.settle()
        before = (consumers.credited, consumers.reconciled)
        delivered = consumers.poll()
        if (consumers.credited, consumers.reconciled) != before:
            tally.rounds = max(tally.rounds, round_)
        if delivered == 0:
            break
    else:
        tally.breaches += 1
        tally.notes.append(f"the stream consumers still had records after {ROUNDS} rounds")
    gt.settle()
    _check(gt, cases, tally)


def _available(svc: Reservations, rid: str) -> int:
    """What this Region's own share has left, as it reads it (0 if the read fails)."""
    try:
        resource = svc.shared.resource(rid)
        return sum(c.available for _, c in svc.store.quotas(resource.counter_keys, Capacity()))
    except (ContentionError, AmbiguousOutcome):
        return 0


def _rid(resource_id: str, key: str) -> str:
    from counters.services.reservations import reservation_id

    return reservation_id(resource_id, key)


def mrsc_schedule(
    gt: GlobalTable, svc: dict[str, Reservations], faults: dict[str, FaultInjector], strategy: str, n: int, tally: Tally
) -> Case:
    rng = random.Random(n * 104729 + len(strategy))
    case = Case(f"s{n}-{uuid.uuid4().hex[:6]}", rng.randint(4, 8))
    rid, asked, acked, unknown = case.rid, case.asked, case.acked, case.unknown
    svc[rng.choice(gt.regions)].create_resource(rid, capacity=case.capacity, strategy=strategy)
    _faults_on(faults)
    try:
        for i in range(case.capacity + rng.randint(2, 4)):
            region = rng.choice(gt.regions)
            key = f"k{i}"
            asked[key] = rng.randint(1, 2)
            outcome = _reserve(svc[region], rid, asked[key], key)
            tally.operations += 1
            if outcome == "ack":
                acked.add(key)
            elif outcome == "unknown":
                unknown.add(key)
            if acked and rng.random() < 0.25:  # failover: the same key in another Region
                again = sorted(acked)[rng.randrange(len(acked))]
                tally.failovers += 1
                tally.failover_replays += 1  # MRSC: the record is always visible
                if _reserve(svc[rng.choice([r for r in gt.regions if r != region])], rid, asked[again], again) == "unknown":
                    unknown.add(again)
            gt.advance(0.02)
    finally:
        _faults_off(faults)
    return case


def mrsc_refusal(gt: GlobalTable, svc: dict[str, Reservations], strategy: str, shards: int, n: int, tally: Tally) -> None:
    rid = f"x{n}-{uuid.uuid4().hex[:6]}"
    before = len(gt.items(gt.regions[0]))
    try:
        svc[gt.regions[n % 3]].create_resource(rid, capacity=5, strategy=strategy, shards=shards)
        tally.breaches += 1
        tally.notes.append(f"{strategy} x{shards} was created on MRSC")
    except UnsupportedInMode:
        tally.refused += 1
    except CounterError as exc:
        tally.breaches += 1
        tally.notes.append(f"{strategy}: {exc.code}, not unsupported_in_region_mode")
    tally.operations += 1
    if len(gt.items(gt.regions[0])) != before:
        tally.breaches += 1
        tally.notes.append(f"{strategy}: a refused creation wrote something")


def _report(
    name: str,
    documented: str,
    tally: Tally,
    faults: dict[str, FaultInjector],
    schedules: int,
    elapsed: float,
    gt: GlobalTable | None = None,
) -> Report:
    replication = gt.stats.as_dict() if gt is not None else {}
    notes = [
        "emulator " + ", ".join(f"{k} {v}" for k, v in replication.items() if v),
        f"{schedules} schedules, {elapsed:.1f} s",
        f"transfers {tally.transfers}, failovers {tally.failovers} (record visible {tally.failover_replays})",
        f"by the stream consumers (nobody called a route): transfers credited {tally.credited} units, failover double takes "
        f"given back {tally.refunded}, the last in stream round {tally.rounds} after the heal",
        f"stranded units (held, no record: a take whose record was never written) {tally.stranded}",
        *tally.notes[:5],
    ]
    injected = sum(sum(f.injected.values()) for f in faults.values())
    return Report(
        name=name,
        operations=tally.operations,
        faults=injected,
        over=tally.over,
        under=tally.under,
        duplicates=0,
        breaches=tally.breaches,
        bad_reads=0,
        final=tally.final,
        acknowledged=tally.acknowledged,
        possible=tally.acknowledged + tally.unknown,
        documented=documented,
        unknown=tally.unknown,
        notes=notes,
        unexercised=[] if injected else ["client faults"],
    )


def _mrec_rows(endpoint: str, seed: int, per_row: int) -> list[Report]:
    """Every MREC row on one global table (fresh resource ids), one row after another: a
    partition is the table's, so two schedules at once would heal each other's."""
    reports = []
    gt = _table(endpoint, Mode.MREC, seed)
    consumers = EscrowConsumers(gt.table_name, gt.endpoint, {r: gt.reader(r) for r in gt.regions}, {})
    try:
        for strategy, shards in MREC_ROWS:
            svc, faults, tally, started = _services(gt, GlobalTableMode.MREC, seed), _faults(gt, seed), Tally(), time.monotonic()
            consumers.services = svc  # this row's services (and their faults); the pollers keep their place in the streams
            before = (consumers.credited, consumers.reconciled)
            cases = [mrec_schedule(gt, svc, faults, strategy, shards, seed * 1000 + n, tally, consumers) for n in range(per_row)]
            for f in faults.values():
                f.detach()
            finish(gt, cases, tally, consumers)
            tally.credited, tally.refunded = consumers.credited - before[0], consumers.reconciled - before[1]
            name = f"reservations {strategy}{f' x{shards} shards' if shards > 1 else ''} (MREC escrow, 2 Regions)"
            reports.append(_report(name, DOCUMENTED[strategy], tally, faults, per_row, time.monotonic() - started, gt))
    finally:
        gt.delete()
    return reports


def _mrsc_rows(endpoint: str, seed: int, per_row: int) -> list[Report]:
    reports = []
    gt = _table(endpoint, Mode.MRSC, seed)
    try:
        for strategy, _shards in MRSC_ROWS:
            svc, faults, tally, started = _services(gt, GlobalTableMode.MRSC, seed), _faults(gt, seed), Tally(), time.monotonic()
            cases = [mrsc_schedule(gt, svc, faults, strategy, seed * 1000 + n, tally) for n in range(per_row)]
            for f in faults.values():
                f.detach()
            _check(gt, cases, tally)
            name = f"reservations {strategy} (MRSC, 3 Regions)"
            reports.append(_report(name, DOCUMENTED[strategy], tally, faults, per_row, time.monotonic() - started, gt))
        svc, tally, started = _services(gt, GlobalTableMode.MRSC, seed), Tally(), time.monotonic()
        for n, (strategy, shards) in enumerate(MRSC_REFUSED * 3):
            mrsc_refusal(gt, svc, strategy, shards, n, tally)
        report = _report(
            f"reservations {', '.join(names(transactional=True))}, sharded (MRSC: refused)",
            "exact",
            tally,
            {},
            len(MRSC_REFUSED) * 3,
            time.monotonic() - started,
        )
        report.unexercised = []
        report.notes.insert(0, f"refused {tally.refused} of {tally.operations} creations with unsupported_in_region_mode (409)")
        reports.append(report)
    finally:
        gt.delete()
    return reports


def scenarios(endpoint: str, seed: int = 7, schedules: int = 150) -> list[Report]:
    """>= ``schedules`` seeded schedules over every (approach, mode) row; one Report per row."""
    per_row = max(1, -(-schedules // (len(MREC_ROWS) + len(MRSC_ROWS))))
    return [*_mrec_rows(endpoint, seed, per_row), *_mrsc_rows(endpoint, seed, per_row)]


# ----------------------------------------------------------------------------- bench
def bench_transfer_latency(endpoint: str, samples: int = 20, *, seed: int = 11, step: float = 0.05) -> dict[str, Any]:
    """An escrow transfer from step 1 (the source debits its share) to the units usable in the
    target Region (its receipt credited them), on the emulator's default replication delays.
    The target polls as a stream consumer would, every ``step`` simulated seconds. Returns
    p50/p99/max in simulated seconds (replication dominates) and the wall milliseconds of the
    layer's own calls (step 1 + the crediting step 2)."""
    gt = _table(endpoint, Mode.MREC, seed)
    svc = _services(gt, GlobalTableMode.MREC, seed)
    a, b = gt.regions
    sim: list[float] = []
    wall: list[float] = []
    try:
        for n in range(samples):
            rid = f"lat{n}"
            create(svc, a, rid, capacity=10, strategy="crt", shares={a: 10, b: 0})
            gt.settle()
            started, t0 = time.perf_counter(), gt.clock.now()
            svc[a].escrow.transfer(rid, b, 4, f"bench-{n}")
            step1 = time.perf_counter() - started
            gt.pump()
            while True:
                gt.advance(step)
                began = time.perf_counter()
                if svc[b].escrow.receive_transfers(rid) > 0:
                    wall.append((step1 + time.perf_counter() - began) * 1000)
                    sim.append(gt.clock.now() - t0)
                    break
                if gt.clock.now() - t0 > 3600:
                    raise RuntimeError("a transfer did not arrive within an hour of simulated time")
    finally:
        gt.delete()

    def pct(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return {
        "samples": samples,
        "sim_seconds": {"p50": statistics.median(sim), "p99": pct(sim, 0.99), "max": max(sim)},
        "wall_ms": {"p50": statistics.median(wall), "p99": pct(wall, 0.99), "max": max(wall)},
        "poll_step_seconds": step,
    }
