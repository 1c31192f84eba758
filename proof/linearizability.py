"""A linearizability checker for recorded histories: Wing & Gong's search with Lowe's memoization.

A history is a list of [`Call`][proof.linearizability.Call]s: each call's partition key, its input,
its output (``None``: the caller never learned it), and when it was invoked and when it returned
(any clock that only moves forward: ``time.monotonic_ns()`` or a logical counter). A call whose
outcome is unknown (ambiguous, a timeout, a 5xx never resolved) returns at infinity: it may take
effect at any point after its invocation, or never (its model's step offers both).

The history is linearizable when there is one total order of the calls that respects real time
(a call that returned before another was invoked comes first) and in which every call, applied to
the model's state in that order, gives the output recorded. The search is the algorithm of

* J. M. Wing and C. Gong, "Testing and Verifying Concurrent Objects", Journal of Parallel and
  Distributed Computing 17(1-2), 1993: a depth-first search over the calls that may be linearized
  next, undone on a dead end;
* G. Lowe, "Testing for Linearizability", Concurrency and Computation: Practice and Experience
  29(4), 2017: memoization of (set of calls linearized, model state), so a configuration met twice
  is explored once;

as Porcupine (Anish Athalye, github.com/anishathalye/porcupine, ``checker.go``: the entry list, the
lift/unlift of call and return entries, the cache keyed by the linearized bitset) implements them,
written here from those descriptions. Two of Porcupine's choices are kept: histories are
partitioned by key (P-compositionality: a history is linearizable iff each key's sub-history is),
and a nondeterministic model is checked as its powerset (a state is the set of states the object
may be in; a step maps each and keeps the union, illegal when empty). Entries are ordered by time,
a call before a return at the same instant (the two overlap). One change of order, not of
outcome: of identical calls (an unknown call's re-sends) only the first not yet linearized is tried.

Models ([`BoundedCounter`][proof.linearizability.BoundedCounter], [`SumRegister`][proof.linearizability.SumRegister],
[`LikeSet`][proof.linearizability.LikeSet], [`GrowOnlySet`][proof.linearizability.GrowOnlySet],
[`MonotonicRegister`][proof.linearizability.MonotonicRegister]) define ``init`` and ``step``.
[`check`][proof.linearizability.check] gives a [`Verdict`][proof.linearizability.Verdict] with its cost;
a partition whose search outlasts its budget is ``unknown``, never called linearizable.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

INFINITY = math.inf
OK, FAIL = "ok", "fail"


@dataclass(frozen=True)
class Call:
    """One call of a history. ``output`` ``None``: unknown (then ``returned`` is infinity)."""

    key: Hashable
    input: tuple[Any, ...]
    output: Any
    invoked: float
    returned: float = INFINITY


class Model(Protocol):
    """An object's sequential specification: its first state and what one call may do to a state."""

    def init(self) -> Hashable: ...

    def step(self, state: Any, input: tuple[Any, ...], output: Any) -> Iterable[Hashable]:
        """Every state the object may be in after ``input`` answered ``output`` in ``state`` (none: illegal)."""
        ...


@dataclass(frozen=True)
class BoundedCounter:
    """Reservations: ``("reserve", n)`` / ``("release", n)`` answered ``ok`` or ``fail``, ``("read",)``
    answered the count. The count stays in [0, ``capacity``]; a ``fail`` is a refusal by the
    threshold (``n`` did not fit then). Each call applies at most once (an acknowledged one once,
    an unknown one once or never): exact approaches, and the one-sided ``under`` ones (atomic
    ``under``, occ: never above what was acknowledged plus what was ambiguous). For ``over``, check
    [`resent`][proof.linearizability.resent]'s history. ``strict_fail=False``: a ``fail`` only says
    "not applied" (a sharded take may refuse on the shards it saw)."""

    capacity: int
    strict_fail: bool = True

    def init(self) -> int:
        return 0

    def step(self, state: int, input: tuple[Any, ...], output: Any) -> Iterable[int]:
        kind = input[0]
        if kind == "read":
            return (state,) if output == state else ()
        after = state + (input[1] if kind == "reserve" else -input[1])
        fits = 0 <= after <= self.capacity
        if output == FAIL:
            return (state,) if not (self.strict_fail and fits) else ()
        applied = (after,) if fits else ()
        return applied if output == OK else (state, *applied)  # unknown: never, or as it would have applied


def resent(calls: Iterable[Call], sends: int) -> list[Call]:
    """The history of an ``over`` approach (atomic ``over``: an unknown outcome re-sent until a
    definite answer, each send applied or not): every call that was not refused becomes its
    answered send plus ``sends - 1`` unknown ones invoked with it, each of which may apply once at
    any point after (a send that timed out may land even after the call returned). Checked with
    the at-most-once model this is "never below what was acknowledged", above it by at most
    ``sends`` applications a call, each at its own point."""
    out: list[Call] = []
    for call in calls:
        out.append(call)
        if call.input[0] != "read" and call.output != FAIL:
            out += [Call(call.key, call.input, None, call.invoked)] * (sends - 1)
    return out


@dataclass(frozen=True)
class SumRegister:
    """A ledger: ``("append", amount)`` answered ``ok``/``fail``, ``("read",)`` answered the balance
    (``initial`` before any). Also a set's size when every call adds or removes a distinct member
    once (a like of a user not liked: +1; an unlike of one liked: -1)."""

    initial: int = 0

    def init(self) -> int:
        return self.initial

    def step(self, state: int, input: tuple[Any, ...], output: Any) -> Iterable[int]:
        if input[0] == "read":
            return (state,) if output == state else ()
        if output == FAIL:
            return (state,)
        return (state + input[1],) if output == OK else (state, state + input[1])


@dataclass(frozen=True)
class LikeSet:
    """A standard post's likes: ``("like", user)`` / ``("unlike", user)`` answered ``ok``/``fail``
    (idempotent: a like of a liked user changes nothing), ``("tally",)`` answered the count,
    ``("member", user)`` answered a bool."""

    def init(self) -> frozenset[str]:
        return frozenset()

    def step(self, state: frozenset[str], input: tuple[Any, ...], output: Any) -> Iterable[frozenset[str]]:
        kind = input[0]
        if kind == "tally":
            return (state,) if output == len(state) else ()
        if kind == "member":
            return (state,) if output == (input[1] in state) else ()
        after = state | {input[1]} if kind == "like" else state - {input[1]}
        if output == FAIL:
            return (state,)
        return (after,) if output == OK else (state, after)


@dataclass(frozen=True)
class GrowOnlySet:
    """Unique ids: ``("add", key)`` answered the id given to ``key`` (one id per key, an id given
    to one key only), ``("members",)`` answered the frozenset of ids given so far."""

    def init(self) -> frozenset[tuple[str, int]]:
        return frozenset()

    def step(self, state: frozenset[tuple[str, int]], input: tuple[Any, ...], output: Any) -> Iterable[Hashable]:
        if input[0] == "members":
            return (state,) if output == frozenset(i for _, i in state) else ()
        if output is None:
            return (state,)  # an unanswered request gave nobody an id we know of
        key, given = input[1], output
        for k, i in state:
            if (k == key) != (i == given):
                return ()  # this key had another id, or this id another key
        return (state | {(key, given)},)


@dataclass(frozen=True)
class MonotonicRegister:
    """The pointer: ``("advance", v)`` answered ``ok`` (or unknown), ``("read",)`` answered the value (0 before any)."""

    def init(self) -> int:
        return 0

    def step(self, state: int, input: tuple[Any, ...], output: Any) -> Iterable[int]:
        if input[0] == "read":
            return (state,) if output == state else ()
        after = max(state, input[1])
        if output == FAIL:
            return (state,)
        return (after,) if output == OK else (state, after)


@dataclass
class Verdict:
    """What [`check`][proof.linearizability.check] found: ``result`` is ``linearizable``,
    ``NOT LINEARIZABLE`` (``bad`` names the partitions) or ``unknown`` (a search outlasted its budget)."""

    result: str
    calls: int
    partitions: int
    seconds: float
    worst_partition: float
    bad: list[Hashable] = field(default_factory=list)
    undecided: list[Hashable] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Calls checked a second."""
        return self.calls / self.seconds if self.seconds > 0 else float("inf")

    def cell(self) -> str:
        """The proof table's cell: the verdict, and its cost."""
        if self.undecided and not self.bad:
            return f"unknown ({self.calls} calls: the search outlasted its budget, {self.seconds:.0f} s)"
        return f"{self.result} ({self.calls} calls, {self.seconds:.2f} s)"


class Undecided(Exception):
    """The search of one partition outlasted its budget."""


def _powerset_step(model: Model, states: frozenset[Hashable], call: Call) -> frozenset[Hashable]:
    return frozenset(after for state in states for after in model.step(state, call.input, call.output))


def check_partition(model: Model, calls: Sequence[Call], budget: float = 60.0) -> bool:
    """Whether one partition's calls are linearizable (``Undecided`` past ``budget`` seconds)."""
    n = len(calls)
    if n == 0:
        return True
    # entries: (time, 0 for a call / 1 for a return, id); calls before returns at the same time
    entries = sorted([(c.invoked, 0, i) for i, c in enumerate(calls)] + [(c.returned, 1, i) for i, c in enumerate(calls)])
    size = len(entries)
    kind = [e[1] for e in entries]
    ident = [e[2] for e in entries]
    match = [0] * size  # a call entry's return entry
    where = [0] * n
    for pos in range(size):
        if kind[pos] == 0:
            where[ident[pos]] = pos
        else:
            match[where[ident[pos]]] = pos
    # identical calls (same input, output and times: a call's unknown re-sends) are interchangeable:
    # only the first of them not yet linearized is tried, so the cache never holds their permutations
    twin = [-1] * n
    seen: dict[tuple[Any, ...], int] = {}
    for i, call in enumerate(calls):
        sig = (call.input, call.output, call.invoked, call.returned)
        twin[i] = seen.get(sig, -1)
        seen[sig] = i
    # a doubly linked list over the entries, with a head sentinel at index ``size``
    head = size
    nxt = [*range(1, size), -1, 0]  # the last entry ends the list (-1); the head points at entry 0
    prv = [head, *range(0, size - 1), -1]

    def lift(pos: int) -> None:
        for p in (pos, match[pos]):
            a, b = prv[p], nxt[p]
            nxt[a] = b
            if b != -1:
                prv[b] = a

    def unlift(pos: int) -> None:
        for p in (match[pos], pos):
            a, b = prv[p], nxt[p]
            nxt[a] = p
            if b != -1:
                prv[b] = p

    def candidates() -> list[int]:
        """The call entries that may be linearized next (those before the first return entry), in
        invocation order, as Porcupine tries them (earliest response first was tried: it left occ's
        small histories, whose unknown calls it tries last, undecided)."""
        found, pos = [], nxt[head]
        while pos != -1 and kind[pos] == 0:
            found.append(pos)
            pos = nxt[pos]
        return found

    state: frozenset[Hashable] = frozenset([model.init()])
    linearized = 0
    cache: set[tuple[int, frozenset[Hashable]]] = set()
    frames: list[tuple[list[int], int, frozenset[Hashable], int]] = []  # (candidates, next to try, state, entry lifted)
    options, tried = candidates(), 0
    deadline = time.monotonic() + budget
    steps = 0
    while nxt[head] != -1:
        steps += 1
        if steps & 0xFFF == 0 and time.monotonic() > deadline:
            raise Undecided
        chosen = False
        while tried < len(options):
            entry = options[tried]
            tried += 1
            me = ident[entry]
            if twin[me] >= 0 and not linearized >> twin[me] & 1:
                continue  # its identical predecessor comes first
            after = _powerset_step(model, state, calls[me])
            bits = linearized | (1 << me)
            if after and (bits, after) not in cache:
                cache.add((bits, after))
                frames.append((options, tried, state, entry))
                state, linearized = after, bits
                lift(entry)
                options, tried, chosen = candidates(), 0, True
                break
        if not chosen:  # no candidate leads on: undo the last choice
            if not frames:
                return False
            options, tried, state, entry = frames.pop()
            linearized &= ~(1 << ident[entry])
            unlift(entry)
    return True


def check(model: Model | dict[Hashable, Model], calls: Iterable[Call], budget: float = 60.0) -> Verdict:
    """Check every partition (by ``Call.key``) against ``model`` (or each key's own model)."""
    started = time.monotonic()
    parts: dict[Hashable, list[Call]] = defaultdict(list)
    for call in calls:
        parts[call.key].append(call)
    bad: list[Hashable] = []
    undecided: list[Hashable] = []
    worst = 0.0
    for key, part in parts.items():
        began = time.monotonic()
        try:
            if not check_partition(model[key] if isinstance(model, dict) else model, part, budget):
                bad.append(key)
        except Undecided:
            undecided.append(key)
        worst = max(worst, time.monotonic() - began)
    result = "NOT LINEARIZABLE" if bad else "unknown" if undecided else "linearizable"
    total = sum(len(p) for p in parts.values())
    return Verdict(result, total, len(parts), time.monotonic() - started, worst, bad, undecided)


class Recorder:
    """A thread-safe history being recorded: ``invoke`` before the call, ``ok``/``fail``/``value``
    when it answers; a call never completed stays unknown (returns at infinity)."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._open: dict[int, tuple[Hashable, tuple[Any, ...], float]] = {}
        self.calls: list[Call] = []
        self._next = 0

    def invoke(self, key: Hashable, *input: Any) -> int:
        with self._lock:
            self._next += 1
            self._open[self._next] = (key, tuple(input), float(time.monotonic_ns()))
            return self._next

    def complete(self, handle: int, output: Any) -> None:
        """The call answered ``output`` (``None``: unknown, it stays open at infinity)."""
        now = float(time.monotonic_ns())
        with self._lock:
            key, input, invoked = self._open.pop(handle)
            self.calls.append(Call(key, input, output, invoked, INFINITY if output is None else now))

    def drop(self, handle: int) -> None:
        """Forget a call that has no effect and answered nothing (a read that failed)."""
        with self._lock:
            self._open.pop(handle)

    def history(self) -> list[Call]:
        """Every call: the completed ones and, as unknown, any still open."""
        with self._lock:
            return [*self.calls, *(Call(k, i, None, t) for k, i, t in self._open.values())]
