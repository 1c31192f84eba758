"""Ledgers on a global table (issue 21): two MREC Regions on DynamoDB Local, and MRSC without transactions.

One DynamoDB Local process keeps a separate database per client Region, so a "Region" here is a client
with its own ``region_name``. Replication is modelled by :meth:`Regions.sync`: it makes the destination
hold the source Region's current version of every item the source Region writes. With one writing
Region per item (what these tests also check) that is exactly what MREC's last-writer-wins converges to,
whatever the delivery order; a partition is simply not calling it. Deliveries of some items before others
(a transaction's items replicate separately) are :meth:`Regions.sync` with ``only``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from counters.core.client import CLIENT_CONFIG
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.core.policy import TOGETHER, RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.ledger import Ledger, new_key, parse_key
from counters.services.ledgers import LedgerSettings, ledger_options
from counters.store.ledger_items import DIRTY_PK, ENTRY_PREFIX, SNAPSHOT, WITHDRAWN_PREFIX, entry_id_of, entry_writer
from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from tests.integration.test_ledger import Clock

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
A, B = "eu-west-1", "us-east-1"
MRSC_REGIONS = ("eu-west-1", "us-east-1", "us-west-2")
WINDOW, MARGIN = 5.0, 10.0  # the issue's scale-down of a 25-minute partition (seconds, fake clock)


def owner(pk: str, sk: str) -> str | None:
    """The Region a ledger item's key names as its writer (``None``: a shared item, no owner)."""
    if pk.startswith(DIRTY_PK + "#"):
        return pk[len(DIRTY_PK) + 1 :]
    if sk.startswith(ENTRY_PREFIX):
        return entry_writer(sk) or None
    if sk.startswith(SNAPSHOT + "#"):
        return sk[len(SNAPSHOT) + 1 :]
    if sk.startswith(WITHDRAWN_PREFIX):
        parts = sk.split("#")  # WITHDRAWN#<entryId>#<Region>#<requestId>
        return parts[2] if len(parts) == 4 else None
    return None


class Recording:
    """A Region's client that records the key of every write it sends (and may refuse transactions)."""

    def __init__(self, inner: Any, region: str, writes: list[tuple[str, str, str]], *, refuse_transactions: bool = False) -> None:
        self._inner = inner
        self._region = region
        self._writes = writes
        self._refuse = refuse_transactions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _note(self, key: dict[str, Any]) -> None:
        self._writes.append((self._region, key["PK"]["S"], key["SK"]["S"]))

    def put_item(self, **kwargs: Any) -> Any:
        self._note(kwargs["Item"])
        return self._inner.put_item(**kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        self._note(kwargs["Key"])
        return self._inner.update_item(**kwargs)

    def delete_item(self, **kwargs: Any) -> Any:
        self._note(kwargs["Key"])
        return self._inner.delete_item(**kwargs)

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self._refuse:  # as MRSC refuses them
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "MRSC: no transactions"}}, "TransactWriteItems")
        for action in kwargs["TransactItems"]:
            body = next(iter(action.values()))
            self._note(body.get("Key") or body["Item"])
        return self._inner.transact_write_items(**kwargs)


class Regions:
    """Two MREC Regions of one table on one DynamoDB Local, with replication by hand."""

    def __init__(self, endpoint: str, table: str, clock: Clock, regions: tuple[str, ...] = (A, B)) -> None:
        import boto3

        self.table, self.clock, self.regions = table, clock, regions
        self.writes: list[tuple[str, str, str]] = []
        self.raw = {
            r: boto3.client(
                "dynamodb",
                region_name=r,
                endpoint_url=endpoint,
                aws_access_key_id="local",
                aws_secret_access_key="local",
                config=CLIENT_CONFIG,
            )
            for r in regions
        }
        for client in self.raw.values():
            create_table(client, read_stack(table))

    def ledger(self, region: str, **kw: Any) -> Ledger:
        topology = Topology(GlobalTableMode.MREC, region, tuple(sorted(self.regions)))
        client = Recording(self.raw[region], region, self.writes)
        kw.setdefault("retry_window", WINDOW)
        kw.setdefault("margin", MARGIN)
        return Ledger(self.table, dynamodb=client, retry=FAST, clock=self.clock, policy=RegionPolicy.of(topology), **kw)  # type: ignore[arg-type]

    def items(self, region: str) -> dict[tuple[str, str], dict[str, Any]]:
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for page in self.raw[region].get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True):
            for item in page["Items"]:
                out[(item["PK"]["S"], item["SK"]["S"])] = item
        return out

    def sync(self, src: str, dst: str, only: Callable[[str, str], bool] = lambda pk, sk: True) -> int:
        """Deliver ``src``'s current version of each item it writes to ``dst`` (deletes included)."""
        have, there = self.items(src), self.items(dst)
        moved = 0
        for key in set(have) | set(there):
            if owner(*key) != src or not only(*key):
                continue
            if key in have and there.get(key) != have[key]:
                self.raw[dst].put_item(TableName=self.table, Item=have[key])
                moved += 1
            elif key not in have and key in there:
                self.raw[dst].delete_item(TableName=self.table, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}})
                moved += 1
        return moved

    def heal(self) -> None:
        for src in self.regions:
            for dst in self.regions:
                if src != dst:
                    self.sync(src, dst)

    def converged(self) -> bool:
        first = self.items(self.regions[0])
        return all(self.items(r) == first for r in self.regions[1:])


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def regions(dynamodb_endpoint: str, ddb: Any, clock: Clock) -> Regions:
    import uuid

    return Regions(dynamodb_endpoint, f"tally-regions-{uuid.uuid4().hex[:10]}", clock)


def balances(regions: Regions, ledger_id: str = "l1") -> list[int]:
    return [regions.ledger(r).balance(ledger_id).balance for r in regions.regions]


def assert_single_writer(regions: Regions) -> None:
    """Every write a Region sent names that Region as the item's writer: no item has two writing Regions."""
    assert regions.writes
    strays = [(region, pk, sk) for region, pk, sk in regions.writes if owner(pk, sk) != region]
    assert not strays, f"items written by a Region that does not own them: {strays}"


# ---------------------------------------------------------------------------- the issue's two failures
def test_an_entry_acknowledged_during_a_partition_is_never_stranded_by_another_regions_compaction(regions: Regions, clock: Clock) -> None:
    """Issue 21, "an entry stranded": during a partition B appends 10 and 20, A appends 1 and 2 (keys
    interleaved in time), then A compacts past its own later entry, which is after B's keys. With one
    checkpoint B's entries arrived below ``mergedThrough`` after the heal (balance 3 of 33); with a
    checkpoint per Region A's compaction covers A's entries only."""
    a, b = regions.ledger(A), regions.ledger(B)
    assert a.append("l1", 1, new_key(clock.now)).outcome is Outcome.APPLIED
    assert b.append("l1", 10, new_key(clock.now + 0.1)).outcome is Outcome.APPLIED
    assert b.append("l1", 20, new_key(clock.now + 0.2)).outcome is Outcome.APPLIED
    assert a.append("l1", 2, new_key(clock.now + 0.3)).outcome is Outcome.APPLIED
    clock.advance(WINDOW + MARGIN + 5)
    report = a.compact("l1")
    assert report.merged == 2 and report.checkpoint is not None
    b_ids = [entry_id_of(sk) for (_pk, sk) in regions.items(B) if sk.startswith(ENTRY_PREFIX)]
    assert all(str(report.checkpoint["mergedThrough"]) > entry_id for entry_id in b_ids)  # one checkpoint would strand them
    regions.heal()
    assert balances(regions) == [33, 33]
    assert b.compact("l1").merged == 2
    regions.heal()
    assert balances(regions) == [33, 33] and regions.converged()
    assert_single_writer(regions)


def test_a_stale_checkpoint_copy_never_reverts_another_regions_merge(regions: Regions, clock: Clock) -> None:
    """Issue 21, "a merge reverted": A appends 100 and 200 (replicated to B), partition, A compacts them
    (300, entries deleted); B appends 1000 through the settle fence (``clock_skew`` > ``margin``: every
    append takes the slow path). With one checkpoint, B's fence updated its stale copy of A's checkpoint
    and that copy won after the heal (1000 of 1300). Now B's fence touches B's checkpoint only."""
    a, b = regions.ledger(A), regions.ledger(B)
    assert a.clock_skew > MARGIN  # the slow path: the fence runs on every append
    for i, amount in enumerate((100, 200)):
        assert a.append("l1", amount, new_key(clock.now + i * 0.001)).outcome is Outcome.APPLIED
    regions.sync(A, B)
    clock.advance(WINDOW + MARGIN + 5)
    assert a.compact("l1").merged == 2  # partitioned from here on
    assert b.append("l1", 1000, new_key(clock.now)).outcome is Outcome.APPLIED
    assert balances(regions) == [300, 1300]  # A does not see B's entry yet; B still sees A's entries
    regions.heal()
    assert balances(regions) == [1300, 1300] and regions.converged()
    assert_single_writer(regions)


def test_a_transactions_items_arriving_separately_never_count_twice_and_converge(regions: Regions, clock: Clock) -> None:
    """A's compaction chunk replicates item by item: B may see the checkpoint before the deletes (the
    entries are at or below its ``mergedThrough``: ignored) or the deletes before the checkpoint (short
    until the checkpoint arrives: a lagging read, never an extra count); after the heal, exact."""
    a = regions.ledger(A)
    for i, amount in enumerate((5, 6, 7)):
        assert a.append("l1", amount, new_key(clock.now + i * 0.001)).outcome is Outcome.APPLIED
    regions.sync(A, B)
    clock.advance(WINDOW + MARGIN + 5)
    assert a.compact("l1").merged == 3
    regions.sync(A, B, only=lambda pk, sk: sk.startswith(SNAPSHOT))
    read = regions.ledger(B).balance("l1")
    assert (read.balance, read.pending_entries, read.ignored_entries) == (18, 0, 3)
    regions.sync(A, B)
    assert balances(regions) == [18, 18] and regions.converged()


# ---------------------------------------------------------------------------- failover
def test_a_failover_resend_of_a_replicated_entry_is_answered_duplicate_and_writes_nothing(regions: Regions, clock: Clock) -> None:
    """The entry A wrote has replicated: B answers the re-send from it (same entry id), writes nothing.
    Past the fast path (``margin`` < ``clock_skew``) B cannot fence A's checkpoint, so it refuses."""
    a, b = regions.ledger(A, clock_skew=1.0), regions.ledger(B, clock_skew=1.0)
    key = new_key(clock.now)
    first = a.append("l1", 5, key)
    assert first.outcome is Outcome.APPLIED
    regions.sync(A, B)
    again = b.append("l1", 5, key)
    assert (again.outcome, again.value) == (Outcome.DUPLICATE, first.value)  # the same entry id in both Regions
    assert b.append("l1", 6, key).reason == "key_reused"
    assert not [w for w in regions.writes if w[0] == B and w[2].startswith(ENTRY_PREFIX)]  # B wrote no entry
    assert regions.ledger(B).append("l1", 5, key).reason == "key_expired"  # skew 60 s > margin: cannot tell
    regions.heal()
    assert balances(regions) == [5, 5]


def test_a_failover_resend_during_a_partition_counts_once_per_region_and_every_read_reports_it(regions: Regions, clock: Clock) -> None:
    """The documented limit: B cannot see an entry A wrote that has not replicated yet, so a re-send of
    its key in B during a partition is counted in each Region. It is never silent: every balance read
    lists the entry id in ``duplicate_keys`` while both entries are pending (window + margin)."""
    a, b = regions.ledger(A), regions.ledger(B)
    key = new_key(clock.now)
    assert a.append("l1", 5, key).outcome is Outcome.APPLIED
    assert b.append("l1", 5, key).outcome is Outcome.APPLIED  # partitioned: B cannot know
    regions.heal()
    for region in regions.regions:
        read = regions.ledger(region).balance("l1")
        assert read.balance == 10 and read.duplicate_keys == [parse_key(key).entry_id]
        assert read.public("l")["duplicateKeys"] == read.duplicate_keys


# ---------------------------------------------------------------------------- one writing Region per item
def test_no_region_ever_writes_an_item_another_region_writes(regions: Regions, clock: Clock) -> None:
    """The guard for "a shared item gets a second writing Region": appends (fast and slow path),
    the fence, a withdrawal, compaction by ledger and by schedule, in both Regions, each write names the
    Region that sent it."""
    a, b = regions.ledger(A), regions.ledger(B, clock_skew=0.0)
    for i in range(3):
        assert a.append("l1", 1, new_key(clock.now + i * 0.01)).outcome is Outcome.APPLIED  # slow path (skew 60 > margin)
        assert b.append("l1", 10, new_key(clock.now + i * 0.01)).outcome is Outcome.APPLIED  # fast path
    regions.heal()
    later = new_key(clock.now + 1)
    assert b.append("l1", 100, later).outcome is Outcome.APPLIED
    fired: list[Any] = []

    def stall_past_the_margin(stage: str) -> None:  # B's Put lands behind B's own compaction: withdrawn
        if stage == "put_sending" and not fired:
            clock.advance(WINDOW + MARGIN + 5)
            fired.append(regions.ledger(B).compact("l1"))

    b.hook = stall_past_the_margin
    stranded = b.append("l1", 7, new_key(clock.now + 0.5))
    assert fired and (stranded.outcome, stranded.reason) == (Outcome.REJECTED, "key_expired")
    clock.advance(a.marker_bucket_ms / 1000)
    assert a.compact_due().ledgers and regions.ledger(B).compact_due() is not None
    regions.heal()
    assert balances(regions) == [133, 133] and regions.converged()
    assert any(sk.startswith(WITHDRAWN_PREFIX) for (_pk, sk) in regions.items(A))  # B's withdrawal record replicated
    assert_single_writer(regions)


# ---------------------------------------------------------------------------- MRSC: no transactions
@pytest.fixture
def mrsc(dynamodb_endpoint: str, ddb: Any, clock: Clock) -> Callable[..., Ledger]:
    """MRSC: one strongly consistent store seen from 3 Regions (one database), transactions refused."""
    import uuid

    import boto3

    table = f"tally-mrsc-{uuid.uuid4().hex[:10]}"
    raw = boto3.client(
        "dynamodb",
        region_name=A,
        endpoint_url=dynamodb_endpoint,
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=CLIENT_CONFIG,
    )
    create_table(raw, read_stack(table))
    writes: list[tuple[str, str, str]] = []

    def build(region: str = A, **kw: Any) -> Ledger:
        kw.setdefault("retry_window", WINDOW)
        kw.setdefault("margin", MARGIN)
        client = Recording(raw, region, writes, refuse_transactions=True)
        topology = Topology(GlobalTableMode.MRSC, region, MRSC_REGIONS)
        return Ledger(table, dynamodb=client, retry=FAST, clock=clock, policy=RegionPolicy.of(topology), **kw)  # type: ignore[arg-type]

    return build


def test_mrsc_compaction_needs_no_transactions_and_reads_stay_exact(mrsc: Callable[..., Ledger], clock: Clock) -> None:
    ledgers = [mrsc(r) for r in MRSC_REGIONS]
    total = 0
    for i in range(12):
        amount = i + 1
        assert ledgers[i % 3].append("l1", amount, new_key(clock.now + i * 0.001)).outcome is Outcome.APPLIED
        total += amount
    key = new_key(clock.now)
    assert ledgers[1].append("l1", 1, key).outcome is Outcome.APPLIED
    assert ledgers[2].append("l1", 1, key).outcome is Outcome.DUPLICATE  # one entry per key in every Region
    total += 1
    clock.advance(WINDOW + MARGIN + 5)
    crashed: list[int] = []

    def crash_after_the_checkpoint_moved(stage: str) -> None:
        if stage == "chunk_committed" and not crashed:
            crashed.append(1)
            raise RuntimeError("compactor crashed before deleting its chunk")

    ledgers[0].hook = crash_after_the_checkpoint_moved
    with pytest.raises(RuntimeError):
        ledgers[0].compact("l1", chunk_size=5)
    read = ledgers[1].balance("l1", verify=True)
    assert (read.balance, read.ignored_entries) == (total, 5)  # merged, not yet deleted: ignored, not recounted
    ledgers[0].hook = None
    report = ledgers[2].compact("l1", chunk_size=5)
    assert report.merged == 8 and report.complete
    read = ledgers[0].balance("l1")
    assert (read.balance, read.pending_entries, read.ignored_entries) == (total, 0, 0)


@pytest.mark.parametrize("fate", ["stranded", "merged_delete_pending"])
def test_mrsc_settling_a_slow_append_without_a_transaction(mrsc: Callable[..., Ledger], clock: Clock, fate: str) -> None:
    """A Put landing behind a compaction is withdrawn with single-item writes (record, then delete) and
    refused; an entry merged whose delete is still pending (in the checkpoint's list) is acknowledged."""
    appender, compactor = mrsc(B), mrsc(A)
    assert compactor.append("l1", 100, new_key(clock.now + 1.0)).outcome is Outcome.APPLIED
    fired: list[Any] = []

    def stall(stage: str) -> None:
        if fate == "stranded" and stage == "put_sending" and not fired:
            clock.advance(WINDOW + MARGIN + 5)
            fired.append(compactor.compact("l1"))
        if fate == "merged_delete_pending" and stage == "entry_written" and not fired:
            clock.advance(WINDOW + MARGIN + 5)
            compactor.hook = crash
            with pytest.raises(RuntimeError):
                compactor.compact("l1")
            fired.append(1)

    def crash(stage: str) -> None:
        if stage == "chunk_committed":
            raise RuntimeError("the chunk's deletes never ran")

    appender.hook = stall
    result = appender.append("l1", 7, new_key(clock.now))
    assert fired
    compactor.hook = None
    if fate == "stranded":
        assert (result.outcome, result.reason) == (Outcome.REJECTED, "key_expired")
        assert compactor.balance("l1").balance == 100
    else:
        assert result.outcome is Outcome.APPLIED
        assert compactor.balance("l1").balance == 107
        assert compactor.compact("l1").complete
        read = compactor.balance("l1")
        assert (read.balance, read.ignored_entries) == (107, 0)


# ---------------------------------------------------------------------------- settings
def test_clock_skew_and_topology_come_from_the_environment() -> None:
    env = {
        "TABLE_NAME": "t",
        "LEDGER_CLOCK_SKEW_SECONDS": "5",
        "GLOBAL_TABLE_MODE": "mrec",
        "AWS_REGION": B,
        "TABLE_REGIONS": f"{B},{A}",
    }
    settings = LedgerSettings.from_env(env)
    ledger = Ledger("t", **ledger_options(settings))
    assert (ledger.clock_skew, ledger.writer, ledger.policy.readers) == (5.0, B, (A, B))
    single = Ledger("t", **ledger_options(LedgerSettings.from_env({"TABLE_NAME": "t"})))
    assert (single.clock_skew, single.writer, single.store.writes) == (60.0, "", TOGETHER)


# ---------------------------------------------------------------------------- the same on the local global table (LWW replicator)
@pytest.fixture
def global_table(dynamodb_endpoint: str) -> Any:
    from testkit.regions import Delays, GlobalTable, Mode

    made: list[Any] = []

    def build(seed: int = 7) -> Any:
        gt = GlobalTable(
            dynamodb_endpoint, f"gt-ledger-{uuid4_hex()}", (A, B), Mode.MREC, seed, Delays.fixed(0.7)
        ).create()  # the issue's lag
        made.append(gt)
        return gt

    yield build
    for gt in made:
        gt.delete()


def uuid4_hex() -> str:
    import uuid

    return uuid.uuid4().hex[:10]


def emulated(gt: Any, region: str, **kw: Any) -> Ledger:
    kw.setdefault("retry_window", WINDOW)
    kw.setdefault("margin", MARGIN)
    topology = Topology(GlobalTableMode.MREC, region, (A, B))
    return Ledger(gt.table_name, dynamodb=gt.client(region), retry=FAST, clock=gt.clock.now, policy=RegionPolicy.of(topology), **kw)


@pytest.mark.parametrize("clock_skew", [0.0, 60.0])  # the fast and the slow append path, as the issue measured both
def test_on_the_emulator_the_issues_stranded_entry_and_reverted_merge_hold(global_table: Callable[..., Any], clock_skew: float) -> None:
    gt = global_table()
    a, b = emulated(gt, A, clock_skew=clock_skew), emulated(gt, B, clock_skew=clock_skew)
    # the reverted merge: A's 100 and 200 replicate, then A compacts them during a partition while B appends 1000
    for amount in (100, 200):
        assert a.append("merge", amount, new_key(gt.clock.now())).outcome is Outcome.APPLIED
        gt.advance(0.01)
    gt.settle()
    gt.partition(A, B)
    # the stranded entry: during the partition B appends 10 and 20, A appends 1 and 2, keys interleaved
    for ledger, amount in ((a, 1), (b, 10), (b, 20), (a, 2)):
        assert ledger.append("strand", amount, new_key(gt.clock.now())).outcome is Outcome.APPLIED
        gt.advance(0.1)
    gt.advance(WINDOW + MARGIN + 5)
    assert a.compact("merge").merged == 2 and a.compact("strand").merged == 2  # past its own later entry, after B's keys
    assert b.append("merge", 1000, new_key(gt.clock.now())).outcome is Outcome.APPLIED
    gt.advance(60.0)
    gt.heal()
    gt.settle()
    strand, merge = ([emulated(gt, r).balance(ledger_id).balance for r in (A, B)] for ledger_id in ("strand", "merge"))
    assert (strand, merge) == (
        [33, 33],
        [1300, 1300],
    )  # one shared checkpoint: [3, 3] and, on the slow path, [1000, 1000], as the issue measured
    assert b.compact("strand").merged == 2
    gt.settle()
    assert [emulated(gt, r).balance("strand").balance for r in (A, B)] == [33, 33] and gt.converged()
