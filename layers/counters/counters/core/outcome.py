"""The one outcome model every mutating primitive reports (see [docs/DESIGN.md](../DESIGN.md)).

A primitive never answers "it failed" without saying *how*: the difference between
"definitely not applied" and "nobody knows" is the whole point of this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any

from counters.core.records import dataclass


class Outcome(StrEnum):
    """What one call did to the counter."""

    APPLIED = "applied"
    """This call changed the counter."""
    DUPLICATE = "duplicate"
    """An earlier attempt with the same token already applied it: success, no change now."""
    REJECTED = "rejected"
    """Definitely not applied (threshold reached, already liked, stale pointer...)."""
    CONTENTION = "contention"
    """Conflicts/throttling/unknown outcomes outlasted the retry budget; nothing is known to
    have applied and it is safe to re-drive the same request with the same token."""
    AMBIGUOUS = "ambiguous"
    """Only for approaches that cannot tell (atomic, plain OCC): it may or may not have applied."""

    @property
    def succeeded(self) -> bool:
        """True when the caller's intent is in the table (applied now or earlier)."""
        return self in (Outcome.APPLIED, Outcome.DUPLICATE)


@dataclass
class Capacity:
    """Consumed capacity as DynamoDB reported it (``ReturnConsumedCapacity=TOTAL``).

    ``read_units``/``write_units`` are the sums over every call a primitive made, retries
    included; ``calls`` counts those calls. DynamoDB Local reports a constant for multi-item
    transactions, so transaction figures from it are indicative only (see the benchmarks).
    """

    read_units: float = 0.0
    write_units: float = 0.0
    calls: int = 0

    def add_response(self, response: Mapping[str, Any] | None, *, write: bool) -> None:
        """Fold the ``ConsumedCapacity`` of one response (single dict or list) into the totals.
        ``Mapping[str, Any]``: a botocore response or a ``ClientError``'s (untyped, or typed by
        botocore-stubs as a TypedDict without ``ConsumedCapacity``)."""
        self.calls += 1
        consumed = (response or {}).get("ConsumedCapacity")
        if not consumed:
            return
        entries = consumed if isinstance(consumed, list) else [consumed]
        for entry in entries:
            read = entry.get("ReadCapacityUnits")
            written = entry.get("WriteCapacityUnits")
            if read is None and written is None:
                # Only CapacityUnits: attribute it by the kind of call.
                units = float(entry.get("CapacityUnits", 0.0))
                if write:
                    self.write_units += units
                else:
                    self.read_units += units
            else:
                self.read_units += float(read or 0.0)
                self.write_units += float(written or 0.0)

    def merge(self, other: Capacity) -> Capacity:
        """Add ``other``'s units and calls to this one (returned)."""
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.calls += other.calls
        return self

    def as_dict(self) -> dict[str, float | int]:
        """The JSON form: ``readUnits``, ``writeUnits``, ``calls``."""
        return {"readUnits": self.read_units, "writeUnits": self.write_units, "calls": self.calls}


@dataclass
class Result:
    """What a mutating primitive returns: the outcome, why, and what it cost."""

    outcome: Outcome
    reason: str | None = None
    """Machine-readable detail: ``already_exists``, ``parent_missing``, ``threshold``..."""
    capacity: Capacity = field(default_factory=Capacity)
    attempts: int = 1
    contended_retries: int = 0
    """Attempts retried because of a conflict or a throttle ([`counters.core.engine.Report.contended_retries`][counters.core.engine.Report.contended_retries])."""
    value: object = None
    """Primitive-specific payload (new counter value, the item read to resolve ambiguity...):
    ``object``, as each primitive documents its own; a caller narrows it (``isinstance``)."""

    @property
    def succeeded(self) -> bool:
        """The outcome counts as success (APPLIED or DUPLICATE)."""
        return self.outcome.succeeded
