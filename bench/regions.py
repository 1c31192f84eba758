"""``make bench``'s Regions section: a global table emulated locally (testkit.regions, docs/regions-emulator.md).

Three tables, each as Markdown lines for docs/bench-results.md (docs/regions.md explains them):

* **Convergence after heal.** For each subject (a way of counting whose every Region must end up
  reading the exact value) and each of N seeds: a fresh key, a partition between the two Regions,
  seeded writes in both Regions during it (the emulator's seeded delays, reordering and
  duplicates), then the heal. From the heal on, simulated time moves in small steps (50 ms, or 10 %
  of the time since the heal, whichever is larger) until every Region reads the exact value: that
  time in simulated seconds and the wall time the emulator took to get there, p50/p99 over seeds.
  A subject whose Regions end identical but not exact (the plain ``ADD``) lost updates: counted,
  never timed. Subjects are :data:`SUBJECTS`; the per-Region likes and ledger readers join it at merge.
* **WCU per operation per mode** (none / mrec / mrsc), measured and by the cost model
  (bench/regions_model.py): the local write as DynamoDB Local reports it (``ConsumedCapacity``) plus,
  on MREC, every replicated write the emulator applied in the other Region, sized from that Region's
  stream (on AWS each one is a replicated write unit there); MRSC is one store in the emulator, so
  its replicated writes are the model's. Ratios are against single-Region measured in the same run.
* **Escrow transfer latency**: ``proof.regions.reservations.bench_transfer_latency`` when it exists.
"""

from __future__ import annotations

import importlib
import random
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bench.regions_model import REPLICAS, ItemWrite, expiry_units, item_size, model_units, percentile, ratio, write_units
from counters.core.regions import GlobalTableMode, Topology

REGIONS = ("eu-west-1", "us-east-1")
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
SINGLE_REGION = "ap-southeast-2"  # the single-Region table's own database on the same DynamoDB Local
MIN_STEP = 0.05  # simulated seconds between reads after the heal...
RESOLUTION = 0.10  # ...or this share of the time since the heal, whichever is larger
GIVE_UP = 6 * 3600.0  # simulated seconds after the heal: stop stepping, settle and judge


class Emulated(Protocol):
    """The part of ``testkit.regions.GlobalTable`` this module uses (its API: docs/regions-emulator.md)."""

    @property
    def clock(self) -> Any: ...
    def client(self, region: str) -> Any: ...
    def pump(self) -> None: ...
    def advance(self, seconds: float) -> None: ...
    def partition(self, a: str, b: str) -> None: ...
    def heal(self) -> None: ...
    def settle(self) -> float: ...
    def converged(self) -> bool: ...
    @property
    def regions(self) -> tuple[str, ...]: ...


# -- convergence after heal -------------------------------------------------------------------------
@dataclass(frozen=True)
class Table:
    """An emulated global table and its name."""

    gt: Emulated
    name: str

    def client(self, region: str) -> Any:
        return self.gt.client(region)


@dataclass(frozen=True)
class Subject:
    """What converges: ``prepare(table, key)`` once, ``write(table, region, key, i)`` returns the amount
    it acknowledged, ``read(table, region, key)`` the value that Region reads (consistently)."""

    name: str
    how: str
    write: Callable[[Table, str, str, int], int]
    read: Callable[[Table, str, str], int]
    prepare: Callable[[Table, str], None] = lambda table, key: None


@dataclass(frozen=True)
class Sample:
    seed: int
    exact: bool
    sim_seconds: float
    wall_ms: float
    lost: int = 0  # acknowledged minus read, when the Regions settled on a wrong value


def time_to_exact(gt: Emulated, read: Callable[[str], int], expected: int, regions: Sequence[str], seed: int) -> Sample:
    """Step simulated time from now (the heal) until every Region reads ``expected``.

    Regions that hold identical tables but read a wrong value have lost an update: the rest is
    settled, read again and, if still wrong, the sample is not exact (``lost`` = expected - the lowest read)."""
    healed, began = gt.clock.now(), time.perf_counter()
    check_at = 0.1  # simulated seconds since the heal at which to ask whether the Regions are identical (doubling)
    while True:
        values = [read(r) for r in regions]
        elapsed = gt.clock.now() - healed
        if all(v == expected for v in values):
            return Sample(seed, True, elapsed, (time.perf_counter() - began) * 1000)
        if elapsed >= GIVE_UP or (elapsed >= check_at and gt.converged()):
            gt.settle()
            values = [read(r) for r in regions]
            if all(v == expected for v in values):
                return Sample(seed, True, gt.clock.now() - healed, (time.perf_counter() - began) * 1000)
            return Sample(seed, False, gt.clock.now() - healed, (time.perf_counter() - began) * 1000, expected - min(values))
        if elapsed >= check_at:
            check_at *= 2
        gt.advance(max(MIN_STEP, RESOLUTION * elapsed))


def converge(
    table: Table, subject: Subject, seed: int, *, writes: int, partition_seconds: float, regions: Sequence[str] = REGIONS
) -> Sample:
    """One seeded partition: ``writes`` writes spread over the Regions and over the partition, then
    the heal, then :func:`time_to_exact`. Everything pending is settled before the next seed."""
    gt, rng = table.gt, random.Random(seed)
    key = f"s{seed}-{uuid.uuid4().hex[:6]}"
    subject.prepare(table, key)
    gt.settle()
    gt.partition(regions[0], regions[1])
    expected = 0
    for i in range(writes):
        expected += subject.write(table, rng.choice(regions), key, i)
        gt.advance(rng.uniform(0, 2 * partition_seconds / writes))
    gt.heal()
    sample = time_to_exact(gt, lambda r: subject.read(table, r, key), expected, regions, seed)
    gt.settle()
    return sample


@dataclass(frozen=True)
class Summary:
    subject: str
    how: str
    samples: int
    exact: int
    sim: tuple[float, float] | None  # p50, p99 simulated seconds (exact samples only)
    wall: tuple[float, float] | None  # p50, p99 wall ms
    lost: tuple[float, int] = (0.0, 0)  # mean and max lost, over the samples that were not exact


def summarize(subject: Subject, samples: Sequence[Sample]) -> Summary:
    exact = [s for s in samples if s.exact]
    wrong = [s.lost for s in samples if not s.exact]
    sim = (percentile([s.sim_seconds for s in exact], 50), percentile([s.sim_seconds for s in exact], 99)) if exact else None
    wall = (percentile([s.wall_ms for s in exact], 50), percentile([s.wall_ms for s in exact], 99)) if exact else None
    lost = (statistics.mean(wrong), max(wrong)) if wrong else (0.0, 0)
    return Summary(subject.name, subject.how, len(samples), len(exact), sim, wall, lost)


def _query(table: Table, region: str, pk: str) -> list[dict[str, Any]]:
    ddb, items, start = table.client(region), [], None
    while True:
        page = ddb.query(
            TableName=table.name,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
            **({"ExclusiveStartKey": start} if start else {}),
        )
        items += page.get("Items", [])
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def _counter_write(table: Table, region: str, key: str, i: int) -> int:
    amount = 1 + i % 5
    table.client(region).update_item(
        TableName=table.name,
        Key={"PK": {"S": f"BENCHCTR#{key}"}, "SK": {"S": f"REGION#{region}"}},
        UpdateExpression="ADD #n :n SET writerRegion = :r",
        ExpressionAttributeNames={"#n": "n"},
        ExpressionAttributeValues={":n": {"N": str(amount)}, ":r": {"S": region}},
    )
    return amount


def _sum(table: Table, region: str, pk: str, attribute: str) -> int:
    return sum(int(item[attribute]["N"]) for item in _query(table, region, pk) if attribute in item)


def _ledger_of(table: Table, region: str) -> Any:
    """The layer's ledger as ``region`` runs it on an MREC table (its own entries; the balance sums every Region's)."""
    from counters.core.policy import RegionPolicy
    from counters.primitives.ledger import Ledger

    topology = Topology(GlobalTableMode.MREC, region, tuple(sorted(table.gt.regions)))
    return Ledger(table.name, dynamodb=table.client(region), policy=RegionPolicy.of(topology))


def _ledger_append(table: Table, region: str, key: str, i: int) -> int:
    """The layer's append (approach 6) in ``region``; counts what it acknowledged."""
    from counters.core.outcome import Outcome
    from counters.primitives.ledger import new_key

    amount = 1 + i % 7
    result = _ledger_of(table, region).append(f"bench-{key}", amount, new_key())
    return amount if result.outcome is Outcome.APPLIED else 0


def _ledger_balance(table: Table, region: str, key: str) -> int:
    balance: int = _ledger_of(table, region).balance(f"bench-{key}").balance
    return balance


def _plain_add(table: Table, region: str, key: str, i: int) -> int:
    table.client(region).update_item(
        TableName=table.name,
        Key={"PK": {"S": f"BENCHADD#{key}"}, "SK": {"S": "META"}},
        UpdateExpression="ADD #n :one",
        ExpressionAttributeNames={"#n": "n"},
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    return 1


SUBJECTS: list[Subject] = [
    Subject(
        "per-Region counter",
        "one item per Region, `ADD` only in its own Region; a read sums the Regions' items",
        _counter_write,
        lambda table, region, key: _sum(table, region, f"BENCHCTR#{key}", "n"),
    ),
    Subject(
        "ledger balance (the layer, appends only)",
        "`Ledger.append` in either Region (an entry per request); `Ledger.balance` in each Region; no compaction",
        _ledger_append,
        _ledger_balance,
    ),
    Subject(
        "plain `ADD` on one item (the hazard)",
        "one item `ADD`ed in both Regions; last-writer-wins keeps one Region's version",
        _plain_add,
        lambda table, region, key: _sum(table, region, f"BENCHADD#{key}", "n"),
    ),
]
"""The convergence subjects; per-Region likes and ledger readers are appended at merge."""


def convergence(
    endpoint: str, *, seeds: int, writes: int, partition_seconds: float, subjects: Sequence[Subject] | None = None
) -> list[Summary]:
    """Every subject on one emulated MREC table (each subject and seed on keys of its own), ``seeds``
    partitions each."""
    from testkit.regions import GlobalTable, Mode

    name = f"bench-regions-{uuid.uuid4().hex[:8]}"
    table = Table(GlobalTable(endpoint, name, regions=REGIONS, mode=Mode.MREC, seed=1000, writers=False).create(), name)
    return [
        summarize(subject, [converge(table, subject, seed, writes=writes, partition_seconds=partition_seconds) for seed in range(seeds)])
        for subject in subjects or SUBJECTS
    ]


# -- WCU per operation per mode -----------------------------------------------------------------
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_METHODS = {
    "put_item": "PutItem",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "transact_write_items": "TransactWriteItems",
    "batch_write_item": "BatchWriteItem",
}


class Metered:
    """A DynamoDB client that asks every write for ``ConsumedCapacity`` and adds up the write units
    it reports (whatever client it wraps: botocore's, or the emulator's MRSC guard)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.write_units = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in _METHODS:
            return attr

        def call(**params: Any) -> Any:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")
            response = attr(**params)
            self.write_units += consumed_write_units(response)
            return response

        return call


def consumed_write_units(response: dict[str, Any]) -> float:
    consumed = response.get("ConsumedCapacity") or []
    entries = consumed if isinstance(consumed, list) else [consumed]
    return sum(float(e.get("WriteCapacityUnits", e.get("CapacityUnits", 0.0))) for e in entries)


class StreamTail:
    """Every record a Region's stream has shown since this tail was made (DynamoDB Streams API).

    Each read takes a new iterator after the last sequence number seen (an old iterator can be
    refused with TrimmedDataAccessException by DynamoDB Local)."""

    def __init__(self, streams: Any, ddb: Any, table: str) -> None:
        self.streams = streams
        self.arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self.last: dict[str, str] = {}
        self.records()  # skip what is already there

    def _iterator(self, shard: str) -> str | None:
        where = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": self.last[shard]}
            if shard in self.last
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        iterator: str | None = self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=shard, **where)["ShardIterator"]
        return iterator

    def records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]:
            sid = shard["ShardId"]
            iterator = self._iterator(sid)
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator)
                records = page.get("Records", [])
                if not records:
                    break
                out += records
                self.last[sid] = records[-1]["dynamodb"]["SequenceNumber"]
                iterator = page.get("NextShardIterator")
        return out


def replicated_units(record: dict[str, Any]) -> int:
    """Write units a replica spends applying one stream record (a delete: its old image's size)."""
    image = record["dynamodb"].get("NewImage") or record["dynamodb"].get("OldImage") or record["dynamodb"].get("Keys", {})
    return write_units(item_size(image))


@dataclass(frozen=True)
class Operation:
    """One operation: ``setup(ddb, table, key)`` once (a post, a resource), ``service(ddb, table)`` the
    service on the metered client, ``run(service, key, i)`` operation ``i``; ``key`` is a fresh name
    (post, resource, ledger) per measurement; ``model`` is the items it writes (the cost model)."""

    name: str
    model: tuple[ItemWrite, ...]
    service: Callable[[Any, str, Topology], Any]
    run: Callable[[Any, str, int], Any]
    setup: Callable[[Any, str, str, Topology], Any] = lambda ddb, table, key, topology: None
    on_mrsc: tuple[ItemWrite, ...] | None = None  # the items it writes on MRSC, when the design differs there

    def model_for(self, mode: GlobalTableMode) -> tuple[ItemWrite, ...]:
        return self.on_mrsc if mode is GlobalTableMode.MRSC and self.on_mrsc is not None else self.model


@dataclass
class Measured:
    local: float | None = None  # mean write units per operation in the Region it runs in
    replicated: float | None = None  # mean write units per operation applied in the other Regions
    refused: str = ""
    errors: list[str] = field(default_factory=list)


def _likes(ddb: Any, table: str, topology: Topology) -> Any:
    from counters.services.likes import Likes

    return Likes(table, dynamodb=ddb, topology=topology)


def _post(mode: str) -> Callable[[Any, str, str, Topology], Any]:
    return lambda ddb, table, key, topology: _likes(ddb, table, topology).posts.create_post(
        author_id="bench", body="bench", post_id=key, mode=mode
    )


def _like_run(likes: Any, key: str, i: int) -> Any:
    return likes.toggling.like(key, f"u{i}")


def _resource(strategy: str) -> Callable[[Any, str, str, Topology], Any]:
    def setup(ddb: Any, table: str, key: str, topology: Topology) -> Any:  # the META counter the primitive takes from
        from counters.services.reservations import Reservations

        return Reservations(table, dynamodb=ddb).create_resource(key, capacity=10**9, strategy=strategy)

    return setup


def _approach(strategy: str) -> Callable[[Any, str, Topology], Any]:
    def service(ddb: Any, table: str, topology: Topology) -> Any:  # a share is written like META: same units
        from counters.primitives.approaches import create

        return create(strategy, table, dynamodb=ddb)

    return service


def _reserve_run(approach: Any, key: str, i: int) -> Any:
    from counters.store.resources_counters import resource_key

    return approach.apply(resource_key(key), 1, token=f"{key}-{i}")


def _ledger(ddb: Any, table: str, topology: Topology) -> Any:
    from counters.core.policy import RegionPolicy
    from counters.primitives.ledger import Ledger

    return Ledger(table, dynamodb=ddb, policy=RegionPolicy.of(topology))


def _ledger_run(ledger: Any, key: str, i: int) -> Any:
    from counters.primitives.ledger import new_key

    return ledger.append(key, 1, new_key())


def _orders(ddb: Any, table: str, topology: Topology) -> Any:
    from counters.services.orders import Orders, order_policy

    return Orders(table, dynamodb=ddb, mode="fast", policy=order_policy(topology))


def _order_run(orders: Any, key: str, i: int) -> Any:
    return orders.place(key=f"{key}-{i}", customer_id="c", items=[{"sku": "a", "quantity": 1}])


AGGREGATOR_BATCH = 500  # template.yaml: the LikeAggregatorFunction's stream BatchSize (a full batch: the best case)

OPERATIONS: list[Operation] = [
    Operation(
        "like (standard)",
        (ItemWrite("like state", transactional=True), ItemWrite("tally", transactional=True)),
        _likes,
        _like_run,
        _post("standard"),
    ),
    Operation(
        "like (hot)", (ItemWrite("like state"), ItemWrite("tally (aggregator)", per=1 / AGGREGATOR_BATCH)), _likes, _like_run, _post("hot")
    ),
    Operation("ledger append", (ItemWrite("entry"),), _ledger, _ledger_run),
    Operation("reservation (atomic)", (ItemWrite("capacity"),), _approach("atomic"), _reserve_run, _resource("atomic")),
    Operation("reservation (crt)", (ItemWrite("capacity", transactional=True),), _approach("crt"), _reserve_run, _resource("crt")),
    Operation(
        "order (fast)",
        (ItemWrite("sequence"), ItemWrite("order", transactional=True), ItemWrite("key record", transactional=True, expires=True)),
        _orders,
        _order_run,
        # MRSC has no transactions: the key record and the order are two conditional Puts (docs/orders.md)
        on_mrsc=(ItemWrite("sequence"), ItemWrite("key record", expires=True), ItemWrite("order")),
    ),
]
"""The operations of the WCU table; the Region-aware versions replace these at merge (same names)."""


def describe_failure(exc: Exception) -> str:
    """``refused (...)`` for MRSC's refusal of transactions/TTL or the layer's UnsupportedInMode,
    ``failed (...)`` for anything else (then the run has a bug to look at)."""
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "") or getattr(exc, "code", "") or type(exc).__name__
    text = str(exc)
    if "not supported for global tables with multi-Region strong consistency" in text:
        return "refused (no transactions on MRSC)"
    if code == "unsupported_in_region_mode" or type(exc).__name__ == "UnsupportedInMode":
        return "refused (unsupported_in_region_mode)"
    return f"failed ({code})"


@dataclass
class Env:
    """One table in one mode, shared by every operation of the WCU table (each uses its own items):
    ``setup`` is a plain client of the first Region, ``ddb`` the metered one the operations use."""

    mode: GlobalTableMode
    table: str
    setup: Any
    ddb: Metered
    settle: Callable[[], Any] = lambda: None
    pump: Callable[[], Any] = lambda: None
    tails: list[StreamTail] = field(default_factory=list)
    topology: Topology = field(default_factory=Topology)
    """The Region the operations run in, as the layer sees it (per-Region items, strides, refusals)."""


def environment(endpoint: str, mode: GlobalTableMode) -> Env:
    """A fresh table in ``mode``: single-Region, or emulated across :data:`REGIONS` / :data:`MRSC_REGIONS`.

    The set-up of an operation (a post, a resource) goes through the plain client (on MRSC: past the
    emulator's guard): a set-up that needs a transaction is its approach's refusal to report, not
    this operation's cost."""
    import boto3

    from counters.core.client import CLIENT_CONFIG
    from devstack.dynamodb_local import create_table
    from devstack.template import read_stack

    table = f"bench-wcu-{uuid.uuid4().hex[:8]}"
    regions = (SINGLE_REGION,) if mode is GlobalTableMode.NONE else REGIONS if mode is GlobalTableMode.MREC else MRSC_REGIONS
    setup = boto3.session.Session(region_name=regions[0]).client("dynamodb", endpoint_url=endpoint, config=CLIENT_CONFIG)
    if mode is GlobalTableMode.NONE:
        create_table(setup, read_stack(table))
        return Env(mode, table, setup, Metered(setup))
    from testkit.regions import Delays, GlobalTable, Mode

    # one fixed delay: every version reaches the other Region in order (a reordered older version
    # is dropped by last-writer-wins and never written there, which would hide a billed write)
    gt = GlobalTable(endpoint, table, regions=regions, mode=Mode(mode.value), seed=7, delays=Delays.fixed(0.1), writers=False)
    gt.create()
    tails = [StreamTail(gt.streams_client(r), gt.client(r), table) for r in regions[1:]] if mode is GlobalTableMode.MREC else []
    topology = Topology(mode, regions[0], tuple(sorted(regions)))
    return Env(mode, table, setup, Metered(gt.client(regions[0])), gt.settle, gt.pump, tails, topology)


def measure(env: Env, op: Operation, samples: int) -> Measured:
    """``samples`` operations, after one warm-up (once-per-period writes, such as the ledger's dirty
    marker, stay out of the mean), in the first Region of ``env``."""
    result = Measured()
    try:
        env.settle()  # nothing of the previous operation left to replicate
        key = f"b{uuid.uuid4().hex[:10]}"
        while env.topology.home_of(key) != env.topology.region:  # MREC: a post is created in its id's home Region only
            key = f"b{uuid.uuid4().hex[:10]}"
        op.setup(env.setup, env.table, key, env.topology)
        service = op.service(env.ddb, env.table, env.topology)
        op.run(service, key, samples)
        env.settle()
        for tail in env.tails:
            tail.records()
        env.ddb.write_units = 0.0
        for i in range(samples):
            op.run(service, key, i)
            env.pump()  # each write stamped with its own write time, as on AWS
        env.settle()
    except Exception as exc:  # noqa: BLE001 - a refusal (MRSC: no transactions) or a failure: both are reported
        result.refused = describe_failure(exc)
        result.errors.append(f"{type(exc).__name__}: {exc}")
        return result
    result.local = env.ddb.write_units / samples
    if env.tails:
        result.replicated = sum(replicated_units(r) for tail in env.tails for r in tail.records()) / samples
    return result


@dataclass(frozen=True)
class WcuRow:
    operation: str
    mode: GlobalTableMode
    measured: Measured
    model: float | None
    expiry: float = 0.0
    """Model units of the later expiry of the items it writes with ``expiresAt`` (TTL; MRSC: the sweeper)."""


def wcu(endpoint: str, *, samples: int, operations: Sequence[Operation] | None = None) -> list[WcuRow]:
    """Every operation in every mode; one table per mode, made just before its operations run."""
    ops = list(operations or OPERATIONS)
    cells: dict[tuple[str, GlobalTableMode], WcuRow] = {}
    for mode in GlobalTableMode:
        env = environment(endpoint, mode)
        for op in ops:
            model = model_units(op.model_for(mode), mode)
            expiry = expiry_units(op.model_for(mode), mode) if model is not None else 0.0
            cells[op.name, mode] = WcuRow(op.name, mode, measure(env, op, samples), model, expiry)
    return [cells[op.name, mode] for op in ops for mode in GlobalTableMode]


def total(row: WcuRow) -> float | None:
    """Measured units over every Region: local plus replicated (MRSC: the model's replicated share)."""
    m = row.measured
    if m.local is None:
        return None
    if row.mode is GlobalTableMode.MRSC and row.model is not None:
        return m.local * REPLICAS[row.mode]  # one store in the emulator: each replica applies the same write
    return m.local + (m.replicated or 0.0)


# -- escrow transfer latency ------------------------------------------------------------------------
TRANSFER = ("proof.regions.reservations", "bench_transfer_latency")
TRANSFER_COLUMNS = ("samples", "completed", "sim_seconds", "wall_ms")  # shown first, in this order


def transfer_latency(endpoint: str, samples: int) -> dict[str, Any] | None:
    """``bench_transfer_latency(endpoint, samples)`` from the reservations' proof module, or ``None``.

    The dict's keys become columns, :data:`TRANSFER_COLUMNS` first, a nested dict one column per
    entry (``{"sim_seconds": {"p50": .., "p99": ..}}`` gives ``sim_seconds p50``, ``sim_seconds p99``):
    the reservations' proof returns ``samples``, ``sim_seconds`` and ``wall_ms`` (p50, p99, max) and
    ``poll_step_seconds``."""
    try:
        module = importlib.import_module(TRANSFER[0])
    except ImportError:
        return None
    fn = getattr(module, TRANSFER[1], None)
    if not callable(fn):
        return None
    try:
        result: dict[str, Any] = fn(endpoint, samples)
    except Exception as exc:  # noqa: BLE001 - the table says what failed; the rest of the bench still prints
        return {"failed": f"{type(exc).__name__}: {exc}"[:300]}
    return result


# -- the section ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    seeds: int = 20
    writes: int = 8
    partition_seconds: float = 300.0
    wcu_samples: int = 10
    transfers: int = 50

    @classmethod
    def quick(cls) -> Plan:
        return cls(seeds=5, writes=6, partition_seconds=120.0, wcu_samples=3, transfers=10)


def run(*, quick: bool) -> list[str]:
    """The section on a DynamoDB Local of its own (started without ``-sharedDb``: one database per
    client Region, which the emulator builds its Regions on), the layer's default client pointed at it."""
    import os

    from counters.core import client
    from devstack.dynamodb_local import DynamoDBLocal

    with DynamoDBLocal() as ddb_local:
        previous = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
        client.reset_client()
        try:
            return section(ddb_local.endpoint, Plan.quick() if quick else Plan())
        finally:
            if previous is None:
                os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
            else:
                os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = previous
            client.reset_client()


def section(endpoint: str, plan: Plan) -> list[str]:
    """Run the three measurements and return their Markdown (bench/report.py's style)."""
    began = time.perf_counter()
    try:
        import testkit.regions  # noqa: F401
    except ImportError:
        return ["", "## Across Regions", "", "Not measured: the emulator (testkit/regions.py) is not on this branch."]
    summaries = convergence(endpoint, seeds=plan.seeds, writes=plan.writes, partition_seconds=plan.partition_seconds)
    rows = wcu(endpoint, samples=plan.wcu_samples)
    transfer = transfer_latency(endpoint, plan.transfers)
    return [
        *convergence_table(summaries, plan),
        *wcu_table(rows, plan),
        *transfer_table(transfer),
        "",
        f"The Regions section took {time.perf_counter() - began:.0f} s of wall time.",
    ]


def _pair(values: tuple[float, float] | None, fmt: str) -> str:
    return "-" if values is None else f"{values[0]:{fmt}} / {values[1]:{fmt}}"


def convergence_table(summaries: Sequence[Summary], plan: Plan) -> list[str]:
    lines = [
        "",
        "## Across Regions: convergence after heal (MREC, emulated)",
        "",
        f"Two Regions ({', '.join(REGIONS)}) on the local emulator (docs/regions-emulator.md). Per subject, {plan.seeds} seeds: "
        f"a partition of ~{plan.partition_seconds:g} simulated seconds with {plan.writes} writes spread over both Regions "
        "(the emulator's seeded delays, reordering and duplicates), then the heal. From the heal, simulated time moves "
        f"in steps of {MIN_STEP * 1000:.0f} ms or {RESOLUTION:.0%} of the time since the heal (the resolution), reading "
        "every Region (consistent reads) after each step, until all read the exact acknowledged value. Wall = the "
        "emulator's work and the reads on this machine, not AWS's replication; the simulated time is what the emulator's "
        "delays model. A row that is not exact lost acknowledged updates for good (its Regions ended identical).",
        "",
        "| subject | how it counts | exact / seeds | heal to exact p50 / p99 (simulated s) | p50 / p99 (wall ms) | lost per wrong seed (mean / max) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lost = "-" if s.exact == s.samples else f"{s.lost[0]:.1f} / {s.lost[1]}"
        lines.append(f"| {s.subject} | {s.how} | {s.exact} / {s.samples} | {_pair(s.sim, '.2f')} | {_pair(s.wall, '.0f')} | {lost} |")
    lines += ["", "MRSC needs no convergence row: one strongly consistent store, every Region reads the exact value once a write returns."]
    return lines


def _num(value: float | None, refused: str = "") -> str:
    if refused:
        return refused
    return "-" if value is None else f"{value:.2f}"


def wcu_table(rows: Sequence[WcuRow], plan: Plan) -> list[str]:
    lines = [
        "",
        "## Across Regions: write units per operation per mode (measured and by the cost model)",
        "",
        f"Each cell: {plan.wcu_samples} operations in {REGIONS[0]} after one warm-up, on one table per mode (each operation "
        "on keys of its own); on MREC the emulator runs with one fixed delay and ships each write on its own, so every "
        "replicated write is applied and seen. Local = `ConsumedCapacity` as DynamoDB Local "
        "reports it (a constant for multi-item transactions: the model is what AWS bills); replicated = the writes the "
        f"emulator applied in the other Region, sized from its stream (1 unit per KB each). MREC: {REPLICAS[GlobalTableMode.MREC]} "
        f"Regions; MRSC: {REPLICAS[GlobalTableMode.MRSC]} replicas, one store in the emulator, so its measured total is the local "
        "units times 3. Model: bench/regions_model.py and docs/regions.md (units, not prices: replicated units are priced "
        "like single-Region ones). Ratios are against the `none` row of the same operation, measured in this run. "
        "Expiry (model only, it happens later: an order's key record after its window, IdempotencyWindowDays) = the units of deleting what the operation "
        "wrote with `expiresAt`: free by TTL in one Region, the replicated deletes on MREC, the expiry sweeper's deletes "
        "on MRSC (no TTL there; docs/regions.md).",
        "",
        "| operation | mode | local units/op | replicated units/op (other Regions) | total measured | vs none | model total | model vs none "
        "| expiry units/op (model) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base: dict[str, tuple[float | None, float | None]] = {r.operation: (total(r), r.model) for r in rows if r.mode is GlobalTableMode.NONE}
    for r in rows:
        measured_base, model_base = base.get(r.operation, (None, None))
        m = r.measured
        lines.append(
            f"| {r.operation} | {r.mode.value} | {_num(m.local, m.refused)} | {_num(m.replicated)} | {_num(total(r))} "
            f"| {ratio(total(r), measured_base)} | {_num(r.model) if r.model is not None else 'refused'} | {ratio(r.model, model_base)} "
            f"| {_num(r.expiry) if r.model is not None else '-'} |"
        )
    failed = [f"{r.operation} ({r.mode.value}): {r.measured.errors[0][:240]}" for r in rows if r.measured.errors]
    if failed:
        lines += ["", "Why the refused or failed cells have no figure: " + "; ".join(failed) + "."]
    return lines


def transfer_table(result: dict[str, Any] | None) -> list[str]:
    lines = [
        "",
        "## Across Regions: escrow transfer latency (reservations)",
        "",
        "A transfer moves capacity from one Region's share to another's in two idempotent steps (docs/regions.md): "
        "from the request in the giving Region to the share usable in the receiving Region, over the emulator's delays.",
        "",
    ]
    if result is None:
        return [*lines, "not available (proof.regions.reservations.bench_transfer_latency is not on this branch)"]
    keys = [c for c in TRANSFER_COLUMNS if c in result] + sorted(k for k in result if k not in TRANSFER_COLUMNS)
    flat: list[tuple[str, Any]] = []
    for k in keys:
        value = result[k]
        flat += [(f"{k} {sub}", v) for sub, v in value.items()] if isinstance(value, dict) else [(k, value)]
    cells = [f"{v:.2f}" if isinstance(v, float) else str(v) for _, v in flat]
    return [*lines, "| " + " | ".join(k for k, _ in flat) + " |", "|" + "---:|" * len(flat), "| " + " | ".join(cells) + " |"]
