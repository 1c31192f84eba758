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
from enum import Enum, StrEnum
from typing import Generic, TypeVar

from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome, Result
from counters.store.expr import Cond, Key
from counters.store.toggles import Guard, Owner, RegionalWrite, Stamp, StateItem, StateWrite, ToggleStore, Written

__all__ = ["HORIZON_MS", "Guard", "Reason", "Stamp", "StateItem", "Toggle", "newer_than", "now_ms"]

HORIZON_MS = 14 * 24 * 3600 * 1000  # RetryDLQ's retention: the longest a message waits without a redrive
"""The longest a request can wait to be replayed: the retry DLQ's retention (14 days)."""
TOMBSTONE_MARGIN_S = 24 * 3600  # clock skew between whoever stamped and whoever replays, with room to spare
ROUNDS = 4  # state re-read and re-decided this often when concurrent requests move it, then contention

P = TypeVar("P")


class Reason(StrEnum):
    """Why [`Toggle.set`][counters.primitives.toggle.Toggle.set] did not flip (``Result.reason``; the values are the wire's strings)."""

    STALE = "stale"
    ALREADY_SET = "already_set"
    OWN_REQUEST = "own_request"
    PARENT_MISSING = "parent_missing"
    GUARD = "guard"
    TALLY_WOULD_GO_NEGATIVE = "tally_would_go_negative"


class Write(Enum):
    """The next write of a [`Toggle.set`][counters.primitives.toggle.Toggle.set] round."""

    FLIP = "flip"  # the state item flipped (and, with a parent, the tally moved)
    TOMBSTONE = "tombstone"  # switching off a key with no item: a tombstone
    RESTAMP = "restamp"  # the state is already the requested one: record the newer stamp only


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
        parent: Key,
        key: Key,
        on: bool,
        stamp: Stamp,
        *,
        attributes: Mapping[str, object] | None = None,
        every_write: Mapping[str, object] | None = None,
        guard: Guard[P] | None = None,
    ) -> Result:
        """Switch ``key`` on or off as the request ``stamp``; ``attributes`` are written with a
        flip or a new tombstone (e.g. ``userId``, ``likedAt``), ``every_write`` with every write,
        a stamp-only one too (e.g. ``delta = 0``: this write is counted here, not from a stream);
        ``guard`` is added to the parent's condition in a flip.

        Outcomes (reasons are [`Reason`][counters.primitives.toggle.Reason]): ``applied`` (flipped, tally moved); ``duplicate``
        / ``own_request`` (the state is this request's own flip); ``rejected`` with
        ``already_set`` (the state is already ``on``; a newer stamp was recorded), ``stale`` (a
        newer request set the other state, or the request is older than the horizon; ``value``
        is the stored [`StateItem`][counters.store.toggles.StateItem]), ``parent_missing``, ``guard`` (the parent fails
        ``guard``; ``value`` is the parent's fact), ``tally_would_go_negative`` (integrity: on,
        but the tally is 0; ``value`` is the parent's fact); ``contention``.
        """
        return self._set(parent, key, on, stamp, dict(attributes or {}), None, dict(every_write or {}), guard)

    def set_alone(
        self, key: Key, on: bool, stamp: Stamp, *, attributes: Mapping[str, object] | None = None, delta_attribute: str = "delta"
    ) -> Result:
        """[`set`][counters.primitives.toggle.Toggle.set] without the tally: the state item is written alone, one conditional write
        under the same rule (the latest request wins), and every write records on it
        ``delta_attribute``, what it changed the count by: ``+1`` / ``-1`` for a flip, ``0`` for
        a stamp-only write or a new tombstone. A reader of the table's stream (NEW_IMAGE) sums
        the deltas to keep the tally elsewhere ([`counters.primitives.aggregator`][counters.primitives.aggregator]).

        The parent is not checked (the caller does it: the hot mode reads the post first).
        Outcomes as [`set`][counters.primitives.toggle.Toggle.set], without ``parent_missing`` and ``tally_would_go_negative``.
        """
        return self._set(None, key, on, stamp, dict(attributes or {}), delta_attribute, {}, None)

    def _send(
        self,
        write: Write,
        parent: Key | None,
        key: Key,
        on: bool,
        stamp: Stamp,
        attributes: dict[str, object],
        delta: str | None,
        every: dict[str, object],
        guard: Guard[P] | None,
        capacity: Capacity,
    ) -> Written[P]:
        """One write: ``parent`` None (``delta`` named), the state item alone; else a transaction
        with the parent's tally (a restamp is always the state item alone)."""
        ttl, store, policy = self.expires_at(stamp), self.store, self.retry
        if delta is not None:  # alone: one conditional write that says what it counted
            if write is Write.FLIP:
                return store.flip_alone(key, on, stamp, {**attributes, delta: 1 if on else -1}, ttl, policy=policy, capacity=capacity)
            if write is Write.TOMBSTONE:
                return store.tombstone_alone(key, stamp, {**attributes, delta: 0}, ttl, policy=policy, capacity=capacity)
            return store.restamp(key, on, stamp, {delta: 0}, ttl, policy=policy, capacity=capacity)
        if parent is None:
            raise ValueError("a counted write needs its parent")
        if write is Write.FLIP:
            return store.flip(parent, key, on, stamp, {**attributes, **every}, ttl, guard, policy=policy, capacity=capacity)
        if write is Write.TOMBSTONE:
            return store.tombstone(parent, key, stamp, {**attributes, **every}, ttl, policy=policy, capacity=capacity)
        return store.restamp(key, on, stamp, every, ttl, policy=policy, capacity=capacity)

    def _set(
        self,
        parent: Key | None,
        key: Key,
        on: bool,
        stamp: Stamp,
        attributes: dict[str, object],
        delta: str | None,
        every: dict[str, object],
        guard: Guard[P] | None,
    ) -> Result:
        """``delta`` None: a transaction with the parent's tally; a name: the state item alone."""
        capacity, attempts, contended = Capacity(), 0, 0

        def done(outcome: Outcome, reason: Reason | None = None, value: object = None) -> Result:
            return Result(outcome, reason=reason, capacity=capacity, attempts=attempts, contended_retries=contended, value=value)

        if stamp.at < now_ms() - self.horizon_ms:
            return done(Outcome.REJECTED, Reason.STALE)  # its tombstones may be gone: it cannot be ordered
        write: Write | None = Write.FLIP
        for _ in range(ROUNDS):
            assert write is not None
            written = self._send(write, parent, key, on, stamp, attributes, delta, every, guard, capacity)
            report = written.report
            attempts += report.attempts
            contended += report.contended_retries  # a round re-decided after a refusal is no retry under pressure
            if report.outcome is Outcome.APPLIED:
                return done(Outcome.APPLIED) if write is Write.FLIP else done(Outcome.REJECTED, Reason.ALREADY_SET)
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return done(report.outcome)  # contention: safe to re-drive with the same stamp
            paired = delta is None and write is not Write.RESTAMP  # a transaction with the parent
            if paired and written.parent_refused and written.parent is None:
                return done(Outcome.REJECTED, Reason.PARENT_MISSING)
            if paired and not written.state_refused:
                if guard is not None and written.parent is not None and not guard.holds(written.parent):
                    return done(Outcome.REJECTED, Reason.GUARD, written.parent)
                return done(Outcome.REJECTED, Reason.TALLY_WOULD_GO_NEGATIVE, written.parent)  # on, yet the tally is 0
            write = self._decide(written.stored, on, stamp)
            if write is None:
                assert written.stored is not None  # _decide answers a write when nothing is stored
                return self._verdict(written.stored, on, stamp, done)
        return done(Outcome.CONTENTION)  # the state kept moving under concurrent requests

    # ------------------------------------------------------------------------ across Regions
    def set_regional(
        self,
        key: Key,
        on: bool,
        stamp: Stamp,
        *,
        region: str,
        tally: Key | None,
        attributes: Mapping[str, object] | None = None,
        delta_attribute: str = "delta",
    ) -> Result:
        """[`set`][counters.primitives.toggle.Toggle.set] on a global table, written in ``region`` (module doc, "Across Regions").

        Every write (a stamp-only one too) names ``region`` as the version's writer, and counts
        for this Region ``[the new version is on] - [the replaced version was on and written here]``
        (conditioned on the stored writer, so the count and the replaced version agree).
        ``tally`` given (standard): a write that counts is one TransactWriteItems with ``ADD`` on
        that key (this Region's own tally item), ``delta_attribute`` 0 on the state item. ``tally``
        None (hot): the state item alone, ``delta_attribute`` = what it counted, for this Region's
        stream aggregator. A version replaced by another Region's (replicated in) is taken off
        this Region's tally by its aggregator ([`counters.streams.regional_change`][counters.streams.regional_change]).
        Outcomes as [`set`][counters.primitives.toggle.Toggle.set] (``tally_would_go_negative`` only with ``tally``)."""
        capacity, attempts, contended = Capacity(), 0, 0
        extra = dict(attributes or {})

        def done(outcome: Outcome, reason: Reason | None = None, value: object = None) -> Result:
            return Result(outcome, reason=reason, capacity=capacity, attempts=attempts, contended_retries=contended, value=value)

        if stamp.at < now_ms() - self.horizon_ms:
            return done(Outcome.REJECTED, Reason.STALE)
        plan: tuple[StateWrite, Owner, int] | None = (StateWrite.FLIP, Owner.ANY, 1) if on else (StateWrite.FLIP, Owner.MINE, -1)
        for _ in range(ROUNDS):
            assert plan is not None
            kind, owner, delta = plan
            every = {delta_attribute: 0 if tally is not None else delta}
            write = RegionalWrite(kind, on, stamp, owner, every, extra, self.expires_at(stamp))
            written = self.store.regional(key, write, region=region, tally=tally, delta=delta, policy=self.retry, capacity=capacity)
            report = written.report
            attempts += report.attempts
            contended += report.contended_retries
            if report.outcome is Outcome.APPLIED:
                return done(Outcome.APPLIED) if kind is StateWrite.FLIP else done(Outcome.REJECTED, Reason.ALREADY_SET)
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return done(report.outcome)
            if written.parent_refused and not written.state_refused:
                return done(Outcome.REJECTED, Reason.TALLY_WOULD_GO_NEGATIVE, written.parent)
            plan = self._decide_regional(written.stored, on, stamp, region)
            if plan is None:
                assert written.stored is not None
                return self._verdict(written.stored, on, stamp, done)
        return done(Outcome.CONTENTION)

    @staticmethod
    def _decide_regional(stored: StateItem | None, on: bool, stamp: Stamp, region: str) -> tuple[StateWrite, Owner, int] | None:
        """The next regional write (kind, the writer it may replace, what it counts here), or None."""
        if stored is None:
            return (StateWrite.FLIP, Owner.ANY, 1) if on else (StateWrite.TOMBSTONE, Owner.ANY, 0)
        newer, mine = newer_than(stamp, stored.stamp), stored.writer == region
        if stored.on == on:
            if not newer or stored.request_id == stamp.by:
                return None
            if on:  # a liked version re-written here: this Region's now (another Region's counts it off)
                return (StateWrite.RESTAMP, Owner.MINE, 0) if mine else (StateWrite.RESTAMP, Owner.THEIRS, 1)
            return StateWrite.RESTAMP, Owner.ANY, 0
        if not newer:
            return None
        if on:
            return StateWrite.FLIP, Owner.ANY, 1
        return (StateWrite.FLIP, Owner.MINE, -1) if mine else (StateWrite.FLIP, Owner.THEIRS, 0)

    @staticmethod
    def _decide(stored: StateItem | None, on: bool, stamp: Stamp) -> Write | None:
        """What to write next, given the state that refused the last write (``None``: nothing)."""
        if stored is None:
            return Write.FLIP if on else Write.TOMBSTONE  # nothing stored: a new like, or an unlike's tombstone
        newer = newer_than(stamp, stored.stamp)
        if stored.on == on:
            own = stored.request_id == stamp.by
            return Write.RESTAMP if newer and not own else None
        return Write.FLIP if newer else None  # the other state: flip it if this request is newer, else stale

    @staticmethod
    def _verdict(stored: StateItem, on: bool, stamp: Stamp, done: Callable[[Outcome, Reason | None, object], Result]) -> Result:
        if stored.on != on:
            return done(Outcome.REJECTED, Reason.STALE, stored)  # a newer request set the other state
        if stored.request_id == stamp.by:
            return done(Outcome.DUPLICATE, Reason.OWN_REQUEST, stored)  # this request's flip (an answer was lost)
        return done(Outcome.REJECTED, Reason.ALREADY_SET, stored)
