"""Expiry without DynamoDB TTL (an MRSC global table has none): the sweep's requests and its checkpoint.

Items that DynamoDB TTL would delete carry ``expiresAt`` (epoch seconds). The sweep
([`counters.primitives.expiry`][counters.primitives.expiry]) scans the table page by page for such items whose time has
passed, deletes each one under [`still_expired`][counters.store.expiry.still_expired] (an item renewed between the scan and the
delete stays), and keeps where it got to in one checkpoint item, so the next run resumes there.

The families that write ``expiresAt`` are declared here ([`EXPIRING`][counters.store.expiry.EXPIRING]): the scan looks only at
them, and the sweeper's IAM grants DeleteItem on exactly these key prefixes (a unit test keeps
template.yaml equal to this tuple).
"""

from __future__ import annotations

from enum import StrEnum

from counters.core.engine import read, run
from counters.core.items import Record
from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass
from counters.store.base import Store
from counters.store.conditions import Cond, any_of
from counters.store.expr import Delete, Get, Key, Path, Scan, Update, old_item
from counters.store.items import from_item
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import ANY, REFUSED, WriterRule

EXPIRES_AT = "expiresAt"
REV, CURSOR_PK, CURSOR_SK, PASSES, SWEPT_AT = "rev", "cursorPK", "cursorSK", "passes", "sweptAt"
CHECKPOINT_KEY: dict[str, str] = {"PK": "SWEEP#EXPIRY", "SK": "META"}

EXPIRING = ("OP#", "RSV#", "ORDERKEY#", "POST#")
"""Key prefixes of the items that carry ``expiresAt``: operation records (7 days), released
reservations (30 days), order keys (the key window, default 31 days), like tombstones (``POST#<id>#S<n>`` / ``LIKE#USER#...``)."""

SHAPES = (
    Shape(
        "expiry checkpoint",
        "SWEEP#EXPIRY",
        "META",
        "MRSC (no TTL): where the expiry sweep resumes (`cursorPK`/`cursorSK`, `rev`, `passes`, `sweptAt`) "
        "([regions.md](regions.md#expiry-on-mrsc-the-sweeper))",
    ),
)


WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "expiry checkpoint",
        "SWEEP#EXPIRY",
        "META",
        REFUSED,
        REFUSED,
        ANY,
        "MRSC only (the sweeper runs where there is no TTL): any Region's sweeper creates and advances it under a `rev` "
        "condition, which MRSC evaluates on the latest version in every Region; one Region's run resumes another's",
    ),
)
TABLE = Table("expiry", WRITERS, {"checkpoint": Op("the expiry sweeper's checkpoint", ("expiry checkpoint",))})
"""The sweeper's (operation x mode) table."""


def still_expired(now: int) -> Cond:
    """The delete's condition: the item's ``expiresAt`` is still at or before ``now`` (one renewed,
    or whose ``expiresAt`` was removed, e.g. a tombstone liked again, is kept; one already gone fails it)."""
    return Path(EXPIRES_AT) <= now


def _expiring(now: int) -> Cond:
    """The scan's filter: expired, and of a family that carries ``expiresAt`` (no other item is the sweep's)."""
    return still_expired(now) & any_of(*(Path("PK").begins_with(prefix) for prefix in EXPIRING))


@dataclass(frozen=True)
class Checkpoint:
    """Where the sweep resumes: after ``cursor`` (``None``: from the table's start); ``rev`` moves with
    every advance (0: no checkpoint stored yet)."""

    cursor: Key | None = None
    rev: int = 0
    passes: int = 0

    @classmethod
    def of(cls, item: Record | None) -> Checkpoint:
        """The checkpoint read from its stored item (a fresh one when there is none)."""
        if item is None:
            return cls()
        cursor = {"PK": item[CURSOR_PK], "SK": item[CURSOR_SK]} if CURSOR_PK in item and CURSOR_SK in item else None
        return cls(cursor=cursor, rev=int(item.get(REV, 0)), passes=int(item.get(PASSES, 0)))


@dataclass(frozen=True)
class Page:
    """One scan page: the expired items' keys found on it, how many items it evaluated, and where
    the next page starts (``None``: the table's end)."""

    keys: list[Key]
    scanned: int
    next_start: Key | None


class Deleted(StrEnum):
    """What a conditional delete of one expired item did."""

    DELETED = "deleted"
    """This call (or an earlier attempt of it whose answer was lost) deleted it."""
    GONE = "gone"
    """It was already gone (another sweep deleted it)."""
    KEPT = "kept"
    """It was renewed (``expiresAt`` later than now, or removed) and stays."""
    CONTENDED = "contended"
    """The budget ran out; the item stays until a later sweep."""


class ExpiryStore(Store):
    """The sweep's calls: a page of expired items, one conditional delete, the checkpoint."""

    def checkpoint(self, capacity: Capacity | None = None) -> Checkpoint:
        """Where the sweep resumes: the checkpoint item, read strongly consistent."""
        get = Get(self.table_name, CHECKPOINT_KEY).strongly()
        return Checkpoint.of(from_item(read(self.dynamodb.get_item, self.retry, capacity, **get.params()).get("Item")))

    def page(self, now: int, start: Key | None, limit: int, capacity: Capacity | None = None) -> Page | None:
        """One page of at most ``limit`` evaluated items after ``start``; ``None`` when the budget ran out."""
        scan = Scan(self.table_name, limit=limit, start=start).where(_expiring(now)).project("PK", "SK")
        report = run(self.dynamodb.scan, scan.params(), policy=self.retry, capacity=capacity)
        if report.response is None:
            return None
        items = [from_item(i) or {} for i in report.response.get("Items", [])]
        last = from_item(report.response.get("LastEvaluatedKey"))
        return Page(
            keys=[{"PK": i["PK"], "SK": i["SK"]} for i in items],
            scanned=int(report.response.get("ScannedCount", 0)),
            next_start=None if last is None else {"PK": last["PK"], "SK": last["SK"]},
        )

    def delete_expired(self, key: Key, now: int, capacity: Capacity | None = None) -> Deleted:
        """Delete ``key`` if its ``expiresAt`` is still at or before ``now``."""
        delete = Delete(self.table_name, key=key).when(still_expired(now))
        report = run(self.dynamodb.delete_item, delete.params(), policy=self.retry, capacity=capacity, write=True)
        if report.outcome is Outcome.APPLIED:
            return Deleted.DELETED
        if report.outcome is Outcome.REJECTED:
            if old_item(report.failure) is not None:
                return Deleted.KEPT
            return Deleted.DELETED if report.unknown_seen else Deleted.GONE  # gone: our lost answer, or another sweep
        return Deleted.CONTENDED

    def advance(self, seen: Checkpoint, cursor: Key | None, now: int, capacity: Capacity | None = None) -> Checkpoint | None:
        """Move the checkpoint from ``seen`` to after ``cursor`` (``None``: a pass ended, the next
        starts from the table's start). Conditioned on ``seen.rev``: of two sweeps that read the same
        checkpoint only one moves it. Returns the new checkpoint, or ``None`` when another sweep moved
        it first (or the budget ran out): the caller reads it again."""
        rev = Path(REV)
        update = Update(self.table_name, CHECKPOINT_KEY).set(REV, seen.rev + 1).set(SWEPT_AT, now)
        update.when(rev.missing() if seen.rev == 0 else rev == seen.rev)
        update.on_failure = False
        passes = seen.passes
        if cursor is None:
            passes += 1
            update.set(PASSES, passes).remove(CURSOR_PK, CURSOR_SK)
        else:
            update.set(CURSOR_PK, cursor["PK"]).set(CURSOR_SK, cursor["SK"])
        report = run(self.dynamodb.update_item, update.params(), policy=self.retry, capacity=capacity, write=True)
        if report.outcome is Outcome.APPLIED or (report.outcome is Outcome.REJECTED and report.unknown_seen and self._is(seen, cursor)):
            return Checkpoint(cursor=cursor, rev=seen.rev + 1, passes=passes)
        return None

    def _is(self, seen: Checkpoint, cursor: Key | None) -> bool:
        """After an unknown outcome: the stored checkpoint is the one this advance wrote."""
        stored = self.checkpoint()
        return stored.rev == seen.rev + 1 and stored.cursor == cursor
