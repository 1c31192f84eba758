"""The pure parts of the Regions bench (bench/regions.py): percentiles over convergence samples,
DynamoDB item sizes, and the cost model of a write per global-table mode. No I/O; unit-tested in
tests/unit/test_bench_regions.py.

The cost model, in units (never prices), from AWS's pages (docs/regions.md cites them):

* A standard write costs 1 write unit per KB of item size, rounded up; a transactional write costs 2
  per KB ("Amazon DynamoDB pricing for on-demand capacity", https://aws.amazon.com/dynamodb/pricing/on-demand/;
  item size: "DynamoDB item sizes and formats",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
* On a global table every write is a *replicated* write unit (rWRU/rWCU) in the Region it is made in
  **and** in every other replica Region ("Understanding Amazon DynamoDB billing for global tables":
  "one rWRU per replica table is charged for each write up to 1KB"; "Best practices and requirements for
  managing global tables": 5 writes/s in Ohio and 5 in N. Virginia consume 10 rWCUs in both Regions).
  Replicated units are priced like single-Region units, so units compare directly.
* A replica applies the item's new version as one standard write (1 unit per KB) whatever the source
  request was (a transactional write replicates item by item: "How global tables work"). *To confirm*
  against the billing page: whether a replica of a transactional write is billed 1 or 2 units per KB.
* MRSC bills like MREC per replica Region (3 replicas); with 2 replicas and a witness, the witness holds
  no replica table and is counted with no write units here (*to confirm*). MRSC has no transaction API,
  so an operation that needs one has no MRSC cost: it is refused.
* Expiry (:func:`expiry_units`, items written with ``expiresAt``: ``ItemWrite(expires=True)``). A TTL
  delete costs no write units in the Region that deletes ("Using time to live (TTL) in DynamoDB": TTL
  deletes "without consuming write throughput"), but on a global table it is replicated and billed as a
  replicated write in every other replica ("Understanding Amazon DynamoDB billing for global tables").
  MRSC has no TTL: the expiry sweeper (counters.primitives.expiry) deletes with DeleteItem, a standard
  write of the item's size, billed in its Region and replicated to the others; so each emulated expiry
  costs as much as writing the item once more. Its Scan reads are :func:`sweep_read_units`: 0.5 read
  unit per 4 KB evaluated (eventually consistent), in the one Region whose run reads the page.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from counters.core.regions import GlobalTableMode

KB = 1024


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``: the smallest sample with at
    least ``q`` % of the samples at or below it (p50 of 1..4 is 2, p99 of 100 samples is the 99th)."""
    if not values:
        raise ValueError("no samples")
    if not 0 < q <= 100:
        raise ValueError(f"percentile must be in (0, 100]: {q}")
    ordered = sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _number_size(text: str) -> int:
    """Bytes of a DynamoDB number: 1 byte per two significant digits, plus 1."""
    digits = format(abs(Decimal(text)), "f").replace(".", "").strip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB JSON (``{"S": ...}``, ``{"N": ...}``, ``{"M": ...}``...),
    per "DynamoDB item sizes and formats" (list/map: 3 bytes + 1 byte per element + the elements)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in raw)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    raise ValueError(f"not a DynamoDB attribute value: {kind}")


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes of an item in DynamoDB JSON: its attribute names plus their values."""
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size_bytes: int, *, transactional: bool = False) -> int:
    """Write units of one write of an item of ``size_bytes`` (at least 1 KB is billed)."""
    units = max(1, math.ceil(size_bytes / KB))
    return 2 * units if transactional else units


@dataclass(frozen=True)
class ItemWrite:
    """One item an operation writes: its size in KB (rounded up), whether the request that writes it
    is a transaction, and how often per operation (``per`` < 1: amortized, e.g. one tally write per batch)."""

    what: str
    kb: int = 1
    transactional: bool = False
    per: float = 1.0
    expires: bool = False
    """Written with ``expiresAt``: deleted later by TTL, or on MRSC by the expiry sweeper (:func:`expiry_units`)."""

    @property
    def local(self) -> float:
        """Units in the Region the request is made in."""
        return (2 if self.transactional else 1) * self.kb * self.per

    @property
    def replica(self) -> float:
        """Units in each other replica Region: the new item version applied as one standard write."""
        return self.kb * self.per


REPLICAS = {GlobalTableMode.NONE: 1, GlobalTableMode.MREC: 2, GlobalTableMode.MRSC: 3}
"""Replica Regions per mode in this bench (MREC: the emulator's 2 Regions; MRSC: exactly 3)."""


def model_units(writes: Sequence[ItemWrite], mode: GlobalTableMode, replicas: int | None = None) -> float | None:
    """Write units one operation costs over every Region, or ``None`` if the mode refuses it (a
    transaction on MRSC). ``replicas``: how many Regions hold a replica (default :data:`REPLICAS`)."""
    if mode is GlobalTableMode.MRSC and any(w.transactional for w in writes):
        return None
    n = REPLICAS[mode] if replicas is None else replicas
    if mode is GlobalTableMode.NONE:
        n = 1
    return sum(w.local for w in writes) + (n - 1) * sum(w.replica for w in writes)


def expiry_units(writes: Sequence[ItemWrite], mode: GlobalTableMode, replicas: int | None = None) -> float:
    """Write units the later expiry of an operation's ``expires`` items costs over every Region: none on
    one Region (a TTL delete is free), the replicated deletes on MREC (``replicas`` - 1 per KB), and on
    MRSC the sweeper's DeleteItem in its Region plus its replicas (``replicas`` per KB: MRSC has no TTL)."""
    n = REPLICAS[mode] if replicas is None else replicas
    kb = sum(w.kb * w.per for w in writes if w.expires)
    if mode is GlobalTableMode.NONE:
        return 0.0
    if mode is GlobalTableMode.MREC:
        return (n - 1) * kb
    return n * kb


def sweep_read_units(scanned_bytes: int) -> float:
    """Read units of one sweep page that evaluated ``scanned_bytes`` (an eventually consistent Scan:
    0.5 unit per 4 KB, rounded up per page, filtered-out items included; "Read consumption for Scan")."""
    return 0.5 * max(1, math.ceil(scanned_bytes / (4 * KB)))


def ratio(units: float | None, single_region: float | None) -> str:
    """``units`` against the single-Region figure, as the bench prints ratios (``"-"`` if either is missing)."""
    if units is None or not single_region:
        return "-"
    return f"{units / single_region:.2f}x"
