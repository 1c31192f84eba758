"""A tally kept from the table's stream, exactly once: net change per parent, checkpointed per lane.

Writers change state items alone (one conditional write each, [`Toggle.set`][counters.primitives.toggle.Toggle.set] without a tally); each write records ``delta``, what it changed the
count by. The stream carries every committed write at least once; this aggregator turns a batch of
them into **one conditional UpdateItem per parent**:

    ADD <tally> :net  SET <seq>.<lane> = :last, <at>.<lane> = :created  (for every lane in the batch)
    IF  attribute_exists(<seq>) AND (attribute_not_exists(<seq>.<lane>) OR <seq>.<lane> < :first) ...

**Groups of lanes.** A parent with many lanes may count them on several items
([`Groups`][counters.store.aggregates.Groups]): the changes of a batch are grouped by parent and
by the item their lane is counted on, and each item gets its own conditional write, with its own
checkpoints: the rules below hold per item. A group's item is made by its first write, in one
transaction with a check that the parent exists.

**Lanes, not shards.** A lane is the partition key the changes were written under (the hot
mode spreads a post's likes over a few: ``S0``..``S7``). Lambda's stream records do not name
their shard, but every record of one partition key lives in one shard at a time, in write
order, and Lambda processes a parent shard before its children and keeps records of one
partition key in order (even with ParallelizationFactor > 1). So the partition key is the unit
whose records are totally ordered, and the checkpoint is kept per lane on the parent: the last
sequence number applied. Sequence numbers may be up to 40 digits (more than DynamoDB's 38-digit
numbers): they are stored as strings zero-padded to 40, which compare as the numbers do.

**Exactly once.** A lane's records are applied in order, as a contiguous run, so "applied" is
"at or below the lane's checkpoint". The condition lets a write through only when every lane's
checkpoint is below the run's first record; when it refuses, ``ALL_OLD`` gives the stored
checkpoints, the records at or below them are dropped and the rest is tried again (a batch
restarted from a failed record after other parents' writes, a bisected or redelivered batch, a
retry after an unknown outcome whose first attempt committed). Nothing left: ``duplicate``.

**Watermark.** ``<at>.<lane>`` is the approximate creation time (ms) of the last record applied
for the lane; the tally is exact as of the least of them ([`as_of`][counters.primitives.aggregator.as_of]).

**Lag.** With ``lag_attribute``, each write also sets it (top level, one number per parent)
to how long the oldest record it applies waited: the aggregator's clock at the write minus
that record's approximate creation time. It is the lag of what was pending when the aggregator
last counted for the parent, and it stays put while nothing new arrives (an idle parent is not
"behind"). A record not delivered yet is invisible to a reader of the parent (writers touch only
their own items: that is the point); the stream's iterator age watches for that.

**Probes.** A record may carry a ``probe`` token instead of a change (an item a reader wrote
into the lane): its write also sets ``<probe>.<lane>`` to the token. Since a lane's records
arrive in write order, "the parent shows the token" means "every change written to this lane
before the probe is in the tally": a point in the stream a reader can wait for and compare at
(the audit). ``<revision>`` counts the changes applied, so a reader can tell "nothing was
counted between two points" even when a like and an unlike cancel out in the tally.

The write itself (and the checkpoint condition, [`counters.store.aggregates.lane_not_applied`][counters.store.aggregates.lane_not_applied])
is [`counters.store.aggregates`][counters.store.aggregates]'; a family's store instantiates it (likes:
[`counters.store.posts`][counters.store.posts]).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from enum import StrEnum
from typing import NamedTuple

from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.store.aggregates import CheckpointStore, LaneRun, watermark

SEQ_WIDTH = 40  # DynamoDB Streams sequence numbers are 21 to 40 digits
ROUNDS = 4  # re-decided this often when the checkpoints refuse a write, then contention


def padded(sequence_number: str) -> str:
    """A stream sequence number as a fixed-width string: compared as text, ordered as the number."""
    if not sequence_number.isdigit() or len(sequence_number) > SEQ_WIDTH:
        raise ValueError(f"not a stream sequence number: {sequence_number!r}")
    return sequence_number.zfill(SEQ_WIDTH)


class Reason(StrEnum):
    """Why a parent's write did not apply (``Result.reason``)."""

    CHECKPOINTED = "checkpointed"
    PARENT_MISSING = "parent_missing"
    CHECKPOINT_MOVING = "checkpoint_moving"


class Change(NamedTuple):
    """One stream record's effect: ``delta`` on ``parent``'s tally, in ``lane`` at ``seq``."""

    parent: str  # the parent's id (e.g. a post id), the grouping key
    lane: str  # the partition key it was written under, as a short name (e.g. "S3")
    seq: str  # the record's sequence number (any width up to 40 digits)
    delta: int
    created_ms: int = 0
    probe: str | None = None  # a probe's token (``delta`` 0): see the module doc


@dataclass
class Applied:
    """What one parent's write did: ``result`` (applied / duplicate / rejected parent_missing /
    contention), the net it added, and the records it covered (first seq of each lane)."""

    parent: str
    result: Result
    net: int = 0
    changes: list[Change] = field(default_factory=list)


def as_of(lanes: Mapping[str, object]) -> int | None:
    """The watermark of a parent: the least lane watermark (ms) of its ``<at>`` map, ``None`` before any."""
    return watermark(lanes)


class Aggregator:
    """Applies stream changes to a tally on parent items, once each (``store``: the requests)."""

    def __init__(self, store: CheckpointStore, *, retry: RetryPolicy | None = None, clock: Callable[[], int] | None = None) -> None:
        self.store = store
        self.clock = clock or (lambda: int(time.time() * 1000))  # ms
        self.retry = retry or RetryPolicy()

    def apply(self, changes: Iterable[Change]) -> list[Applied]:
        """One write per parent (and per group of its lanes counted on an item of its own), in order
        of each one's first change; a write that fails (contention) does not stop the others: the
        caller reports its first record."""
        by_parent: dict[tuple[str, int], list[Change]] = {}
        for change in changes:
            by_parent.setdefault((change.parent, self.store.group_of(change.lane)), []).append(change)
        return [self.apply_parent(parent, group, lane_group=g) for (parent, g), group in by_parent.items()]

    def apply_parent(self, parent: str, changes: list[Change], *, lane_group: int = 0) -> Applied:
        """One parent's changes (of one ``lane_group``) as one conditional write (see the module doc)."""
        capacity, attempts = Capacity(), 0

        def applied(outcome: Outcome, reason: Reason | None, net: int, covered: list[Change]) -> Applied:
            return Applied(parent, Result(outcome, reason=reason, capacity=capacity, attempts=attempts), net, covered)

        pending = sorted(changes, key=lambda c: (c.lane, padded(c.seq)))
        for _ in range(ROUNDS):
            if not pending:
                return applied(Outcome.DUPLICATE, Reason.CHECKPOINTED, 0, [])
            runs, net, counted, lag = self._runs(pending)
            written = self.store.apply(parent, runs, net, counted, lag, policy=self.retry, capacity=capacity, group=lane_group)
            report = written.report
            attempts += report.attempts
            if report.outcome is Outcome.APPLIED:
                return applied(Outcome.APPLIED, None, net, pending)
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return applied(report.outcome, None, 0, pending)
            if not written.parent_found and lane_group:  # the group's first write: its item, if the parent exists
                made = self.store.create_group(parent, lane_group, policy=self.retry, capacity=capacity)
                if made is None:
                    return applied(Outcome.CONTENTION, Reason.CHECKPOINT_MOVING, 0, pending)
                if not made:
                    return applied(Outcome.REJECTED, Reason.PARENT_MISSING, 0, pending)
                continue
            if not written.parent_found and self.store.writer is not None:
                if not self.store.create(parent, policy=self.retry, capacity=capacity):  # a Region's own item: made here
                    return applied(Outcome.CONTENTION, Reason.CHECKPOINT_MOVING, 0, pending)
                continue
            if not written.parent_found:
                return applied(Outcome.REJECTED, Reason.PARENT_MISSING, 0, pending)
            done = written.applied
            pending = [c for c in pending if c.lane not in done or padded(c.seq) > done[c.lane]]
        return applied(Outcome.CONTENTION, Reason.CHECKPOINT_MOVING, 0, pending)

    def _runs(self, pending: list[Change]) -> tuple[list[LaneRun], int, int, int | None]:
        """(each lane's run, the net change, how many changes count, the lag of the oldest record)."""
        lanes: dict[str, list[Change]] = {}
        for change in pending:
            lanes.setdefault(change.lane, []).append(change)
        runs = []
        for lane, run_ in sorted(lanes.items()):
            probes = [c.probe for c in run_ if c.probe is not None]
            created = max(c.created_ms for c in run_)
            runs.append(LaneRun(lane, padded(run_[0].seq), padded(run_[-1].seq), created, probes[-1] if probes else None))
        created_at = [c.created_ms for c in pending if c.created_ms]
        lag = max(0, self.clock() - min(created_at)) if created_at else None
        return runs, sum(c.delta for c in pending), sum(1 for c in pending if c.delta), lag
