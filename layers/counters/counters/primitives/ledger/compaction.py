"""Compaction: merge entries older than the retry window + margin into the checkpoint, chunk by
chunk, per ledger ([`Compaction.compact`][counters.primitives.ledger.compaction.Compaction.compact]) or every ledger with due entries
([`Compaction.compact_due`][counters.primitives.ledger.compaction.Compaction.compact_due]). Where each Region writes its own items (the policy's ``writer``) every Region compacts its own
entries into its own checkpoint (no Region writes another's); without transactions a chunk is the
checkpoint update, then the deletes.

Why two compactors, a crash mid-way and a slow append cannot lose or double-count an entry:
[docs/ledgers.md, "Guarantees and how they are kept"](../ledgers.md#guarantees-and-how-they-are-kept) and "Global tables".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import TypedDict

from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass
from counters.primitives.ledger.balance import PublicCheckpoint, public_checkpoint
from counters.primitives.ledger.base import LedgerBase
from counters.store.ledger_items import MAX_CHUNK


class PublicCompaction(TypedDict):
    """`POST /ledgers/{id}/compact`: what one ledger's compaction did ([`CompactionReport`][counters.primitives.ledger.compaction.CompactionReport])."""

    ledgerId: str
    outcome: str
    """APPLIED (merged what was due; possibly nothing) or CONTENTION (stopped; safe to re-run)."""
    merged: int
    chunks: int
    lostRaces: int
    """Chunks cancelled because another compactor (or a removal) changed the ledger first."""
    complete: bool
    """False when the chunk budget ran out before every due entry was merged: call again."""
    checkpoint: PublicCheckpoint | None


@dataclass
class CompactionReport:
    """What one ledger's compaction did."""

    ledger_id: str
    outcome: Outcome
    """APPLIED (merged what was due; possibly nothing) or CONTENTION (stopped; safe to re-run)."""
    merged: int = 0
    chunks: int = 0
    lost_races: int = 0
    """Chunks cancelled because another compactor (or a removal) changed the ledger first."""
    complete: bool = True
    """False when the chunk budget ran out before every due entry was merged."""
    checkpoint: PublicCheckpoint | None = None
    """The checkpoint as the API shows it ([`public_checkpoint`][counters.primitives.ledger.balance.public_checkpoint])."""
    capacity: Capacity = field(default_factory=Capacity)

    def as_dict(self) -> PublicCompaction:
        """The JSON form."""
        return {
            "ledgerId": self.ledger_id,
            "outcome": self.outcome.value,
            "merged": self.merged,
            "chunks": self.chunks,
            "lostRaces": self.lost_races,
            "complete": self.complete,
            "checkpoint": self.checkpoint,
        }


class ScheduledSummary(TypedDict):
    """[`ScheduledReport.as_dict`][counters.primitives.ledger.compaction.ScheduledReport.as_dict]: what the scheduled run logs and answers."""

    ledgers: int
    merged: int
    incomplete: list[str]
    markersCleared: int
    stoppedEarly: bool


@dataclass
class ScheduledReport:
    """What a scheduled compaction run did, over every ledger due."""

    ledgers: list[CompactionReport] = field(default_factory=list)
    markers_cleared: int = 0
    stopped_early: bool = False
    capacity: Capacity = field(default_factory=Capacity)

    def as_dict(self) -> ScheduledSummary:
        """The run's summary: ledgers, entries merged, ledgers left incomplete, markers cleared."""
        return {
            "ledgers": len(self.ledgers),
            "merged": sum(r.merged for r in self.ledgers),
            "incomplete": [r.ledger_id for r in self.ledgers if not (r.complete and r.outcome is Outcome.APPLIED)],
            "markersCleared": self.markers_cleared,
            "stoppedEarly": self.stopped_early,
        }


class Compaction(LedgerBase):
    """[`compact`][counters.primitives.ledger.compaction.Compaction.compact] and [`compact_due`][counters.primitives.ledger.compaction.Compaction.compact_due] (the ledger's other parts are in the sibling modules)."""

    def cutoff_ms(self) -> int:
        """Entries with a key time before this are merged; later ones may still be retried."""
        return self._now_ms() - int((self.retry_window + self.margin) * 1000)

    def compact(
        self, ledger_id: str, *, chunk_size: int = MAX_CHUNK, max_chunks: int | None = None, max_lost_races: int = 5
    ) -> CompactionReport:
        """Merge entries older than the retry window + margin into the checkpoint, chunk by chunk."""
        if not 1 <= chunk_size <= MAX_CHUNK:
            raise ValueError(f"chunk_size must be in 1..{MAX_CHUNK}")
        cutoff = self.cutoff_ms()
        report = CompactionReport(ledger_id, Outcome.APPLIED)
        while True:
            checkpoint = self.store.checkpoint(ledger_id, report.capacity)
            report.checkpoint = public_checkpoint(checkpoint)
            self._stage("snapshot_read")
            if (
                checkpoint is not None
                and checkpoint.pending_deletes
                and not self.store.delete_merged(ledger_id, checkpoint, report.capacity)
            ):
                report.outcome, report.complete = (
                    Outcome.CONTENTION,
                    False,
                )  # no transactions: merged entries left; the next run deletes them
                return report
            through = checkpoint.merged_through if checkpoint else ""
            if max_chunks is not None and report.chunks >= max_chunks:
                report.complete = not self.store.due_entries(ledger_id, through, cutoff, 1, report.capacity)
                return report
            entries = self.store.due_entries(ledger_id, through, cutoff, chunk_size, report.capacity)
            self._stage("entries_read")
            if not entries:
                return report
            outcome = self.store.commit(self.store.chunk(ledger_id, checkpoint, entries, self._now_ms()), report.capacity)
            if outcome is Outcome.APPLIED:
                report.merged += len(entries)
                report.chunks += 1
                self._stage("chunk_committed")
                if len(entries) < chunk_size:
                    checkpoint = self.store.checkpoint(ledger_id, report.capacity)
                    report.checkpoint = public_checkpoint(checkpoint)
                    if checkpoint is not None and checkpoint.pending_deletes:
                        self.store.delete_merged(ledger_id, checkpoint, report.capacity)
                    return report
                continue
            if outcome is Outcome.REJECTED:
                # Another compactor moved the checkpoint, or an entry vanished: re-read, go on.
                report.lost_races += 1
                if report.lost_races <= max_lost_races:
                    continue
            report.outcome, report.complete = Outcome.CONTENTION, False
            return report

    def compact_due(self, *, should_stop: Callable[[], bool] | None = None, chunk_size: int = MAX_CHUNK) -> ScheduledReport:
        """Compact every ledger with a dirty marker whose bucket is entirely before the cutoff.

        Markers are found with one Query on ``LEDGERS#DIRTY`` (no Scan) and cleared only
        after their ledger compacted completely; ``should_stop`` lets a Lambda stop before
        its timeout (the next run picks up what is left).
        """
        report = ScheduledReport()
        cutoff = self.cutoff_ms()
        due_before = cutoff - cutoff % self.marker_bucket_ms  # buckets that end at or before the cutoff
        markers = self.store.dirty_markers(due_before, report.capacity)
        for ledger_id, sks in markers.items():
            if should_stop is not None and should_stop():
                report.stopped_early = True
                break
            done = self.compact(ledger_id, chunk_size=chunk_size)
            report.ledgers.append(done)
            report.capacity.merge(done.capacity)
            if done.outcome is not Outcome.APPLIED or not done.complete:
                continue  # keep its markers: the next run retries it
            for sk in sks:
                report.markers_cleared += self.store.clear_marker(sk, report.capacity)
        return report
