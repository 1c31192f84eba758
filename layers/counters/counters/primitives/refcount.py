"""Reference counts (seed 01): a tally on a parent item, kept exact by its child items.

``link`` puts a child item and bumps the parent's tally in **one** TransactWriteItems; the
child's key is the dedupe guard (``attribute_not_exists``), so a duplicated or retried link
can never count twice. ``unlink`` is the mirror (``attribute_exists`` guard, ADD -1) and
never drives the tally below zero.

Guarantees:
    * Ambiguous failure (5xx/timeout after sending): retried with the same ClientRequestToken,
      so a committed attempt replays as success; if DynamoDB answers the retry with a
      condition failure instead, the child exists (ours or a concurrent twin): ``rejected``
      with ``already_exists``, and the tally still counts it exactly once.
    * SDK/client retries: a re-sent link finds its child and is rejected: never counted twice.
    * Contention (conflicts/throttling past the retry budget): ``contention``; replaying the
      request is safe because the child key makes it idempotent.

Adopting a parent whose children exist already (``mark``): each child carries a mark that says
"counted". Once the parent has begun adopting ([`begin`][counters.primitives.refcount.RefCount.begin]), a link writes the child
with the mark and adds 1 in one transaction; an unlink subtracts only for a child that carries the
mark, and deletes an unmarked one without touching the tally; the backfill
([`adopt`][counters.primitives.refcount.RefCount.adopt]) walks the children and, for each unmarked one, marks it and adds
1 in one transaction conditioned on "exists and not marked". Each child is counted once, by its
link or by the backfill, whichever order they run in, and a retried step is refused by its own
mark. Before the parent begins, an adoption-aware RefCount keeps the rules above (no mark), so
writers can be deployed before the backfill starts. [docs/migration.md](../migration.md) walks through it.

The requests are in [`counters.store.refcounts`][counters.store.refcounts].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import Enum, StrEnum
from typing import Any

from counters.core.client import DynamoDBClient
from counters.core.errors import ContentionError, NotFound
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.store.expr import Cond, Key, Transaction
from counters.store.refcounts import ADOPTED, Linked, RefCountStore, Round

ROUNDS = 4
"""Transactions an adoption-aware link/unlink sends at most: each refusal says which rule holds
(the parent began adopting, the backfill marked the child) and each can happen once."""


class Reason(StrEnum):
    """Why a link/unlink was rejected (``Result.reason``)."""

    ALREADY_EXISTS = "already_exists"
    NOT_LINKED = "not_linked"
    PARENT_MISSING = "parent_missing"
    ALSO_FAILED = "also_failed"
    TALLY_WOULD_GO_NEGATIVE = "tally_would_go_negative"


@dataclass
class Audit:
    """Stored tally vs counted children. Exact only when no link/unlink ran meanwhile."""

    stored: int
    counted: int
    capacity: Capacity

    @property
    def drift(self) -> int:
        """Stored minus counted (0 when the tally is right)."""
        return self.stored - self.counted


@dataclass
class Relinked(Result):
    """What [`link`][counters.primitives.refcount.RefCount.link] and [`unlink`][counters.primitives.refcount.RefCount.unlink]
    return: a [`Result`][counters.core.outcome.Result] whose ``value`` is typed."""

    value: Mapping[str, Any] | None = None
    """The child as stored when the child's guard refused (``already_exists``, ``not_linked`` with ALL_OLD), else ``None``."""


@dataclass
class Adoption:
    """Where a parent's adoption is ([`RefCount.adoption`][counters.primitives.refcount.RefCount.adoption], [`RefCount.adopt`][counters.primitives.refcount.RefCount.adopt])."""

    state: str | None
    """``None`` (not begun), ``adopting`` (the tally counts every child linked since it began and
    those the backfill reached), ``adopted`` (every child is counted: the tally is exact)."""
    tally: int
    cursor: object = None
    """The sort key the backfill's walk has reached (it resumes after it)."""
    counted: int = 0
    """Children this call's backfill counted (a step whose answer was lost and whose re-send was
    refused by its own mark is counted in the tally but not here)."""
    pages: int = 0
    capacity: Capacity = field(default_factory=Capacity)

    @property
    def exact(self) -> bool:
        """Whether the tally counts every child (``adopted``)."""
        return self.state == ADOPTED


class RefCount:
    """A tally attribute on a parent item, maintained transactionally with child items.

    ``pk``/``sk``: the table's key attribute names; ``tally_attribute``: the parent's count;
    ``mark``: the child attribute that says a child is counted, for a parent whose children
    existed before its tally (see the module: [`adopt`][counters.primitives.refcount.RefCount.adopt])."""

    def __init__(
        self,
        table_name: str,
        *,
        tally_attribute: str,
        pk: str = "PK",
        sk: str = "SK",
        mark: str | None = None,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.store = RefCountStore(table_name, tally_attribute=tally_attribute, pk=pk, sk=sk, mark=mark, dynamodb=dynamodb)
        self.pk = pk
        self.mark = mark
        self.retry = retry or RetryPolicy()

    def link(self, parent: Key, child: Mapping[str, object], *, also: Transaction[Enum] | None = None) -> Relinked:
        """Create ``child`` (full item, key included) and add 1 to the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``already_exists`` (child was there:
        ``value`` is the stored child) or ``parent_missing``; ``contention``. ``also``: more
        actions to commit in the same transaction (reason ``also_failed`` if one's condition fails).
        """
        if self.mark is not None:
            return self._link_marked(parent, child, also)
        return self._result(self.store.link(parent, child, also, self.retry), Reason.ALREADY_EXISTS)

    def unlink(self, parent: Key, child_key: Key, *, also: Transaction[Enum] | None = None) -> Relinked:
        """Delete the child and subtract 1 from the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``not_linked``, ``parent_missing``,
        ``tally_would_go_negative`` (an integrity fault: the child exists but the tally is 0)
        or ``also_failed``; ``contention``.
        """
        if self.mark is not None:
            return self._unlink_marked(parent, child_key, also)
        return self._result(self.store.unlink(parent, child_key, also, self.retry), Reason.NOT_LINKED)

    def _begun(self, linked: Linked) -> bool | None:
        """Whether the parent found by a refused half had begun adopting (``None``: no parent found)."""
        return None if linked.parent is None else self.store.state in linked.parent

    def _link_marked(self, parent: Key, child: Mapping[str, object], also: Transaction[Enum] | None) -> Relinked:
        capacity, attempts, kind = Capacity(), 0, Round.COUNTED
        for _ in range(ROUNDS):
            linked = self.store.link_round(parent, child, also, self.retry, kind)
            capacity.merge(linked.report.capacity)
            attempts += linked.report.attempts
            refused_by_parent = linked.report.outcome is Outcome.REJECTED and linked.parent_refused and not linked.child_refused
            begun = self._begun(linked)
            if not refused_by_parent or begun is None or linked.also_refused:
                return self._result(linked, Reason.ALREADY_EXISTS, capacity, attempts)
            kind = Round.COUNTED if begun else Round.LEGACY  # the parent began (or had not): the other rule
        return Relinked(Outcome.CONTENTION, capacity=capacity, attempts=attempts)

    def _unlink_marked(self, parent: Key, child_key: Key, also: Transaction[Enum] | None) -> Relinked:
        assert self.mark is not None
        capacity, attempts, kind = Capacity(), 0, Round.COUNTED
        for _ in range(ROUNDS):
            linked = self.store.unlink_round(parent, child_key, also, self.retry, kind)
            capacity.merge(linked.report.capacity)
            attempts += linked.report.attempts
            if linked.report.outcome is not Outcome.REJECTED or linked.also_refused:
                return self._result(linked, Reason.NOT_LINKED, capacity, attempts)
            begun = self._begun(linked) if linked.parent_refused else None  # what the parent's refusal showed
            if linked.child_refused:
                if linked.child is None:
                    return self._result(linked, Reason.NOT_LINKED, capacity, attempts)
                marked = linked.child.get(self.mark) is True
                if marked == (kind is Round.COUNTED):
                    return self._result(linked, Reason.NOT_LINKED, capacity, attempts)  # neither rule: a mark not True
                # the backfill marked it, or it never was: counted if marked, else by whether the parent began
                kind = Round.COUNTED if marked else (Round.LEGACY if begun is False else Round.UNCOUNTED)
                continue
            if begun is None or kind is Round.COUNTED:
                return self._result(linked, Reason.NOT_LINKED, capacity, attempts)  # no parent, or the tally at 0
            if begun == (kind is Round.UNCOUNTED):
                return self._result(linked, Reason.NOT_LINKED, capacity, attempts)  # LEGACY refused by the floor
            kind = Round.UNCOUNTED if begun else Round.LEGACY
        return Relinked(Outcome.CONTENTION, capacity=capacity, attempts=attempts)

    @staticmethod
    def _result(linked: Linked, child_reason: Reason, capacity: Capacity | None = None, attempts: int | None = None) -> Relinked:
        report = linked.report
        result = Relinked(
            report.outcome,
            capacity=report.capacity if capacity is None else capacity,
            attempts=report.attempts if attempts is None else attempts,
        )
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            if linked.parent_refused and not linked.parent_found and linked.parent is None:
                result.reason = Reason.PARENT_MISSING  # no parent: nothing else matters
            elif linked.child_refused:
                result.reason = child_reason  # the child guard: nothing to (un)link
                result.value = linked.child
            elif linked.also_refused:
                result.reason = Reason.ALSO_FAILED
            else:
                result.reason = Reason.TALLY_WOULD_GO_NEGATIVE  # child present, tally already 0
        return result

    def audit(self, parent: Key, child_prefix: str, *, where: Cond | None = None, partitions: list[str] | None = None) -> Audit | None:
        """Compare the stored tally with a COUNT of children (paginated Query, Select=COUNT).

        ``partitions``: the partition keys the children live under (default: the parent's own,
        its item collection), counted one after the other.

        ``where``: a filter for children that are stored but do not count (e.g.
        [`counters.primitives.toggle.Toggle.counted`][counters.primitives.toggle.Toggle.counted]: tombstones); the count is of the
        items that pass it.

        Reads the tally first, then counts; concurrent links/unlinks between the two make the
        drift transient, so a non-zero drift is worth a second look, not a repair.
        Returns ``None`` when the parent does not exist.
        """
        capacity = Capacity()
        stored = self.store.tally_of(parent, self.retry, capacity)
        if stored is None:
            return None
        counted = sum(self.count(pk, child_prefix, where, capacity) for pk in (partitions or [str(parent[self.pk])]))
        return Audit(stored=stored, counted=counted, capacity=capacity)

    def count(self, pk: str, child_prefix: str, where: Cond | None, capacity: Capacity, retry: RetryPolicy | None = None) -> int:
        """The children under one partition key that pass ``where`` (strongly consistent COUNT)."""
        return self.store.count(pk, child_prefix, where, retry or self.retry, capacity)

    # ------------------------------------------------------------------ adoption
    def begin(self, parent: Key) -> Adoption:
        """Begin adopting ``parent``: ``tally = 0`` and state ``adopting``, once (a second call, or a
        re-sent one, resets nothing). Every writer must be an adoption-aware RefCount (``mark``)
        first: from here a link counts only a marked child, and only the backfill counts the others.
        [`NotFound`][counters.core.errors.NotFound] if the parent does not exist."""
        capacity = Capacity()
        item = self.store.begin(parent, self.retry, capacity)
        if item is None:
            raise NotFound("the parent does not exist: create it before adopting its children")
        return self._adoption(item, capacity)

    def adoption(self, parent: Key) -> Adoption | None:
        """The parent's adoption state and tally (strongly consistent); ``None`` if it does not exist."""
        capacity = Capacity()
        item = self.store.parent_item(parent, self.retry, capacity)
        return None if item is None else self._adoption(item, capacity)

    def _adoption(self, item: Mapping[str, Any], capacity: Capacity) -> Adoption:
        state = item.get(self.store.state)
        return Adoption(
            None if state is None else str(state), int(item.get(self.store.tally, 0)), item.get(self.store.cursor), capacity=capacity
        )

    def adopt(
        self, parent: Key, child_prefix: str, *, partition: object = None, page_size: int = 100, max_pages: int | None = None
    ) -> Adoption:
        """Count the children that existed before ``parent`` began adopting, while links and
        unlinks go on: [`begin`][counters.primitives.refcount.RefCount.begin] (if not begun), then walk the children whose
        sort key begins with ``child_prefix`` under ``partition`` (default: the parent's partition
        key) from the parent's cursor, ``page_size`` at a time (a strongly consistent Query of keys
        and the mark), and count each unmarked child in one transaction: mark it if it exists
        unmarked, and add 1. The cursor is recorded on the parent after each page; at the end the
        state is ``adopted`` and the tally exact.

        Stops after ``max_pages`` (call again to resume), and on
        [`ContentionError`][counters.core.errors.ContentionError] (a step ran out of attempts; call again: a page walked
        twice counts nothing twice, its counted children carry the mark)."""
        started = self.begin(parent)
        capacity = started.capacity
        result = Adoption(started.state, started.tally, started.cursor, capacity=capacity)
        if result.state == ADOPTED:
            return result
        pk = parent[self.pk] if partition is None else partition
        cursor = started.cursor
        while max_pages is None or result.pages < max_pages:
            page = self.store.children(pk, child_prefix, cursor, page_size, self.retry, capacity)
            for key, marked in page.children:
                if marked:
                    continue
                step = self.store.count_child(parent, key, self.retry, capacity)
                if step.outcome is Outcome.APPLIED:
                    result.counted += 1
                elif step.outcome is Outcome.CONTENTION:
                    raise ContentionError("DynamoDB is busy; call adopt again: it resumes from the parent's cursor")
            result.pages += 1
            cursor = result.cursor = page.last
            recorded = self.store.progress(parent, cursor, self.retry, capacity)
            if recorded is Outcome.CONTENTION:
                raise ContentionError("DynamoDB is busy; call adopt again: it resumes from the parent's cursor")
            if recorded is Outcome.REJECTED or cursor is None:
                break  # another backfill finished it, or this one did
        after = self.adoption(parent)
        if after is not None:
            result.state, result.tally = after.state, after.tally
            capacity.merge(after.capacity)
        return result
