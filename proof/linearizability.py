"""A linearizability checker for recorded histories: Wing & Gong's search with Lowe's memoization.

A history is a list of [`Call`][proof.linearizability.Call]s: each call's partition key, its input,
its output (``None``: the caller never learned it), and when it was invoked and when it returned
(any clock that only moves forward: ``time.monotonic_ns()`` or a logical counter). A call whose
outcome is unknown (ambiguous, a timeout, a 5xx never resolved) returns at infinity: it may take
effect at any point after its invocation, or never.

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
written here from those descriptions. Histories are partitioned by key (P-compositionality: a
history is linearizable iff each key's sub-history is). Entries are ordered by time, a call before
a return at the same instant (the two overlap). What keeps a full-size history (a thousand calls,
32 at once) decidable, each shortcut an exchange argument that keeps every witness:

* **unknown calls are optional**: they have no return entry, so they never block; one is placed
  only when it changes the state (``effect``, else its step as if answered ``ok``), and of the
  unknown calls with one input invoked so far only the earliest not yet placed is tried (their
  windows all reach infinity: any of them can stand for another). The cache counts them by input,
  and a configuration is skipped when one with no more of them used was met;
* **identical answered calls** (same input and answer) among the candidates: only the one that
  must return first is tried;
* **a read that matches, a refusal** (a call that never changes the state where it is legal) is
  taken as soon as it is legal, without a branch;
* the order in which the rest is tried (toward the answer of the read that must return first,
  then the call that must return first) only speeds the search.

A search that succeeds returns its witness, which [`witnessed`][proof.linearizability.witnessed]
checks again in one pass (real time, each step legal) before the partition is called linearizable;
NOT LINEARIZABLE means every configuration was explored. ``tests/unit/test_linearizability.py``
checks the search against enumeration of every order of small random histories.

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

    def measure(self, state: frozenset[str]) -> int:
        """What a ``("tally",)`` read of ``state`` answers (the search steers toward a waiting read)."""
        return len(state)

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

    def effect(self, state: frozenset[tuple[str, int]], input: tuple[Any, ...]) -> Iterable[Hashable]:
        return ()  # an unanswered add gave an id nobody was told: nothing a later call can check


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


READS = frozenset({"read", "tally", "member", "members"})


def _pure(model: Model, input: tuple[Any, ...], output: Any) -> bool:
    """Whether an answered call never changes the state where it is legal (``model.pure``, else a
    read or a refusal): taken as soon as it is legal, never branched on. (Moving such a call to the
    first point it may take keeps any witness a witness: it was a candidate, so every call that
    returned before its invocation is already placed, and the states after are the same.)"""
    pure = getattr(model, "pure", None)
    return bool(pure(input, output)) if pure is not None else input[0] in READS or output == FAIL


def _effect(model: Model, state: Hashable, input: tuple[Any, ...]) -> tuple[Hashable, ...]:
    """The states an unknown call may leave when it takes effect (``model.effect``, else as if answered ``ok``)."""
    effect = getattr(model, "effect", None)
    return tuple(effect(state, input) if effect is not None else model.step(state, input, OK))


def _seen(cache: dict[tuple[int, Hashable], list[tuple[int, ...]]], key: tuple[int, Hashable], applied: tuple[int, ...]) -> bool:
    """Lowe's cache, with unknown calls counted by kind: a configuration (answered calls placed,
    state, unknown calls used of each kind) is skipped when one with the same calls placed and state
    and no more unknown calls used of any kind was met (it could do all this one can); else recorded."""
    met = cache.setdefault(key, [])
    if any(all(x <= y for x, y in zip(old, applied, strict=True)) for old in met):
        return True
    met.append(applied)
    return False


def check_partition(model: Model, calls: Sequence[Call], budget: float = 60.0) -> list[int] | None:
    """One partition's witness linearization (indexes into ``calls``: every answered call once, the
    unknown calls that took effect), or ``None`` when no order exists (``Undecided`` past ``budget`` seconds)."""
    definite = [i for i, c in enumerate(calls) if c.output is not None]
    unknown = [i for i, c in enumerate(calls) if c.output is None]
    if not definite:
        return []
    # entries of the answered calls: (time, 0 call / 1 return, id); a call before a return at one instant
    entries = sorted([(calls[i].invoked, 0, i) for i in definite] + [(calls[i].returned, 1, i) for i in definite])
    size = len(entries)
    kind = [e[1] for e in entries]
    ident = [e[2] for e in entries]
    when = [e[0] for e in entries]
    match = [0] * size  # a call entry's return entry
    where: dict[int, int] = {}
    for pos in range(size):
        if kind[pos] == 0:
            where[ident[pos]] = pos
        else:
            match[where[ident[pos]]] = pos
    sig = {i: (calls[i].input, calls[i].output) for i in definite}
    pure = {s for s in sig.values() if _pure(model, *s)}
    # unknown calls by input, in invocation order: of those invoked, the earliest not yet applied stands for all
    classes: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    members: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i in sorted(unknown, key=lambda i: calls[i].invoked):
        classes[calls[i].input].append(calls[i].invoked)
        members[calls[i].input].append(i)
    names = list(classes)
    measure = getattr(model, "measure", None)  # a state as the number its reads answer (a set: its size)
    head = size
    nxt = [*range(1, size), -1, 0]
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

    def options(state: Hashable, applied: tuple[int, ...]) -> tuple[list[tuple[int, Hashable]], tuple[int, Hashable] | None]:
        """What may be linearized next: (answered call entry or ``-1 - class``, state after); or one
        move that loses nothing (an answered call that leaves the state as it is), taken alone."""
        found: list[tuple[int, Hashable]] = []
        best: dict[tuple[Any, ...], int] = {}  # of identical answered candidates, the one that must return first
        pos = nxt[head]
        while pos != -1 and kind[pos] == 0:
            s = sig[ident[pos]]
            if s not in best or when[match[pos]] < when[match[best[s]]]:
                best[s] = pos
            pos = nxt[pos]
        frontier = when[pos] if pos != -1 else INFINITY
        target: Any = None  # the answer of the waiting read that must return first
        for s, entry in best.items():
            steps = tuple(model.step(state, s[0], s[1]))
            for after in steps:
                if s in pure and after == state:
                    return [], (entry, after)  # a read that matches, a refusal: taking it now loses no order
                found.append((entry, after))
            if not steps and s in pure and s[0][0] in READS and isinstance(s[1], int) and not isinstance(s[1], bool):
                if target is None or when[match[entry]] < when[match[best[target[1]]]]:
                    target = (s[1], s)
        for k, name in enumerate(names):
            if applied[k] < len(classes[name]) and classes[name][applied[k]] <= frontier:
                found += [(-1 - k, after) for after in _effect(model, state, name) if after != state]

        def urgency(option: tuple[int, Hashable]) -> tuple[float, float]:
            """Toward the waiting read's answer first (integer states), then the call that must return first."""
            entry, after = option
            due = when[match[entry]] if entry >= 0 else INFINITY
            measured = measure(after) if measure is not None else after
            if target is not None and isinstance(measured, int):
                return (abs(measured - target[0]), due)
            return (0, due)

        found.sort(key=urgency)  # the order only speeds the search: every option is still tried
        return found, None

    state: Hashable = model.init()
    applied = tuple(0 for _ in names)
    bits = 0
    cache: dict[tuple[int, Hashable], list[tuple[int, ...]]] = {}
    # (choices, next to try, state, applied, move made)
    frames: list[tuple[list[tuple[int, Hashable]], int, Hashable, tuple[int, ...], int]] = []
    deadline = time.monotonic() + budget
    steps = 0
    choices, forced = options(state, applied)
    tried = 0
    while nxt[head] != -1:
        steps += 1
        if steps & 0x3FF == 0 and time.monotonic() > deadline:
            raise Undecided
        move: tuple[int, Hashable] | None = None
        if forced is not None:
            move, choices, tried = forced, [], 0
        while move is None and tried < len(choices):
            move = choices[tried]
            tried += 1
        advanced = False
        if move is not None:
            entry, after = move
            if entry >= 0:
                nbits, napplied = bits | (1 << ident[entry]), applied
            else:
                k = -1 - entry
                nbits, napplied = bits, (*applied[:k], applied[k] + 1, *applied[k + 1 :])
            if not _seen(cache, (nbits, after), napplied):
                frames.append((choices, tried, state, applied, entry))
                if entry >= 0:
                    lift(entry)
                state, bits, applied = after, nbits, napplied
                choices, forced = options(state, applied)
                tried = 0
                advanced = True
        if advanced:
            continue
        if move is not None and tried < len(choices):
            forced = None
            continue  # that choice was explored before: try the next
        while True:  # no choice leads on: undo the last move
            if not frames:
                return None
            choices, tried, state, applied, entry = frames.pop()
            if entry >= 0:
                bits &= ~(1 << ident[entry])
                unlift(entry)
            forced = None
            if tried < len(choices):
                break
    order: list[int] = []
    seen = [0] * len(names)
    for *_, entry in frames:
        if entry >= 0:
            order.append(ident[entry])
        else:
            k = -1 - entry
            order.append(members[names[k]][seen[k]])
            seen[k] += 1
    return order


def witnessed(model: Model, calls: Sequence[Call], order: Sequence[int]) -> bool:
    """Whether ``order`` is a linearization of ``calls``: every answered call once, unknown calls at
    most once, real time respected (a call that returned before another was invoked comes first),
    each step legal in the model. Checked apart from the search, in one pass."""
    answered = {i for i, c in enumerate(calls) if c.output is not None}
    if len(set(order)) != len(order) or not answered <= set(order):
        return False
    states = {model.init()}
    for i in order:
        call = calls[i]
        if call.output is None:
            states = {after for s in states for after in _effect(model, s, call.input)}
        else:
            states = {after for s in states for after in model.step(s, call.input, call.output)}
        if not states:
            return False
    earliest_return = INFINITY  # of the calls after this one in the order
    for i in reversed(order):
        if earliest_return < calls[i].invoked:
            return False  # a later call in the order returned before this one was invoked
        earliest_return = min(earliest_return, calls[i].returned)
    return True


def check(model: Model | dict[Hashable, Model], calls: Iterable[Call], budget: float = 60.0) -> Verdict:
    """Check every partition (by ``Call.key``) against ``model`` (or each key's own model); a
    partition is linearizable only with a witness that [`witnessed`][proof.linearizability.witnessed]
    confirms, NOT LINEARIZABLE only when the search found no order at all."""
    started = time.monotonic()
    parts: dict[Hashable, list[Call]] = defaultdict(list)
    for call in calls:
        parts[call.key].append(call)
    bad: list[Hashable] = []
    undecided: list[Hashable] = []
    worst = 0.0
    for key, part in parts.items():
        began = time.monotonic()
        own = model[key] if isinstance(model, dict) else model
        try:
            order = check_partition(own, part, budget)
        except Undecided:
            undecided.append(key)
        else:
            if order is None:
                bad.append(key)
            elif not witnessed(own, part, order):
                raise AssertionError(f"the search's witness for partition {key!r} is not a linearization")
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
