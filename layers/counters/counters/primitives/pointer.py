"""Monotonic pointers (seed 04): an item holding the greatest value seen, e.g. LAST_ORDER.

The pointer is one item, ``POINTER#<name>`` / ``META`` ([`counters.store.sequences`][counters.store.sequences]).
[`Pointer.advance`][counters.primitives.pointer.Pointer.advance] is one conditional UpdateItem: ``SET #v = :new`` only if
``attribute_not_exists(#v) OR #v < :new``. Writers may run in parallel and deliveries may arrive
late, twice, or out of order (stream shards processed in parallel, retried batches, queues): the
condition makes every such update either move the pointer forward or do nothing. It **never moves
backward**, and no read is needed first.

Outcomes of [`Pointer.advance`][counters.primitives.pointer.Pointer.advance] (an [`Advanced`][counters.primitives.pointer.Advanced], whose ``value`` is the value stored afterwards):

* ``applied``: the pointer moved to the new value.
* ``duplicate`` (reason ``already_at_value``): the pointer already holds **exactly** this value:
  a redelivery (or a retry after an unknown outcome) of an update that already applied. Success,
  nothing changed.
* ``rejected`` (reason ``stale``): the pointer holds a **greater** value; this update is
  out of date. Expected under reordering, not an error.
* ``contention``: throttling/unknown outcomes outlasted the retry budget; re-driving the
  same update is always safe.

Across Regions ([`RegionPolicy`][counters.core.policy.RegionPolicy])
    Where conditions see one replica and last-writer-wins resolves concurrent versions (MREC), a
    pointer updated in place by two Regions can go **backward**: last-writer-wins keeps the later
    write, so B's ``5`` written after A's ``9`` (before ``9`` reached B) replaces ``9`` everywhere.
    There the policy gives each Region its **own** item (``writer``): ``POINTER#<name>#<Region>``
    (one writing Region per item), and [`Pointer.read`][counters.primitives.pointer.Pointer.read]
    answers the greatest of the Regions' items (``readers``). Each item only moves forward in its
    Region; its replicas receive its versions in write-time order (an older version arriving late
    loses LWW), so each replica only moves forward too, and so does the max: monotonic in every
    Region, before and after a heal, whatever the delay. A read costs one strongly consistent
    GetItem per Region. On a strongly consistent table (MRSC) the one item's condition sees every
    Region's writes.

Both ``duplicate`` and ``rejected`` cost one WCU (a failed condition is still a write) and
read nothing extra: ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` tells them apart.
"""

from __future__ import annotations

from enum import StrEnum

from counters.core.client import DynamoDBClient
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.records import dataclass
from counters.store.sequences import SequenceStore, pointer_key


class Reason(StrEnum):
    """Why an advance did not simply apply."""

    ALREADY_AT_VALUE = "already_at_value"
    STALE = "stale"
    UNKNOWN_OUTCOME = "unknown_outcome"
    TRANSIENT = "transient"


@dataclass
class Advanced(Result):
    """What [`Pointer.advance`][counters.primitives.pointer.Pointer.advance] returns: a [`Result`][counters.core.outcome.Result] whose ``value`` is typed."""

    value: int | None = None
    """The value stored afterwards (``None``: ``contention``, not known)."""


class Pointer:
    """A named pointer that only moves forward."""

    def __init__(
        self,
        table_name: str,
        name: str,
        *,
        attribute: str = "value",
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        policy: RegionPolicy = ONE_REGION_POLICY,
    ) -> None:
        self.table_name = table_name
        self.name = name
        self.attribute = attribute
        self.policy = policy
        self.writer = policy.writer
        """The Region whose own item [`advance`][counters.primitives.pointer.Pointer.advance] moves (``""``: the one shared item)."""
        self.key = pointer_key(name, self.writer)
        self.keys = [pointer_key(name, region) for region in policy.readers]
        """What [`read`][counters.primitives.pointer.Pointer.read] reads: every Region's own item, or the one item."""
        self.store = SequenceStore(table_name, dynamodb=dynamodb, retry=retry, policy=policy)
        self.retry = self.store.retry

    def advance(self, value: int) -> Advanced:
        """Move the pointer to ``value`` if that is forward (see the module doc for outcomes)."""
        move = self.store.advance(self.name, self.attribute, value, self.writer)
        report = move.report
        result = Advanced(report.outcome, capacity=report.capacity, attempts=report.attempts, value=value)
        if report.outcome is Outcome.REJECTED and move.stored is not None:
            result.value = move.stored
            if move.stored == value:
                result.outcome, result.reason = Outcome.DUPLICATE, Reason.ALREADY_AT_VALUE
            else:
                result.reason = Reason.STALE
        elif report.outcome is Outcome.CONTENTION:
            result.value = None
            result.reason = Reason.UNKNOWN_OUTCOME if report.unknown_seen else Reason.TRANSIENT
        return result

    def read(self) -> tuple[int | None, Capacity]:
        """The pointer's value, ``None`` before the first advance.

        Strongly consistent on purpose: the pointer itself never moves backward, and a
        consistent read makes that true of what readers see too (an eventually consistent
        read could return an older value after a newer one). One GetItem, 1 RCU; with per-Region items
        one per Region, answering the greatest (see the module doc).
        """
        capacity = Capacity()
        values = [self.store.read_number(key, self.attribute, capacity) for key in self.keys]
        return max((v for v in values if v is not None), default=None), capacity
