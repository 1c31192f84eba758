"""A Jepsen-style checker for counters: intents, acknowledgements, outcomes and reads.

Every operation is recorded with its intent (a signed delta and a distinct intent id), when
it was invoked and when it returned, and what the caller was told:

* ``ok``      acknowledged: the caller was told it applied (applied/duplicate, 2xx/202);
* ``fail``    definitely not applied (rejected, 4xx);
* ``unknown`` the caller cannot know (ambiguous, contention, 5xx, exception).

Checks:

* **reads**: a read that ran from t0 to t1 must lie within [base + acknowledged deltas
  completed before t0, base + every delta invoked before t1 that was not definitely failed]
  (for counters whose deltas are all >= 0; mixed signs widen the window per sign);
* **final**: the final value against the distinct intents: over-count (above everything that
  may have applied), under-count (below everything acknowledged), duplicates (an intent that
  applied more than once, where the table lets us see it);
* **thresholds**: any read or final value outside [floor, ceiling].

A verdict compares what was measured with what the approach documents: ``exact`` approaches
must show no over-count, under-count, duplicate or breach; ``over``/``under`` approaches may
err only on their documented side.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from proof.linearizability import Verdict


@dataclass
class Op:
    intent: str
    delta: int
    invoked: float
    returned: float = 0.0
    status: str = "unknown"  # ok | fail | unknown


@dataclass
class Read:
    value: int
    invoked: float
    returned: float


@dataclass
class Report:
    name: str
    operations: int
    faults: int
    over: int
    under: int
    duplicates: int
    breaches: int
    bad_reads: int
    final: int
    acknowledged: int
    possible: int
    documented: str  # exact | over | under
    unknown: int = 0
    """Intents whose outcome the caller was never told (ambiguous, contention)."""
    notes: list[str] = field(default_factory=list)
    unexercised: list[str] = field(default_factory=list)
    """Faults or perturbations the scenario was meant to inject that did not happen often enough:
    the run proved less than it claims (verdict ``UNDERPOWERED`` unless something broke)."""
    linearizable: Verdict | None = None
    """The recorded history checked against the approach's model ([`proof.linearizability`][proof.linearizability]);
    ``None``: the row records no history. ``NOT LINEARIZABLE`` makes the row ``VIOLATED``."""

    @property
    def verdict(self) -> str:
        if self.documented == "exact":
            ok = not (self.over or self.under or self.duplicates or self.breaches or self.bad_reads)
        elif self.documented == "over":  # may over-count, never under-count or breach
            ok = not (self.under or self.breaches)
        else:  # under: may under-count, never over-count or breach
            ok = not (self.over or self.duplicates or self.breaches)
        if self.linearizable is not None and self.linearizable.result == "NOT LINEARIZABLE":
            ok = False
        if ok and self.unexercised:
            return "UNDERPOWERED"
        return "holds" if ok else "VIOLATED"


class History:
    """Thread-safe record of one counter's operations and reads."""

    def __init__(self, base: int = 0, floor: int | None = None, ceiling: int | None = None) -> None:
        self.base, self.floor, self.ceiling = base, floor, ceiling
        self.ops: list[Op] = []
        self.reads: list[Read] = []
        self._lock = threading.Lock()

    def invoke(self, intent: str, delta: int) -> Op:
        op = Op(intent, delta, time.monotonic())
        with self._lock:
            self.ops.append(op)
        return op

    @staticmethod
    def complete(op: Op, status: str) -> None:
        op.status = status
        op.returned = time.monotonic()

    def read(self, value: int, invoked: float) -> None:
        with self._lock:
            self.reads.append(Read(value, invoked, time.monotonic()))

    def _window(self, t0: float, t1: float) -> tuple[int, int]:
        """[low, high] a value observed between t0 and t1 may take."""
        low = high = self.base
        for op in self.ops:
            if op.status == "fail" or op.invoked > t1:
                continue
            done_before = op.status == "ok" and op.returned and op.returned < t0
            if op.delta >= 0:
                high += op.delta
                low += op.delta if done_before else 0
            else:
                low += op.delta
                high += op.delta if done_before else 0
        return low, high

    def check(self, name: str, final: int, *, documented: str, faults: int = 0, applied_counts: dict[str, int] | None = None) -> Report:
        acknowledged = self.base + sum(op.delta for op in self.ops if op.status == "ok")
        possible_high = (
            self.base
            + sum(op.delta for op in self.ops if op.status != "fail" and op.delta > 0)
            + sum(op.delta for op in self.ops if op.status == "ok" and op.delta < 0)
        )
        possible_low = (
            self.base
            + sum(op.delta for op in self.ops if op.status == "ok" and op.delta > 0)
            + sum(op.delta for op in self.ops if op.status != "fail" and op.delta < 0)
        )
        bad_reads = 0
        for read in self.reads:
            low, high = self._window(read.invoked, read.returned)
            if not low <= read.value <= high:
                bad_reads += 1
        values = [r.value for r in self.reads] + [final]
        breaches = sum(1 for v in values if (self.floor is not None and v < self.floor) or (self.ceiling is not None and v > self.ceiling))
        duplicates = sum(n - 1 for n in (applied_counts or {}).values() if n > 1)
        return Report(
            name=name,
            operations=len(self.ops),
            faults=faults,
            over=max(0, final - possible_high),
            under=max(0, possible_low - final),
            duplicates=duplicates,
            breaches=breaches,
            bad_reads=bad_reads,
            final=final,
            acknowledged=acknowledged,
            possible=possible_high,
            documented=documented,
            unknown=sum(1 for op in self.ops if op.status == "unknown"),
        )


def table(reports: list[Report]) -> str:
    lines = [
        "| scenario | documented | intents | faults injected | unknown outcomes | final | acknowledged | possible | over-count | under-count | duplicates | breaches | bad reads | linearizability | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r.name} | {r.documented} | {r.operations} | {r.faults} | {r.unknown} | {r.final} | {r.acknowledged} | {r.possible} | {r.over} | {r.under} | {r.duplicates} | {r.breaches} | {r.bad_reads} | {r.linearizable.cell() if r.linearizable else '–'} | {r.verdict} |"
        )
    return "\n".join(lines)


def details(reports: list[Report]) -> str:
    """Each report's notes (and what it did not exercise), under the table."""
    out = []
    for r in reports:
        items = list(r.notes) + ([f"not exercised enough: {', '.join(r.unexercised)}"] if r.unexercised else [])
        if items:
            out.append(f"- **{r.name}**: " + "; ".join(items))
    return "\n".join(out)
