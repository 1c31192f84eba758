"""Orders and the LAST_ORDER pointer across Regions: seeded schedules on the local global table.

One :class:`testkit.regions.GlobalTable` per mode (MREC: 2 Regions, MRSC: 3) runs every schedule of
that mode with fresh keys (ids, the sequences and the pointers carry on from schedule to schedule,
so uniqueness and monotonicity are checked across the whole run), with the proof's client faults on
every Region's client (:data:`proof.scenarios.FAULT_RATES`), seeded replication delays, reordering
and duplicates. Each schedule:

* clients place orders in every Region; a request not answered is re-sent with the same
  Idempotency-Key, and some clients **fail over**: their first answer is lost and they re-send the
  same key and body in another Region;
* a **partition** of simulated minutes between two Regions, orders on both sides, then the heal;
* each Region's order pointer function follows its Region's stream (:class:`StreamFeed`), and
  ``GET /orders/latest`` is read in every Region after every step.

Checked (a row per mode, documented ``exact``):

* ``duplicates``: an id answered for two different keys, or (MRSC, and MREC failovers that found
  the key record) one key answered with two ids;
* ``bad_reads``: an answer with another key's items, an acknowledged order missing or holding other
  items in any Region after settle, a pointer read lower than an earlier read in the same Region;
* ``breaches``: after heal and settle, a Region whose pointer is not the greatest order id (that
  read is re-sent until answered, as a client re-sends a 503: the check never compares an earlier
  read in its place).

MREC failovers that did **not** find the key record (it had not replicated: a partition, or lag)
make a second order for one key: documented (docs/orders.md "Global tables"), counted in the notes
as ``twin orders``, and checked to be detectable (both orders carry the key). Gapless rows: MREC
home Region exact 1..N under faults, every other Region refused; MRSC refused.

Replaying one schedule
    A schedule uses fresh keys, so what it inherits from the ones before is only where the run's
    seeded sources stand (each Region's faults, the replicator's delays, MRSC conflicts): a problem's
    note gives those positions (words drawn) and :func:`replay` runs that schedule alone on a fresh
    table from there, in seconds: the same calls meet the same faults and delays (ids start lower).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3

from counters.core.errors import CounterError, UnsupportedInMode
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.core.policy import RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.pointer import Pointer
from counters.services.orders import POINTER, Orders, order_id_from_pk, order_policy, placed_here
from proof.checker import Report
from proof.scenarios import FAULT_RATES
from testkit.faults import FaultInjector
from testkit.regions import Delays, GlobalTable, Mode

MREC_REGIONS = ("eu-west-1", "us-east-1")
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
RETRY = RetryPolicy(max_attempts=4, base_delay=0.0005, max_delay=0.002)
CONFLICTING = {"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems"}
RESENDS = 12
SHARD_REFRESH = 2.0


def policy(gt: GlobalTable, region: str, home: str = "") -> RegionPolicy:
    """The orders feature's policy in ``region`` of the emulated table, as its functions build it."""
    mode = GlobalTableMode.MRSC if gt.mode is Mode.MRSC else GlobalTableMode.MREC
    return order_policy(Topology(mode, region, tuple(sorted(gt.regions)), home))


class StreamFeed:
    """A Region's order pointer function: reads that Region's stream from the start and advances
    that Region's pointer to the greatest order id placed in that Region (``placed_here``), as
    functions/order_pointer does per batch. A failed advance is kept and retried on the next poll
    (the stream's retry)."""

    def __init__(self, gt: GlobalTable, region: str, pointer: Pointer, admin: Any) -> None:
        self.streams = gt.streams_client(region)
        self.arn = admin.describe_table(TableName=gt.table_name)["Table"]["LatestStreamArn"]
        self.pointer = pointer
        self.iterators: dict[str, str | None] = {}
        self.shards: tuple[float, list[dict[str, Any]]] | None = None
        self.waiting = 0  # the greatest id seen and not yet advanced to

    def poll(self) -> None:
        if self.shards is None or time.monotonic() - self.shards[0] > SHARD_REFRESH:
            self.shards = (time.monotonic(), self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"])
        for shard in sorted(self.shards[1], key=lambda s: s["SequenceNumberRange"]["StartingSequenceNumber"]):
            sid = shard["ShardId"]
            if sid not in self.iterators:
                self.iterators[sid] = self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=sid, ShardIteratorType="TRIM_HORIZON")[
                    "ShardIterator"
                ]
            while self.iterators.get(sid):
                page = self.streams.get_records(ShardIterator=self.iterators[sid], Limit=1000)
                self.iterators[sid] = page.get("NextShardIterator")
                if self.iterators[sid] is None:
                    self.shards = None  # a closed shard: its children are new shards
                for record in page.get("Records", []):
                    self._take(record)
                if not page.get("Records"):
                    break
        if self.waiting:
            result = self.pointer.advance(self.waiting)
            if result.outcome is not Outcome.CONTENTION:
                self.waiting = 0

    def _take(self, record: dict[str, Any]) -> None:
        if record["eventName"] != "INSERT":
            return
        data = record["dynamodb"]
        image = {k: next(iter(v.values())) for k, v in data.get("NewImage", {}).items()}
        order_id = order_id_from_pk(str(data["Keys"]["PK"]["S"]))
        if order_id is not None and placed_here(image, self.pointer.policy):
            self.waiting = max(self.waiting, order_id)


@dataclass
class Tally:
    """What one row accumulates over its schedules."""

    schedules: int = 0
    operations: int = 0
    faults: int = 0
    duplicates: int = 0
    bad_reads: int = 0
    breaches: int = 0
    acknowledged: int = 0
    unknown: int = 0
    orders: int = 0
    twins: int = 0
    failovers: int = 0
    partitions: int = 0
    pointer_reads: int = 0
    refused: int = 0
    problems: list[str] = field(default_factory=list)
    replays: list[str] = field(default_factory=list)  # how to run a schedule that made a problem alone

    def problem(self, text: str) -> None:
        if len(self.problems) < 5:
            self.problems.append(text)


@dataclass
class Region:
    name: str
    orders: Orders
    feed: StreamFeed
    admin: Any  # a plain client of this Region's table (checks; no faults)
    reads: list[int] = field(default_factory=list)


def _place(orders: Orders, key: str, customer: str, items: list[Any], tally: Tally) -> dict[str, Any] | None:
    """One client request, re-sent (same key and body) until answered; ``None`` if never."""
    for _ in range(RESENDS):
        try:
            return orders.place(key=key, customer_id=customer, items=items).order
        except UnsupportedInMode:
            raise
        except CounterError:  # 503 contention / 409 integrity: re-send the same request
            continue
    tally.unknown += 1
    return None


def _last_id(orders: Orders) -> int:
    """The last id this Region's sequence handed out (MRSC: the one sequence's)."""
    for _ in range(RESENDS):
        try:
            return orders.sequence.current()[0] or 0
        except CounterError:
            continue
    raise RuntimeError("the sequence could not be read")


def _latest(orders: Orders) -> int:
    """``GET /orders/latest`` as a client sends it: re-sent until answered (a 503 says re-send)."""
    for _ in range(RESENDS):
        try:
            return orders.pointer.read()[0] or 0
        except CounterError:
            continue
    raise RuntimeError("the pointer could not be read")


def drawn(state: tuple[Any, ...], origin: tuple[Any, ...]) -> int:
    """How many 32-bit words a ``random.Random`` drew from state ``origin`` to state ``state``."""
    probe, words = random.Random(), 0
    probe.setstate(origin)
    while probe.getstate() != state:
        probe.getrandbits(32)
        words += 1
    return words


def _admin(gt: GlobalTable, region: str) -> Any:
    physical = gt.store_region if gt.mode is Mode.MRSC else region
    # the emulator's credentials: DynamoDB Local keeps a database per (access key, Region)
    access, secret = os.environ.get("AWS_ACCESS_KEY_ID", "local"), os.environ.get("AWS_SECRET_ACCESS_KEY", "local")
    return boto3.session.Session(aws_access_key_id=access, aws_secret_access_key=secret, region_name=physical).client(
        "dynamodb", endpoint_url=gt.endpoint
    )


class Run:
    """One global table of one mode, its Regions' order services, pointer functions and faults."""

    def __init__(self, endpoint: str, mode: Mode, seed: int, tally: Tally) -> None:
        self.mode, self.tally = mode, tally
        self.regions = MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS
        self.gt = GlobalTable(endpoint, f"proof-rg-{uuid.uuid4().hex[:8]}", self.regions, mode, seed=seed, delays=Delays()).create()
        self.injectors: list[FaultInjector] = []
        self.where: dict[str, Region] = {}
        for name in self.regions:
            client = self.gt.client(name)
            injector = FaultInjector(client, seed=seed * 31 + len(self.injectors))  # MRSC too: each Region's own client
            for kind, rate in FAULT_RATES.items():
                injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)
            self.injectors.append(injector)
            here = policy(self.gt, name)
            orders = Orders(self.gt.table_name, mode="fast", dynamodb=client, retry=RETRY, policy=here)
            pointer = Pointer(self.gt.table_name, POINTER, attribute="orderId", dynamodb=client, retry=RETRY, policy=here)
            admin = _admin(self.gt, name)
            self.where[name] = Region(name, orders, StreamFeed(self.gt, name, pointer, admin), admin)
        self.answered_ids: dict[int, str] = {}  # every id answered, over every schedule -> its key
        self.sources = [injector.rng for injector in self.injectors] + list(self.gt.random_sources)
        self.origins = [rng.getstate() for rng in self.sources]
        self.seed = seed

    def skip(self, draws: tuple[int, ...]) -> None:
        """Move every seeded source on by its number of words (:func:`replay`)."""
        for rng, words in zip(self.sources, draws, strict=True):
            for _ in range(words):
                rng.getrandbits(32)

    def _trouble(self) -> int:
        return self.tally.duplicates + self.tally.bad_reads + self.tally.breaches

    def close(self) -> None:
        for injector in self.injectors:
            self.tally.faults += sum(injector.injected.values())
            injector.detach()
        self.gt.delete()

    def read_pointers(self, seed: int, *, settled: bool = False) -> dict[str, int]:
        """Every Region's ``GET /orders/latest``; answers the values read, by Region. During a
        schedule a read that fails (503) is left out; after settle (``settled``) it is re-sent until
        answered, so the check compares this answer and never an earlier read (issue 28: a failed
        final read left a read from before the heal in its place, a false breach)."""
        answers: dict[str, int] = {}
        for region in self.where.values():
            if settled:
                value = _latest(region.orders)
            else:
                try:
                    value = region.orders.pointer.read()[0] or 0
                except CounterError:
                    continue
            self.tally.pointer_reads += 1
            if region.reads and value < region.reads[-1]:
                self.tally.bad_reads += 1
                self.tally.problem(f"seed {seed}: {region.name}'s pointer went from {region.reads[-1]} to {value}")
            region.reads.append(value)
            answers[region.name] = value
        return answers

    def schedule(self, seed: int) -> None:
        rng, tally, gt, regions = random.Random(seed), self.tally, self.gt, self.regions
        states, trouble = [source.getstate() for source in self.sources], self._trouble()
        acknowledged: dict[str, int] = {}  # key -> the id its client was answered
        lost: dict[str, int] = {}  # key -> the id of an answer the client never saw (failover)
        body: dict[str, tuple[str, list[Any]]] = {}
        taken: list[int] = []  # every id an answer carried (seen or lost)

        def answer(key: str, order: dict[str, Any] | None) -> None:
            if order is None:
                return
            customer, items = body[key]
            if order["customerId"] != customer or order["items"] != items:
                tally.bad_reads += 1
                tally.problem(f"seed {seed}: key {key} answered with {order['customerId']}'s order {order['orderId']}")
                return
            order_id = int(order["orderId"])
            taken.append(order_id)
            if self.answered_ids.setdefault(order_id, key) != key:
                tally.duplicates += 1
                tally.problem(f"seed {seed}: id {order_id} answered for {self.answered_ids[order_id]} and {key}")
            acknowledged[key] = order_id

        steps = 5 if self.mode is Mode.MREC else 4
        cut = rng.randrange(0, steps - 1)  # the partition starts before step ``cut`` and lasts 2 steps
        pair = rng.sample(regions, 2)
        for step in range(steps):
            if step == cut:
                gt.partition(pair[0], pair[1])
                tally.partitions += 1
            if step == cut + 2:
                gt.advance(rng.uniform(60, 600))  # minutes of simulated partition
                gt.heal()
            region = self.where[rng.choice(regions)]
            key = f"s{seed}k{step}"
            body[key] = (f"c{seed}-{step}", [{"sku": f"s{rng.randrange(5)}", "quantity": 1 + rng.randrange(9)}])
            tally.operations += 1
            if rng.random() < 0.35:  # failover: the answer in this Region is lost; the client re-sends elsewhere
                tally.failovers += 1
                first = _place(region.orders, key, *body[key], tally)
                if first is not None:
                    lost[key] = int(first["orderId"])
                    taken.append(lost[key])
                gt.advance(rng.uniform(0, 2))
                other = self.where[rng.choice([r for r in regions if r != region.name])]
                answer(key, _place(other.orders, key, *body[key], tally))
            else:
                answer(key, _place(region.orders, key, *body[key], tally))
            gt.advance(rng.uniform(0, 3))
            if rng.random() < 0.7:
                self.where[rng.choice(regions)].feed.poll()
            if step % 2:
                self.read_pointers(seed)
        gt.heal()
        # settle; every Region's pointer function catches up; their writes replicate
        gt.settle()
        for region in self.where.values():
            region.feed.poll()
        for region in self.where.values():
            if region.feed.waiting:  # an advance that ran out of retries: the stream retries it
                region.feed.poll()
        gt.settle()
        settled = self.read_pointers(seed, settled=True)
        self.check(seed, acknowledged, lost, body, taken, settled)
        tally.acknowledged += len(acknowledged)
        tally.schedules += 1
        if self._trouble() > trouble and len(tally.replays) < 3:
            draws = tuple(drawn(state, origin) for state, origin in zip(states, self.origins, strict=True))
            tally.replays.append(f"replay {seed} alone: replay(endpoint, Mode.{self.mode.name}, {self.seed}, {seed}, draws={draws})")

    def check(
        self,
        seed: int,
        acknowledged: dict[str, int],
        lost: dict[str, int],
        body: dict[str, tuple[str, list[Any]]],
        taken: list[int],
        settled: dict[str, int],
    ) -> None:
        tally = self.tally
        for key, order_id in lost.items():
            if acknowledged.get(key, order_id) != order_id:
                if self.mode is Mode.MRSC:
                    tally.duplicates += 1
                    tally.problem(f"seed {seed}: key {key} made orders {order_id} and {acknowledged[key]}")
                else:
                    tally.twins += 1  # MREC failover before the key record replicated (documented)
        # every acknowledged order, in every Region: present, the key's own, its own items
        for region in self.where.values():
            keys = [{"PK": {"S": f"ORDER#{order_id}"}, "SK": {"S": "META"}} for order_id in sorted(set(acknowledged.values()))]
            found = {}
            if keys:
                page = region.admin.batch_get_item(RequestItems={self.gt.table_name: {"Keys": keys, "ConsistentRead": True}})
                found = {
                    int(i["orderId"]["N"]): i for i in page["Responses"][self.gt.table_name]
                }  # DynamoDB Local answers all of <= 100 keys
            for key, order_id in acknowledged.items():
                item = found.get(order_id)
                if item is None or item["idempotencyKey"]["S"] != key or item["customerId"]["S"] != body[key][0]:
                    tally.bad_reads += 1
                    tally.problem(
                        f"seed {seed}: acknowledged order {order_id} of {key} {'missing' if item is None else 'not its own'} in {region.name}"
                    )
        # the pointer: in every Region, the greatest order id that exists (ids past the greatest
        # answered one are looked up: an answer lost for good, or an id burned by a fault)
        first = self.where[self.regions[0]]
        greatest = max([*taken, tally.orders])  # tally.orders: the greatest of the schedules before
        ceiling = max(_last_id(r.orders) for r in self.where.values())
        for order_id in range(greatest + 1, ceiling + 1):
            if first.admin.get_item(
                TableName=self.gt.table_name, Key={"PK": {"S": f"ORDER#{order_id}"}, "SK": {"S": "META"}}, ConsistentRead=True
            ).get("Item"):
                greatest = order_id
        tally.orders = greatest
        for name in self.where:
            value = settled.get(name)
            if value != greatest:
                tally.breaches += 1
                tally.problem(f"seed {seed}: {name}'s pointer {value} after settle, greatest order {greatest}")
        # a late re-send of a key, in some Region: the key's own order
        for key in list(acknowledged)[:2]:
            region = self.where[random.Random(seed).choice(self.regions)]
            order = _place(region.orders, key, *body[key], tally)
            if order is not None and (order["customerId"], order["items"]) != body[key]:
                tally.bad_reads += 1
                tally.problem(f"seed {seed}: re-send of {key} in {region.name} answered another order")


class GaplessRun:
    """Gapless ids on one global table: MREC, the home Region takes 1..N under faults and every other
    Region is refused; MRSC, refused everywhere."""

    def __init__(self, endpoint: str, mode: Mode, seed: int, tally: Tally) -> None:
        self.mode, self.tally = mode, tally
        self.regions = MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS
        self.gt = GlobalTable(endpoint, f"proof-rg-{uuid.uuid4().hex[:8]}", self.regions, mode, seed=seed, delays=Delays()).create()
        self.home = self.regions[seed % len(self.regions)]
        self.injectors: list[FaultInjector] = []
        self.orders: dict[str, Orders] = {}
        for name in self.regions:
            injector = FaultInjector(self.gt.client(name), seed=seed * 17 + len(self.injectors))
            for kind, rate in FAULT_RATES.items():
                injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)
            self.injectors.append(injector)
            here = policy(self.gt, name, self.home)
            self.orders[name] = Orders(self.gt.table_name, mode="gapless", dynamodb=self.gt.client(name), retry=RETRY, policy=here)
        self.ids: list[int] = []

    def close(self) -> None:
        for injector in self.injectors:
            self.tally.faults += sum(injector.injected.values())
            injector.detach()
        self.gt.delete()

    def schedule(self, seed: int) -> None:
        rng, tally = random.Random(seed), self.tally
        for step in range(4):
            # MREC: three requests in the home Region (under the faults: the row's power), then one
            # anywhere (a refusal when it is not the home). A random Region for every step left a
            # fresh seed's 6 schedules with 4 placed orders and no fault met (UNDERPOWERED).
            name = self.home if self.mode is Mode.MREC and step < 3 else rng.choice(self.regions)
            tally.operations += 1
            try:
                order = _place(self.orders[name], f"g{seed}-{step}", "c", [{"sku": "s", "quantity": 1}], tally)
            except UnsupportedInMode:
                tally.refused += 1
                if self.mode is Mode.MREC and name == self.home:
                    tally.breaches += 1
                    tally.problem(f"seed {seed}: the home Region was refused")
                continue
            if self.mode is Mode.MRSC or name != self.home:
                tally.breaches += 1
                tally.problem(f"seed {seed}: gapless placed in {name} ({self.mode}, home {self.home})")
            if order is not None:
                self.ids.append(int(order["orderId"]))
                tally.acknowledged += 1
            self.gt.advance(rng.uniform(0, 2))
        if sorted(self.ids) != list(range(1, len(self.ids) + 1)):
            tally.breaches += 1
            tally.problem(f"seed {seed}: gapless ids {self.ids}")
        tally.orders = len(self.ids)
        tally.schedules += 1


def _report(name: str, tally: Tally, seconds: float) -> Report:
    if tally.twins:
        name += f"; failover re-sends that beat replication made a second order: {tally.twins} of {tally.failovers} (documented)"
    report = Report(
        name=name,
        operations=tally.operations,
        faults=tally.faults,
        over=0,
        under=0,
        duplicates=tally.duplicates,
        breaches=tally.breaches,
        bad_reads=tally.bad_reads,
        final=tally.orders,
        acknowledged=tally.acknowledged,
        possible=tally.operations,
        documented="exact",
        unknown=tally.unknown,
    )
    report.notes.append(f"{tally.schedules} schedules, {seconds:.1f} s")
    if tally.partitions or tally.failovers:
        report.notes.append(f"{tally.partitions} partitions, {tally.failovers} failovers, {tally.pointer_reads} pointer reads")
    if tally.twins:
        report.notes.append(f"{tally.twins} twin orders (MREC failover before the key record replicated: documented, both carry the key)")
    if tally.refused:
        report.notes.append(f"{tally.refused} gapless requests refused (unsupported_in_region_mode)")
    report.notes.extend(tally.problems)
    report.notes.extend(tally.replays)
    if tally.acknowledged and not tally.faults:  # a refusal-only row writes nothing a fault could hit
        report.unexercised.append("client faults")
    return report


def replay(endpoint: str, mode: Mode, seed: int, schedule: int, draws: tuple[int, ...]) -> Tally:
    """Schedule ``schedule`` (its own seed, e.g. 202611270026) of the ``mode`` row of a run seeded
    ``seed``, alone on a fresh table, its seeded sources first moved on by ``draws`` (as a problem's
    note gives them). What a schedule inherits from the ones before is only those positions (its
    keys are fresh; ids start lower), so its calls meet the same faults and delays as in the run."""
    tally = Tally()
    run = Run(endpoint, mode, seed, tally)
    try:
        run.skip(draws)
        run.schedule(schedule)
    finally:
        run.close()
    return tally


GAPLESS_MREC_MIN = 10
"""The gapless MREC row's floor: 30 orders in the home Region under the client faults (with 6, a
fresh seed met no fault and the row read UNDERPOWERED)."""


def scenarios(endpoint: str, seed: int, schedules: int = 150) -> list[Report]:
    """``schedules`` seeded schedules in all: 45 % MREC and 40 % MRSC fast ids + pointer, 10 %
    gapless on MREC (home Region; at least ``GAPLESS_MREC_MIN`` schedules, so its faults are met on
    any seed) and the rest gapless on MRSC (refused); one table per row."""
    counts = [max(1, schedules * share // 100) for share in (45, 40)]
    counts.append(max(GAPLESS_MREC_MIN, schedules * 10 // 100))
    counts.append(max(1, schedules - sum(counts)))
    rows: list[tuple[str, Mode, type[Run] | type[GaplessRun]]] = [
        ("orders + pointer (MREC, 2 Regions)", Mode.MREC, Run),
        ("orders + pointer (MRSC, 3 Regions)", Mode.MRSC, Run),
        ("orders gapless (MREC: home Region only)", Mode.MREC, GaplessRun),
        ("orders gapless (MRSC: refused)", Mode.MRSC, GaplessRun),
    ]
    reports = []
    for (name, mode, kind), count in zip(rows, counts, strict=True):
        tally, start = Tally(), time.monotonic()
        run = kind(endpoint, mode, seed, tally)
        try:
            for n in range(count):
                run.schedule(seed * 10_000 + n)
        finally:
            run.close()
        reports.append(_report(f"regions: {name}", tally, time.monotonic() - start))
    return reports
