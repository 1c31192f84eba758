"""Expiry on a table without DynamoDB TTL (an MRSC global table): a bounded, resumable sweep.

DynamoDB TTL deletes an item some time after its ``expiresAt`` passes. MRSC global tables have no
TTL ("Key facts about MRSC", [docs/regions.md](../regions.md)), so without this every operation record, released
reservation, order key and like tombstone would stay forever. [`ExpirySweeper.sweep`][counters.primitives.expiry.ExpirySweeper.sweep] does
TTL's work through the engine:

* **finds** items past expiry with Scan pages (a filter on ``expiresAt <= now`` over the families of
  [`counters.store.expiry.EXPIRING`][counters.store.expiry.EXPIRING]), starting where the last run stopped;
* **deletes** each with a conditional DeleteItem (``expiresAt`` still ``<= now``), so an item renewed
  between the scan and the delete stays, and an item another sweep deleted first is just gone;
* **is bounded**: at most ``max_items`` deletes and ``max_pages`` pages per run;
* **resumes** from a checkpoint item (``SWEEP#EXPIRY``), advanced after every page under a condition
  on its revision: two sweeps running at once (a retried invocation, the schedule in another Region)
  share the work instead of repeating it; the one whose advance loses re-reads the checkpoint.

Why a checkpoint cursor rather than a rotation of parallel-scan segments: the bound is exact (a run
that stops after ``max_items`` deletes mid-page resumes at the next item, not at the next segment,
which a rotation would reach only after every other segment), a segment grows with the table while
a page does not, and the cursor is one item any Region's run can continue from (MRSC: every read of
it is the latest).

Running a sweep twice is harmless: the second finds nothing it may delete (the conditions fail on
items already gone), so it deletes nothing and only moves the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Self

from counters.core.client import DynamoDBClient
from counters.core.clock import now as layer_now
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.core.records import dataclass
from counters.core.settings import Settings, env
from counters.store.expiry import Checkpoint, Deleted, ExpiryStore

MAX_ITEMS = 1000
"""Deletes per run (each a write: 1 write unit per KB in every replica Region)."""
MAX_PAGES = 100
PAGE_SIZE = 1000
"""Items a scan page evaluates (``Limit``); a page is also cut at 1 MB."""


@dataclass(frozen=True, kw_only=True)
class ExpirySettings(Settings):
    """The sweep's bounds per run (template: the expiry sweeper's environment)."""

    expiry_max_items: int = env("EXPIRY_MAX_ITEMS", MAX_ITEMS)
    expiry_max_pages: int = env("EXPIRY_MAX_PAGES", MAX_PAGES)


@dataclass
class SweepReport:
    """What one sweep did."""

    now: int
    pages: int = 0
    scanned: int = 0
    expired: int = 0
    """Expired items the pages found (each was then deleted, gone, kept or left)."""
    deleted: int = 0
    gone: int = 0
    kept: int = 0
    contended: int = 0
    lost_races: int = 0
    """Checkpoint advances another sweep made first (this one then continued from there)."""
    passes_completed: int = 0
    """1 when this run reached the table's end (the next run starts a new pass from its start)."""
    stopped_early: bool = False
    """``should_stop`` said stop, or a scan ran out of budget."""
    capacity: Capacity = field(default_factory=Capacity)

    def as_dict(self) -> dict[str, int | bool | float]:
        """The report as the sweeper's log line and the function's answer."""
        return {
            "now": self.now,
            "pages": self.pages,
            "scanned": self.scanned,
            "expired": self.expired,
            "deleted": self.deleted,
            "gone": self.gone,
            "kept": self.kept,
            "contended": self.contended,
            "lostRaces": self.lost_races,
            "passesCompleted": self.passes_completed,
            "stoppedEarly": self.stopped_early,
            "readUnits": self.capacity.read_units,
            "writeUnits": self.capacity.write_units,
        }


class ExpirySweeper:
    """Deletes items whose ``expiresAt`` has passed, a bounded part of the table per run."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        max_items: int = MAX_ITEMS,
        max_pages: int = MAX_PAGES,
        page_size: int = PAGE_SIZE,
        clock: Callable[[], float] = layer_now,
    ) -> None:
        if max_items < 1 or max_pages < 1 or page_size < 1:
            raise ValueError("max_items, max_pages and page_size must be at least 1")
        self.store = ExpiryStore(table_name, dynamodb=dynamodb, retry=retry)
        self.max_items, self.max_pages, self.page_size = max_items, max_pages, page_size
        self.clock = clock

    @classmethod
    def from_settings(cls, settings: ExpirySettings) -> Self:
        """A sweeper with its bounds from the environment (EXPIRY_MAX_ITEMS, EXPIRY_MAX_PAGES)."""
        return cls(settings.table_name, retry=settings.retry, max_items=settings.expiry_max_items, max_pages=settings.expiry_max_pages)

    def sweep(self, *, should_stop: Callable[[], bool] | None = None) -> SweepReport:
        """One bounded run: pages from the checkpoint on, each expired item deleted under its condition,
        the checkpoint advanced after each page, until ``max_items`` deletes were tried, ``max_pages``
        pages were read, the table's end was reached (the next run starts a new pass), or
        ``should_stop()`` says so."""
        report = SweepReport(now=int(self.clock()))
        capacity = report.capacity
        point = self.store.checkpoint(capacity)
        attempted = 0
        while report.pages < self.max_pages and attempted < self.max_items and not report.passes_completed:
            if should_stop is not None and should_stop():
                report.stopped_early = True
                break
            page = self.store.page(report.now, point.cursor, self.page_size, capacity)
            if page is None:
                report.stopped_early = True
                break
            report.pages += 1
            report.scanned += page.scanned
            report.expired += len(page.keys)
            cursor = page.next_start
            for i, key in enumerate(page.keys):
                if attempted >= self.max_items:
                    cursor = page.keys[i - 1]  # resume right after the last item tried
                    break
                attempted += 1
                self._count(report, self.store.delete_expired(key, report.now, capacity))
            moved = self.store.advance(point, cursor, report.now, capacity)
            if moved is None:  # another sweep moved it first: continue from where it got to
                report.lost_races += 1
                point = self.store.checkpoint(capacity)
                continue
            point = moved
            if cursor is None:
                report.passes_completed += 1
        return report

    @staticmethod
    def _count(report: SweepReport, done: Deleted) -> None:
        if done is Deleted.DELETED:
            report.deleted += 1
        elif done is Deleted.GONE:
            report.gone += 1
        elif done is Deleted.KEPT:
            report.kept += 1
        else:
            report.contended += 1

    def checkpoint(self) -> Checkpoint:
        """Where the next sweep resumes."""
        return self.store.checkpoint()
