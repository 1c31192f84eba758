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

The requests are in [`counters.store.refcounts`][counters.store.refcounts].
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum, StrEnum
from typing import Any

from counters.core.client import DynamoDBClient
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.store.expr import Cond, Key, Transaction
from counters.store.refcounts import Linked, RefCountStore


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


class RefCount:
    """A tally attribute on a parent item, maintained transactionally with child items."""

    def __init__(
        self,
        table_name: str,
        *,
        tally_attribute: str,
        pk: str = "PK",
        sk: str = "SK",
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.store = RefCountStore(table_name, tally_attribute=tally_attribute, pk=pk, sk=sk, dynamodb=dynamodb)
        self.pk = pk
        self.retry = retry or RetryPolicy()

    def link(self, parent: Key, child: Mapping[str, object], *, also: Transaction[Enum] | None = None) -> Relinked:
        """Create ``child`` (full item, key included) and add 1 to the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``already_exists`` (child was there:
        ``value`` is the stored child) or ``parent_missing``; ``contention``. ``also``: more
        actions to commit in the same transaction (reason ``also_failed`` if one's condition fails).
        """
        return self._result(self.store.link(parent, child, also, self.retry), Reason.ALREADY_EXISTS)

    def unlink(self, parent: Key, child_key: Key, *, also: Transaction[Enum] | None = None) -> Relinked:
        """Delete the child and subtract 1 from the parent's tally.

        Outcomes: ``applied``; ``rejected`` with reason ``not_linked``, ``parent_missing``,
        ``tally_would_go_negative`` (an integrity fault: the child exists but the tally is 0)
        or ``also_failed``; ``contention``.
        """
        return self._result(self.store.unlink(parent, child_key, also, self.retry), Reason.NOT_LINKED)

    @staticmethod
    def _result(linked: Linked, child_reason: Reason) -> Relinked:
        report = linked.report
        result = Relinked(report.outcome, capacity=report.capacity, attempts=report.attempts)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            if linked.parent_refused and not linked.parent_found:
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
