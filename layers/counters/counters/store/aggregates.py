"""A stream aggregator's write: a tally and its per-lane checkpoints on a parent item.

Generic over the attribute names (tally, checkpoint ``<seq>``, watermark ``<at>``, ``<probe>``,
revision, lag); [`counters.store.posts`][counters.store.posts] instantiates it for likes on a post's ``META``. The
rules (lanes, runs, exactly once) are [`counters.primitives.aggregator`][counters.primitives.aggregator]'s; this module builds
the one conditional UpdateItem, sends it through [`counters.core.engine`][counters.core.engine] and answers what
a refusal found ([`Checkpointed`][counters.store.aggregates.Checkpointed]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from enum import Enum
from typing import NamedTuple

from counters.core.client import DynamoDBClient, client
from counters.core.engine import Report, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass
from counters.store.expr import Check, Cond, Key, Path, Transaction, Update, all_of, if_not_exists, old_item


class LaneRun(NamedTuple):
    """The records of one lane a write applies, as a contiguous run (sequence numbers padded)."""

    lane: str
    first: str
    last: str
    created_ms: int  # the latest record's approximate creation time
    probe: str | None = None  # the last probe token in the run


@dataclass(frozen=True)
class Checkpointed:
    """What one aggregator write did: its report and, when refused, whether the parent (with its
    checkpoint map) was there and the checkpoint stored for each lane (padded sequence numbers)."""

    report: Report
    parent_found: bool = True
    applied: Mapping[str, str] = field(default_factory=dict)


def lane_not_applied(seq: Path, first: str) -> Cond:
    """The checkpoint condition: the lane's checkpoint is below the run's first record (or the lane
    has none): nothing of the run was applied."""
    return seq.missing() | (seq < first)


class CheckpointStore:
    """The aggregator's requests on parent items of one table."""

    def __init__(
        self,
        table_name: str,
        key_of: Callable[[str], Key],
        *,
        tally_attribute: str,
        seq_attribute: str,
        at_attribute: str,
        probe_attribute: str,
        revision_attribute: str | None = None,
        lag_attribute: str | None = None,
        writer: tuple[str, str] | None = None,
        groups: Groups | None = None,
        pk: str = "PK",
        dynamodb: DynamoDBClient | None = None,
    ) -> None:
        """``writer`` (attribute, Region): the parent is this Region's own item on a global table;
        each write names the Region, and [`create`][counters.store.aggregates.CheckpointStore.create] makes the parent when it is missing.
        ``groups``: lanes past the first group are counted on items of their own ([`Groups`][counters.store.aggregates.Groups])."""
        self.writer = writer
        self.groups = groups
        self.table_name = table_name
        self.key_of = key_of
        self.tally, self.seq, self.at, self.probe = tally_attribute, seq_attribute, at_attribute, probe_attribute
        self.revision, self.lag, self.pk = revision_attribute, lag_attribute, pk
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client: the one given, or the process's."""
        return self._dynamodb or client()

    def group_of(self, lane: str) -> int:
        """The group whose item counts ``lane`` (0: the parent itself)."""
        return 0 if self.groups is None else self.groups.of(lane)

    def key(self, parent: str, group: int = 0) -> Key:
        """The item a group of the parent's lanes is counted on (group 0: the parent)."""
        if group == 0 or self.groups is None:
            return self.key_of(parent)
        return self.groups.key(parent, group)

    def update(self, parent: str, runs: list[LaneRun], net: int, changes: int, lag_ms: int | None, group: int = 0) -> Update:
        """``ADD tally net, revision changes  SET seq.lane = last, at.lane = created (, probe.lane,
        lag)`` if the parent (or the group's item) has its checkpoint map and every lane's
        checkpoint is below its run."""
        update = Update(self.table_name, self.key(parent, group))
        condition = all_of(Path(self.pk).exists(), Path(self.seq).exists())
        for run_ in runs:
            update.set(Path(self.seq, run_.lane), run_.last).set(Path(self.at, run_.lane), run_.created_ms)
            if run_.probe is not None:
                update.set(Path(self.probe, run_.lane), run_.probe)
            condition = all_of(condition, lane_not_applied(Path(self.seq, run_.lane), run_.first))
        if self.lag and lag_ms is not None:
            update.set(self.lag, lag_ms)
        if self.writer is not None:
            update.set(*self.writer)
        update.add(self.tally, net)
        if self.revision:
            update.add(self.revision, changes)
        assert condition is not None
        return update.when(condition)  # ALL_OLD on failure: the stored checkpoints, what is already applied

    def apply(
        self,
        parent: str,
        runs: list[LaneRun],
        net: int,
        changes: int,
        lag_ms: int | None,
        *,
        policy: RetryPolicy,
        capacity: Capacity,
        group: int = 0,
    ) -> Checkpointed:
        """One parent's runs (of one group of its lanes) as one conditional UpdateItem."""
        params = self.update(parent, runs, net, changes, lag_ms, group).params()
        report = run(self.dynamodb.update_item, params, policy=policy, capacity=capacity, write=True)
        if report.failure is None:
            return Checkpointed(report)
        stored = old_item(report.failure)
        if not stored or self.seq not in stored:
            return Checkpointed(report, parent_found=False)
        return Checkpointed(report, applied={str(lane): str(seq) for lane, seq in (stored.get(self.seq) or {}).items()})

    def create(self, parent: str, *, policy: RetryPolicy, capacity: Capacity) -> bool:
        """A Region's own parent item (``writer`` set) with its tally, revision and empty checkpoint
        maps where they are missing (a like's transaction may have made the item with its tally
        alone). Only this Region writes the item. False if the write did not go through."""
        if self.writer is None:
            raise ValueError("only a Region's own parent item is created by its aggregator")
        update = Update(self.table_name, self.key_of(parent)).set(*self.writer)
        for name, empty in ((self.tally, 0), (self.revision, 0), (self.seq, {}), (self.at, {}), (self.probe, {})):
            if name:
                update.set(name, if_not_exists(name, empty))
        report = run(self.dynamodb.update_item, update.params(), policy=policy, capacity=capacity, write=True)
        return report.failure is None

    def create_group(self, parent: str, group: int, *, policy: RetryPolicy, capacity: Capacity) -> bool | None:
        """A group's item with its tally, revision and empty checkpoint maps where they are missing,
        in one transaction with a check that the parent exists: ``True`` made (or found), ``False``
        no parent (nothing written), ``None`` the write did not go through (contention)."""
        tx = self.group_creation(parent, group)
        report = run(
            self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=policy, capacity=capacity, write=True, token=True
        )
        if report.outcome is Outcome.APPLIED:
            return True
        if report.outcome is Outcome.REJECTED and tx.cancellation(report.failure).failed(GroupAction.PARENT):
            return False
        return None

    def group_creation(self, parent: str, group: int) -> Transaction[GroupAction]:
        """The TransactWriteItems of [`create_group`][counters.store.aggregates.CheckpointStore.create_group]."""
        if self.groups is None:
            raise ValueError("this aggregator counts every lane on its parent")
        update = Update(self.table_name, self.groups.key(parent, group)).set(self.groups.parent_attribute, parent)
        for name, empty in ((self.tally, 0), (self.revision, 0), (self.seq, {}), (self.at, {}), (self.probe, {})):
            if name:
                update.set(name, if_not_exists(name, empty))
        tx: Transaction[GroupAction] = Transaction()
        tx.check(GroupAction.PARENT, Check(self.table_name, self.key_of(parent)).when(Path(self.pk).exists()))
        return tx.update(GroupAction.GROUP, update)


class GroupAction(Enum):
    """The actions of a group item's creation."""

    PARENT = "parent"
    GROUP = "group"


@dataclass(frozen=True)
class Groups:
    """Where a parent with many lanes keeps its counts: lanes of group ``of(lane)`` >= 1 on the item
    ``key(parent, group)``, each with its own tally, revision and checkpoint maps, so the parent's
    item holds the maps of its first group only (a write's WCU follow the item's size). Each item's
    checkpoints guard its own lanes: exactly once holds per item as it does on the parent. A reader
    sums the items ([`counters.store.lane_groups.with_groups`][counters.store.lane_groups.with_groups])."""

    of: Callable[[str], int]
    key: Callable[[str, int], Key]
    parent_attribute: str  # names the parent on each group item (a scan can sum a parent's items)


def watermark(lanes: Mapping[str, object]) -> int | None:
    """The least lane watermark (ms), ``None`` before any."""
    return min((int(str(v)) for v in lanes.values()), default=None)
