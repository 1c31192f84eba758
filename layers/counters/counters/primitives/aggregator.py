"""A tally kept from the table's stream, exactly once: net change per parent, checkpointed per lane.

Writers change state items alone (one conditional write each, :meth:`Toggle.set_alone
<counters.primitives.toggle.Toggle.set_alone>`); each write records ``delta``, what it changed the
count by. The stream carries every committed write at least once; this aggregator turns a batch of
them into **one conditional UpdateItem per parent**::

    ADD <tally> :net  SET <seq>.<lane> = :last, <at>.<lane> = :created  (for every lane in the batch)
    IF  attribute_exists(<seq>) AND (attribute_not_exists(<seq>.<lane>) OR <seq>.<lane> < :first) ...

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
for the lane; the tally is exact as of the least of them (:func:`as_of`).

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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from counters.core.client import client
from counters.core.engine import run
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

SEQ_WIDTH = 40  # DynamoDB Streams sequence numbers are 21 to 40 digits
ROUNDS = 4  # re-decided this often when the checkpoints refuse a write, then contention


def padded(sequence_number: str) -> str:
    """A stream sequence number as a fixed-width string: compared as text, ordered as the number."""
    if not sequence_number.isdigit() or len(sequence_number) > SEQ_WIDTH:
        raise ValueError(f"not a stream sequence number: {sequence_number!r}")
    return sequence_number.zfill(SEQ_WIDTH)


@dataclass(frozen=True)
class Change:
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


def as_of(item: dict[str, Any], at_attribute: str) -> int | None:
    """The watermark of a parent item: the least lane watermark (ms), ``None`` before any."""
    lanes = item.get(at_attribute) or {}
    return min((int(v) for v in lanes.values()), default=None)


class Aggregator:
    """Applies stream changes to a tally on parent items, once each."""

    def __init__(
        self,
        table_name: str,
        key_of: Any,
        *,
        tally_attribute: str,
        seq_attribute: str = "aggSeq",
        at_attribute: str = "aggAt",
        probe_attribute: str = "aggProbe",
        revision_attribute: str | None = None,
        lag_attribute: str | None = None,
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        """``key_of(parent)`` is the parent item's key; the parent must hold an (empty) map
        ``seq_attribute`` and ``at_attribute`` (written when it is created), and
        ``probe_attribute`` if probes are written (:meth:`probe_ready`)."""
        self.table_name = table_name
        self.key_of = key_of
        self.tally, self.seq, self.at = tally_attribute, seq_attribute, at_attribute
        self.probe, self.revision, self.lag = probe_attribute, revision_attribute, lag_attribute
        self.clock = clock or (lambda: int(time.time() * 1000))  # ms
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def apply(self, changes: Iterable[Change]) -> list[Applied]:
        """One write per parent, in order of each parent's first change; a parent whose write
        fails (contention) does not stop the others: the caller reports its first record."""
        by_parent: dict[str, list[Change]] = {}
        for change in changes:
            by_parent.setdefault(change.parent, []).append(change)
        return [self.apply_parent(parent, group) for parent, group in by_parent.items()]

    def apply_parent(self, parent: str, changes: list[Change]) -> Applied:
        """One parent's changes as one conditional write (see the module doc)."""
        capacity, attempts = Capacity(), 0
        pending = sorted(changes, key=lambda c: (c.lane, padded(c.seq)))
        for _ in range(ROUNDS):
            if not pending:
                return Applied(parent, Result(Outcome.DUPLICATE, reason="checkpointed", capacity=capacity, attempts=attempts), 0, [])
            params, net = self._update(parent, pending)
            report = run(self.dynamodb.update_item, params, policy=self.retry, capacity=capacity, write=True)
            attempts += report.attempts
            if report.outcome is Outcome.APPLIED:
                return Applied(parent, Result(Outcome.APPLIED, capacity=capacity, attempts=attempts), net, pending)
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return Applied(parent, Result(report.outcome, capacity=capacity, attempts=attempts), 0, pending)
            stored = from_item(report.failure.old_item(0))
            if not stored or self.seq not in stored:
                return Applied(parent, Result(Outcome.REJECTED, reason="parent_missing", capacity=capacity, attempts=attempts), 0, pending)
            done = {lane: str(seq) for lane, seq in (stored.get(self.seq) or {}).items()}
            pending = [c for c in pending if c.lane not in done or padded(c.seq) > done[c.lane]]
        return Applied(parent, Result(Outcome.CONTENTION, reason="checkpoint_moving", capacity=capacity, attempts=attempts), 0, pending)

    def _update(self, parent: str, pending: list[Change]) -> tuple[dict[str, Any], int]:
        lanes: dict[str, list[Change]] = {}
        for change in pending:
            lanes.setdefault(change.lane, []).append(change)
        names = {"#pk": "PK", "#tally": self.tally, "#seq": self.seq, "#at": self.at}
        values: dict[str, Any] = {}
        sets, conditions = [], ["attribute_exists(#pk) AND attribute_exists(#seq)"]
        for i, (lane, run_) in enumerate(sorted(lanes.items())):
            names[f"#l{i}"] = lane
            values[f":first{i}"] = padded(run_[0].seq)
            values[f":last{i}"] = padded(run_[-1].seq)
            values[f":at{i}"] = max(c.created_ms for c in run_)
            sets += [f"#seq.#l{i} = :last{i}", f"#at.#l{i} = :at{i}"]
            probes = [c.probe for c in run_ if c.probe is not None]
            if probes:
                names["#probe"] = self.probe
                values[f":probe{i}"] = probes[-1]
                sets.append(f"#probe.#l{i} = :probe{i}")
            conditions.append(f"(attribute_not_exists(#seq.#l{i}) OR #seq.#l{i} < :first{i})")
        created = [c.created_ms for c in pending if c.created_ms]
        if self.lag and created:
            names["#lag"] = self.lag
            values[":lag"] = max(0, self.clock() - min(created))
            sets.append("#lag = :lag")
        net = sum(c.delta for c in pending)
        values[":net"] = net
        adds = "#tally :net"
        if self.revision:
            names["#rev"] = self.revision
            values[":changes"] = sum(1 for c in pending if c.delta)
            adds += ", #rev :changes"
        params = {
            "TableName": self.table_name,
            "Key": to_item(self.key_of(parent)),
            "UpdateExpression": f"SET {', '.join(sets)} ADD {adds}",
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",  # the stored checkpoints: what is already applied
        }
        return params, net
