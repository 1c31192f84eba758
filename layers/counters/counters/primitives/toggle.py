"""A counted toggle whose latest request wins: one on/off state item per key, a tally on a parent.

Seed 01's like, ordered. Each key (a user's like of a post) has one **state item** that is kept
after it is switched off (a *tombstone*), so it always says what the last request did:

| attribute | meaning |
|---|---|
| ``<state>`` (e.g. ``liked``) | on/off; an item without it is *on* (written before tombstones existed) |
| ``changedAt``, ``changedBy`` | the [`Stamp`][counters.store.toggles.Stamp] (request time in ms, request id) of the latest request ordered on this key |
| ``requestId`` | the request that made the current state (a flip): "was it this request?" for a replay |
| ``expiresAt`` | tombstones only: TTL, ``changedAt`` + the horizon + a day |

A request carries its [`Stamp`][counters.store.toggles.Stamp]; stamps order requests totally (time, then id). ``set``:

* **flip** (the stored state differs and its stamp is older): one TransactWriteItems, the state
  item (new or flipped, stamped, ``requestId``) and ``ADD tally ±1`` on the parent: ``applied``;
* **same state**: nothing to count; a newer stamp is still recorded (a stamp-only write), so an
  older request of the other kind arriving later is stale: ``rejected`` / ``already_set``, or
  ``duplicate`` / ``own_request`` when the state is this request's own flip (a lost answer);
* **stale** (the state differs and the stored stamp is newer): nothing is written:
  ``rejected`` / ``stale`` (``value`` is the stored item). So a request deferred under contention
  and replayed after a later request of the other kind never undoes it: the latest request wins.
* switching off a key with no item writes a tombstone (with a ConditionCheck on the parent), so
  an older switch-on replayed later finds it.

One decision path for every way of counting ([`Toggle.set`][counters.primitives.toggle.Toggle.set]): the count goes
on the parent in the flip's transaction (above), on the writer's own tally item (a Region of a
global table: each version names its writer, and a Region counts only the versions it wrote), or
nowhere (the state item alone, its ``delta`` summed from the stream by an aggregator). The rounds
and the decision ([`newer_than`][counters.primitives.toggle.newer_than], who wrote the version it replaces) are the same; with one writer every
version is its own.

A request older than ``horizon`` (default 14 days) is ``rejected`` / ``stale`` without a read:
tombstones expire ``horizon`` + 1 day after their stamp, so only a request inside the horizon is
sure to find every newer stamp. The horizon must outlast any replay that can still arrive (the
retry queue's messages; a DLQ redrive makes them new messages, so the horizon, not the queues'
retention, is what bounds them). The ordering rule lives in [`newer_than`][counters.primitives.toggle.newer_than] so a mode that
counts elsewhere (a stream aggregator) can write the same state item under the same condition.

The requests (and the staleness condition, [`counters.store.toggles.stored_is_older`][counters.store.toggles.stored_is_older]) are in
[`counters.store.toggles`][counters.store.toggles]; a family's store instantiates them for its items (likes:
[`counters.store.posts`][counters.store.posts]).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Generic, TypeVar

from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.store.expr import Cond, Key
from counters.store.toggles import Guard, Owner, Stamp, StateItem, StateWrite, Tally, ToggleStore, ToggleWrite

__all__ = ["HORIZON_MS", "Guard", "Reason", "Stamp", "StateItem", "Tally", "Toggle", "newer_than", "now_ms"]

HORIZON_MS = 14 * 24 * 3600 * 1000  # RetryDLQ's retention: the longest a message waits without a redrive
"""The longest a request can wait to be replayed: the retry DLQ's retention (14 days)."""
TOMBSTONE_MARGIN_S = 24 * 3600  # clock skew between whoever stamped and whoever replays, with room to spare
ROUNDS = 4  # state re-read and re-decided this often when concurrent requests move it, then contention

P = TypeVar("P")
Plan = tuple[StateWrite, Owner, int]
"""The next write of a round: its kind, the writer whose version it may replace, what it counts here."""


class Reason(StrEnum):
    """Why [`Toggle.set`][counters.primitives.toggle.Toggle.set] did not flip (``Result.reason``; the values are the wire's strings)."""

    STALE = "stale"
    ALREADY_SET = "already_set"
    OWN_REQUEST = "own_request"
    PARENT_MISSING = "parent_missing"
    GUARD = "guard"
    TALLY_WOULD_GO_NEGATIVE = "tally_would_go_negative"
    MOVED = "moved"


@dataclass
class Toggled(Result, Generic[P]):
    """What [`Toggle.set`][counters.primitives.toggle.Toggle.set] returns: a [`Result`][counters.core.outcome.Result]
    whose ``value`` is typed, and whose ``parent`` is the parent's fact when the parent refused."""

    value: StateItem | None = None
    """The stored state item the request was answered from (``stale``, ``already_set``, ``own_request``), else ``None``."""
    parent: P | None = None
    """The tally item's fact when its half refused: ``guard`` (the parent fails its guard) or
    ``tally_would_go_negative`` (on, but the tally is 0); else ``None``."""


def now_ms() -> int:
    """The clock, in ms since the epoch."""
    return time.time_ns() // 1_000_000


def newer_than(stamp: Stamp, stored: Stamp | None) -> bool:
    """The rule [`counters.store.toggles.stored_is_older`][counters.store.toggles.stored_is_older] evaluates in DynamoDB, in Python."""
    return stored is None or stamp > stored


class Toggle(Generic[P]):
    """On/off per key, counted on a parent's tally, ordered by request stamps (latest wins).

    ``store`` holds the requests for the caller's items (state attribute, tally, revision: a
    number on the parent every flip also moves by one, so a repair can be conditioned on "nothing
    was counted since I read"); ``P`` is the fact the store makes of a parent item."""

    def __init__(self, store: ToggleStore[P], *, horizon_ms: int = HORIZON_MS, retry: RetryPolicy | None = None) -> None:
        self.store = store
        self.horizon_ms = horizon_ms
        self.retry = retry or RetryPolicy()

    def counted(self) -> Cond:
        """The filter keeping only the state items that count: state on."""
        return self.store.is_on()

    def expires_at(self, stamp: Stamp) -> int:
        """A tombstone's TTL (epoch seconds): it outlives every request older than its stamp."""
        return (stamp.at + self.horizon_ms) // 1000 + TOMBSTONE_MARGIN_S

    # ------------------------------------------------------------------------ set
    def set(
        self,
        key: Key,
        on: bool,
        stamp: Stamp,
        *,
        tally: Tally[P] | None = None,
        writer: str = "",
        attributes: Mapping[str, object] | None = None,
        delta_attribute: str | None = None,
    ) -> Toggled[P]:
        """Switch ``key`` on or off as the request ``stamp`` (the latest request wins); ``attributes``
        are written with a flip or a new tombstone (e.g. ``userId``, ``likedAt``).

        Where the count goes: ``tally`` given, a write that counts is one TransactWriteItems with
        ``ADD`` on that item ([`Tally`][counters.store.toggles.Tally]: the parent, whose ``guard`` is added to the
        condition, or the writer's own tally item); ``tally`` None, the state item is written alone
        and every write records ``delta_attribute``, what it changed the count by (+1 / -1 for a
        flip, 0 otherwise), for a reader of the table's stream to sum
        ([`counters.primitives.aggregator`][counters.primitives.aggregator]; the caller checks the parent: the hot mode
        reads the post first). With ``tally``, ``delta_attribute`` (if named) is 0 on every write:
        this write is counted here, not from a stream.

        ``writer`` (``""``: one writer): the name every version carries (a Region of a global
        table). A write counts ``[the new version is on] - [the replaced version was on and this
        writer's]``, conditioned on the stored writer so the count and the replaced version agree;
        a version another writer replaced is taken off by this writer's aggregator
        ([`counters.streams.regional_change`][counters.streams.regional_change]). With one writer every version is its own.

        Outcomes (reasons are [`Reason`][counters.primitives.toggle.Reason]): ``applied`` (flipped, counted); ``duplicate``
        / ``own_request`` (the state is this request's own flip); ``rejected`` with
        ``already_set`` (the state is already ``on``; a newer stamp was recorded), ``stale`` (a
        newer request set the other state, or the request is older than the horizon; ``value``
        is the stored [`StateItem`][counters.store.toggles.StateItem]), ``parent_missing`` (a parent ``tally`` only), ``guard``
        (the parent fails its guard; ``parent`` is the parent's fact), ``tally_would_go_negative``
        (integrity: on, but the tally is 0; ``parent`` is the tally item's fact), ``moved`` (the key
        holds a pointer, ``value.points_to``: nothing written; the caller writes where it points);
        ``contention``.
        """
        capacity, attempts, contended = Capacity(), 0, 0
        extra = dict(attributes or {})

        def done(outcome: Outcome, reason: Reason | None = None, value: StateItem | None = None, parent: P | None = None) -> Toggled[P]:
            return Toggled(outcome, reason, capacity, attempts, contended, value, parent)

        if stamp.at < now_ms() - self.horizon_ms:
            return done(Outcome.REJECTED, Reason.STALE)  # its tombstones may be gone: it cannot be ordered
        plan: Plan | None = (StateWrite.FLIP, Owner.ANY, 1) if on else (StateWrite.FLIP, Owner.MINE, -1)
        for _ in range(ROUNDS):
            assert plan is not None
            kind, owner, delta = plan
            every = {} if delta_attribute is None else {delta_attribute: 0 if tally is not None else delta}
            write = ToggleWrite(kind, on, stamp, owner, every, extra, self.expires_at(stamp))
            written = self.store.write(key, write, writer=writer, tally=tally, delta=delta, policy=self.retry, capacity=capacity)
            report = written.report
            attempts += report.attempts
            contended += report.contended_retries  # a round re-decided after a refusal is no retry under pressure
            if report.outcome is Outcome.APPLIED:
                return done(Outcome.APPLIED) if kind is StateWrite.FLIP else done(Outcome.REJECTED, Reason.ALREADY_SET)
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return done(report.outcome)  # contention: safe to re-drive with the same stamp
            if written.paired and tally is not None:  # a transaction with the tally's item
                if tally.parent and written.parent_refused and written.parent is None:
                    return done(Outcome.REJECTED, Reason.PARENT_MISSING)
                if not written.state_refused:  # the tally's half refused
                    if tally.guard is not None and written.parent is not None and not tally.guard.holds(written.parent):
                        return done(Outcome.REJECTED, Reason.GUARD, parent=written.parent)
                    return done(Outcome.REJECTED, Reason.TALLY_WOULD_GO_NEGATIVE, parent=written.parent)  # on, yet the tally is 0
            if written.stored is not None and written.stored.points_to is not None:
                return done(Outcome.REJECTED, Reason.MOVED, written.stored)  # a pointer: the caller writes where it points
            plan = self._decide(written.stored, on, stamp, writer)
            if plan is None:
                assert written.stored is not None  # _decide answers a write when nothing is stored
                return self._verdict(written.stored, on, stamp, done)
        return done(Outcome.CONTENTION)  # the state kept moving under concurrent requests

    @staticmethod
    def _decide(stored: StateItem | None, on: bool, stamp: Stamp, writer: str) -> Plan | None:
        """The next write (kind, the writer whose version it may replace, what it counts here),
        given the state that refused the last write; ``None``: nothing to write."""
        if stored is None:  # nothing stored: a new like, or an unlike's tombstone
            return (StateWrite.FLIP, Owner.ANY, 1) if on else (StateWrite.TOMBSTONE, Owner.ANY, 0)
        newer, mine = newer_than(stamp, stored.stamp), not writer or stored.writer == writer
        if stored.on == on:
            if not newer or stored.request_id == stamp.by:
                return None
            if on:  # a version on re-written here: this writer's now (another writer's counts it off)
                return (StateWrite.RESTAMP, Owner.MINE, 0) if mine else (StateWrite.RESTAMP, Owner.THEIRS, 1)
            return StateWrite.RESTAMP, Owner.ANY, 0
        if not newer:
            return None  # the other state, set by a newer request: stale
        if on:
            return StateWrite.FLIP, Owner.ANY, 1
        return (StateWrite.FLIP, Owner.MINE, -1) if mine else (StateWrite.FLIP, Owner.THEIRS, 0)

    @staticmethod
    def _verdict(stored: StateItem, on: bool, stamp: Stamp, done: Callable[[Outcome, Reason | None, StateItem], Toggled[P]]) -> Toggled[P]:
        if stored.on != on:
            return done(Outcome.REJECTED, Reason.STALE, stored)  # a newer request set the other state
        if stored.request_id == stamp.by:
            return done(Outcome.DUPLICATE, Reason.OWN_REQUEST, stored)  # this request's flip (an answer was lost)
        return done(Outcome.REJECTED, Reason.ALREADY_SET, stored)
