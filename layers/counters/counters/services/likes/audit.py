"""The tally's audits: a quick look, and audits at a settled point (probes) with a surgical repair."""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Callable
from dataclasses import field
from enum import StrEnum
from typing import TypedDict

from counters.core.engine import deadline as call_deadline
from counters.core.errors import ContentionError, DeadlineReached, NotFound
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.core.records import dataclass
from counters.primitives.refcount import RefCount
from counters.primitives.toggle import now_ms
from counters.services.likes.model import PostInfo, aggregated_post
from counters.store.expr import Cond
from counters.store.post_items import LIKE_PREFIX, Post, post_key
from counters.store.posts import PostStore, Repair


class AuditReason(StrEnum):
    """Why an audit at a settled point has no verdict (``Settled.reason``)."""

    MOVING = "moving"  # something was counted during the count
    AGGREGATOR_BEHIND = "aggregator_behind"  # the aggregator did not reach the audit's probe in time
    NOT_FOUND = "not_found"
    DEADLINE = "deadline"  # the post was not reached (or not finished) before the deadline
    BUSY = "busy"
    AGGREGATED = "aggregated"  # the quick audit of a post that is or was hot: its tally trails its likes


DEADLINE = AuditReason.DEADLINE


class SettledAudit(TypedDict):
    """One post's audit at a settled point, as `POST /audits` answers it."""

    postId: str
    stored: int | None
    """The tally at the settled point."""
    counted: int | None
    """The likes at that point."""
    drift: int | None
    """stored - counted; null when not settled."""
    settled: bool
    repaired: bool
    reason: str | None
    """Why not settled or not repaired: moving, aggregator_behind, not_found, busy, deadline (the audit
    ran out of time before it reached or finished this post: audit it again)."""


class PublicAudits(TypedDict):
    """`POST /audits`: each post's audit at a settled point, in the order asked."""

    audits: list[SettledAudit]


class PublicAudit(TypedDict):
    """`GET /posts/{id}/audit`: the tally against a count now."""

    postId: str
    stored: int
    counted: int
    drift: int | None
    """stored - counted; null for a post that is or was hot (its tally trails its likes)."""
    reason: str | None
    """aggregated: the post is or was hot, no drift is concluded (POST /audits compares it)."""


@dataclass
class Settled:
    """One post's audit at a settled point ([`Audits.audit_posts`][counters.services.likes.audit.Audits.audit_posts]): ``stored`` is the tally
    at that point and ``counted`` the likes then; ``settled`` False says why there is no verdict
    (``reason``): ``moving`` (something was counted during the count), ``aggregator_behind`` (the
    stream's aggregator did not reach the audit's probe in time), ``not_found``, ``deadline`` (the
    audit ran out of time before it reached or finished the post: audit it again), ``busy``."""

    post_id: str
    stored: int | None = None
    counted: int | None = None
    settled: bool = False
    repaired: bool = False
    reason: AuditReason | None = None
    capacity: Capacity = field(default_factory=Capacity)
    duplicates: int | None = None
    """Users counted in two lanes of a grown post (a stale-view duplicate not merged yet: the
    tally counts both items too, so they are no drift; never repaired here)."""

    @property
    def drift(self) -> int | None:
        """Stored minus counted at the settled point; None unless settled."""
        return None if self.stored is None or self.counted is None or not self.settled else self.stored - self.counted

    def public(self) -> SettledAudit:
        """The JSON form."""
        return {
            "postId": self.post_id,
            "stored": self.stored,
            "counted": self.counted,
            "drift": self.drift,
            "settled": self.settled,
            "repaired": self.repaired,
            "reason": None if self.reason is None else self.reason.value,
        }


@dataclass
class QuickAudit:
    """``GET /posts/{id}/audit``: the tally against a count now ([`Audits.audit`][counters.services.likes.audit.Audits.audit])."""

    post_id: str
    stored: int
    counted: int
    aggregated: bool  # the post is or was hot: its tally trails its likes (no drift is concluded)
    capacity: Capacity = field(default_factory=Capacity)

    @property
    def drift(self) -> int | None:
        """Stored minus counted; None for a post whose tally the aggregator keeps."""
        return None if self.aggregated else self.stored - self.counted

    @property
    def reason(self) -> AuditReason | None:
        """Why there is no drift to report ([`AuditReason.AGGREGATED`][counters.services.likes.audit.AuditReason]), or None."""
        return AuditReason.AGGREGATED if self.aggregated else None

    def public(self) -> PublicAudit:
        """The JSON form."""
        reason = self.reason
        return {
            "postId": self.post_id,
            "stored": self.stored,
            "counted": self.counted,
            "drift": self.drift,
            "reason": reason and reason.value,
        }


AUDIT_ATTEMPTS = 12
"""Attempts per call of a settled audit (``POST /audits``), backing off up to 1 s. An audit fails
whole when one of its calls runs out of attempts, and a post at spread ``s`` makes ``2s`` probe
writes into its hottest keys: with the in-line budget, an audit of a post grown to 32 lanes under
faults almost never finished (make proof's HTTP ``likes-grow`` row). Bounded by the audit's
``budget_s`` (the engine checks it before every attempt)."""


class Audits:
    """Audit posts' tallies against their likes; repair a drift found at a settled point."""

    def __init__(
        self,
        store: PostStore,
        refcount: RefCount,
        counted: Cond,
        *,
        retry: RetryPolicy,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``counted``: the filter keeping the like items that count (tombstones aside). ``clock``
        and ``sleep`` measure the budget and the aggregator wait (injectable: tests run on a clock
        of their own, not on the machine's speed). What likes may do on this table is ``store``'s
        policy ([`Likes`][counters.services.likes.Likes] resolves it)."""
        self.store, self.refcount, self.counted, self.retry = store, refcount, counted, retry
        self.patient = retry.patient(AUDIT_ATTEMPTS)  # the settled audit's calls, bounded by its budget
        self.clock, self.sleep = clock, sleep

    def _refuse_across_regions(self) -> None:
        """No audit on a global table yet: META's tally is not the post's, and a Region's tally
        also holds the corrections its aggregator has not applied yet, so a count of the items it
        wrote is no verdict (and a repair must never write a tally from items another Region owns)."""
        self.store.admit("audit")

    def audit(self, post_id: str) -> QuickAudit:
        """The stored tally against a count of the likes (tombstones aside) under every partition
        key of the post: a quick look, not at a settled point. A post that is or was hot has its
        likes counted by the stream's aggregator, so its tally trails its likes by the
        aggregator's lag: that is not drift, and no drift is concluded (``drift`` ``None``,
        ``reason`` ``aggregated``; [`audit_posts`][counters.services.likes.audit.Audits.audit_posts] compares at a settled point)."""
        self._refuse_across_regions()
        before = self.store.read(post_id, self.retry)
        if before is None:
            raise NotFound(f"post {post_id!r} not found")
        info = PostInfo.of(before)
        audit = self.refcount.audit(post_key(post_id), LIKE_PREFIX, where=self.counted, partitions=info.lanes(post_id))
        if audit is None:
            raise NotFound(f"post {post_id!r} not found")
        after = self.store.read(post_id, self.retry)
        aggregated = any(aggregated_post(PostInfo.of(post)) for post in (before, after or Post()))
        stored = after.tally if after is not None and after.parts else audit.stored  # grown past 64 lanes: every group's part too
        return QuickAudit(post_id, stored, audit.counted, aggregated, audit.capacity)

    def audit_posts(
        self,
        post_ids: list[str],
        *,
        repair: bool = False,
        wait_s: float = 8.0,
        poll_s: float = 0.1,
        budget_s: float | None = None,
    ) -> list[Settled]:
        """Audit posts each at a settled point, and repair a drifted tally surgically.

        Seed 01: "reconcile rarely, repair surgically". A count takes time while likes flow, and
        a hot post's tally trails its likes by the aggregator's lag, so a count is compared with
        the tally only at a point where both describe the same likes:

        1. **first point**: a post that counts only in transactions (standard, never hot, or
           stored before ``spread``) is read as it is (``likeTally``, ``tallyRev``, ``modeEpoch``).
           A post that is or was hot gets a **probe** in each spread key, and is read once the
           aggregator shows every probe: every like written before them is then in the tally
           (a lane's records arrive in write order). Probes are numbered per lane (``probeSeq``,
           an ADD): a later probe applied (another audit's) also shows this one was;
        2. the likes are counted (strongly consistent, every spread key of the spread read at the
           first point), as stored: an unmerged stale-view duplicate is counted twice, as the
           tally counts it, and reported apart (``duplicates``), never repaired;
        3. **second point**, the same way (new probes).

        The count is exact for the tally when ``tallyRev`` (moved by every counted change: a
        standard flip, an aggregated hot one, a repair) and ``modeEpoch`` did not move from the
        first point to the second: no counted change was written during the count. Otherwise the
        post is ``moving``, and nothing is concluded. A drift found at a settled point is repaired
        (``repair``) by one conditional write, ``likeTally = counted`` if ``tallyRev`` and
        ``modeEpoch`` are still those of the second point: a like counted since then refuses it
        (``moving``), and concurrent likes are never overwritten. A like written after the second
        point and aggregated after the repair is added to the repaired tally, as it should be.

        Each call gets ``AUDIT_ATTEMPTS`` attempts ([`RetryPolicy.patient`][counters.core.failures.RetryPolicy.patient]):
        an operator's audit waits for the aggregator anyway, and failing whole on one throttled
        probe of many is what made audits of grown posts answer 503 again and again.

        ``budget_s``: the time the audit may take (the API passes the function's remaining time
        less ``AUDIT_MARGIN_S``). No call is started after it: the clock is checked before each
        step, and the engine checks it before every attempt ([`counters.core.engine.deadline`][counters.core.engine.deadline]:
        a retry, a probe of the next lane, a count's next page). A post not reached, or not
        finished, answers ``settled`` False, ``reason`` ``deadline`` (a settled drift found but
        not repaired in time keeps its verdict with that reason; ``repaired`` False then means "not
        known to be repaired": a repair whose answer was lost may have applied, the next audit shows).
        """
        self._refuse_across_regions()
        deadline = None if budget_s is None else self.clock() + budget_s
        with call_deadline(deadline, self.clock):
            return self._audit_posts(post_ids, repair, wait_s, poll_s, deadline)

    def _audit_posts(self, post_ids: list[str], repair: bool, wait_s: float, poll_s: float, deadline: float | None) -> list[Settled]:
        results = {p: Settled(p) for p in post_ids}
        first = self._settle_point(results, wait_s, poll_s, deadline)
        counted: dict[str, int] = {}
        for post_id, post in first.items():
            if self.late(deadline):
                results[post_id].reason = DEADLINE
                continue
            try:
                counted[post_id], results[post_id].duplicates = self._count(PostInfo.of(post).lanes(post_id), results[post_id].capacity)
            except DeadlineReached:
                results[post_id].reason = DEADLINE
        second = self._settle_point({p: results[p] for p in counted}, wait_s, poll_s, deadline)
        for post_id, post in second.items():
            result, before = results[post_id], first[post_id]
            if (before.revision, before.stored_epoch) != (post.revision, post.stored_epoch):
                result.reason = AuditReason.MOVING
                continue
            result.stored, result.counted, result.settled = post.tally, counted[post_id], True
            if repair and result.drift:
                if self.late(deadline):
                    result.reason = DEADLINE
                    continue
                try:
                    result.repaired = self._repair(post, counted[post_id], result)
                except DeadlineReached:
                    result.reason = DEADLINE
        return [results[p] for p in post_ids]

    def _count(self, lanes: list[str], capacity: Capacity) -> tuple[int, int]:
        """(the like items that count under ``lanes``, AS STORED; the users counted in two lanes
        or more). Until the merge moves it, a stale-view duplicate is counted twice by the tally
        (each item's ``delta``), so it is counted twice here: a count that deduplicated would find
        a drift that the merge corrects again. Duplicates are reported apart, never repaired.
        The lanes' keys-only pages are merged in key order (one page of each held at a time), so
        a user's items in two lanes meet; same reads as a COUNT."""
        total = duplicates = 0
        last, twice = None, False
        pages = (self.store.lane_users(pk, self.counted, self.patient, capacity) for pk in lanes)
        for user in heapq.merge(*pages):
            total += 1
            if user == last and not twice:
                duplicates += 1
            twice = user == last
            last = user
        return total, duplicates

    def _settle_point(self, results: dict[str, Settled], wait_s: float, poll_s: float, deadline: float | None = None) -> dict[str, Post]:
        """Each post's META at a point where its tally includes every like written before it
        (see [`audit_posts`][counters.services.likes.audit.Audits.audit_posts]); posts missing, whose aggregator is behind, or not reached
        before ``deadline`` (``self.clock()``) are left out, with their reason."""
        points: dict[str, Post] = {}
        probing: dict[str, dict[str, int]] = {}  # post id -> lane name -> this audit's probe number
        for post_id, result in results.items():
            if self.late(deadline):
                result.reason = DEADLINE
                continue
            try:
                post = self.store.read(post_id, self.patient)
                if post is None:
                    result.reason = AuditReason.NOT_FOUND
                    continue
                info = PostInfo.of(post)
                if info.spread is None or not aggregated_post(info):
                    points[post_id] = post  # counted in transactions only: as it is now
                    continue
                if post.probes is None:  # stored before probes: the aggregator needs the map to record them
                    self._add_probe_map(post_id)
                probing[post_id] = {f"S{lane}": self._probe(post_id, lane) for lane in range(info.spread)}
            except DeadlineReached:  # out of time between two of its calls (a probe, a retry)
                result.reason = DEADLINE
        until = self.clock() + wait_s
        if deadline is not None and deadline < until:
            until, behind = deadline, DEADLINE
        else:
            behind = AuditReason.AGGREGATOR_BEHIND
        while probing:
            for post_id, mine in list(probing.items()):
                if self.clock() >= until:
                    break
                try:
                    seen = self.store.read(post_id, self.patient) or Post(post_id=post_id)
                except DeadlineReached:
                    break
                if all(probe_reached((seen.probes or {}).get(lane), number) for lane, number in mine.items()):
                    points[post_id] = seen
                    del probing[post_id]
            if probing and (self.clock() >= until or self.late(deadline)):
                for post_id in probing:
                    results[post_id].reason = behind
                break
            if probing:
                self.sleep(poll_s)
        return points

    def _probe(self, post_id: str, lane: int) -> int:
        """Write a probe into one spread key; its number (``probeSeq``) in the key's probe order.
        A re-send after a lost answer numbers a second probe: waiting for the later one is as good."""
        number = self.store.probe(post_id, lane, now_ms(), self.patient)
        if number is None:
            raise ContentionError(f"could not probe post {post_id!r}; audit it again")
        return number

    def _repair(self, post: Post, counted: int, result: Settled) -> bool:
        """``likeTally = counted`` if nothing was counted since ``post`` was read (package doc).

        The write carries a fresh ``repairToken``: after an unknown outcome, a re-send refused
        because ``tallyRev`` moved may have been refused by this repair's own first attempt,
        committed; the refusal's ``ALL_OLD`` then holds this token, and the repair is done."""
        done = self.store.repair(post, counted, uuid.uuid4().hex, self.patient, result.capacity)
        if done is Repair.REPAIRED:
            return True
        result.reason = AuditReason.MOVING if done is Repair.MOVING else AuditReason.BUSY
        return False

    def late(self, deadline: float | None) -> bool:
        """Whether ``deadline`` (on the audit's clock) has passed."""
        return deadline is not None and self.clock() >= deadline

    def _add_probe_map(self, post_id: str) -> None:
        if not self.store.add_probe_map(post_id, self.patient):
            raise ContentionError(f"post {post_id!r} is busy; audit it again")


def probe_reached(seen: str | None, number: int) -> bool:
    """Whether a lane's applied probe (``aggProbe.S<n>``) is ``number`` or a later one: probes of
    a lane are applied in write order, so a later one applied means this one was."""
    return isinstance(seen, str) and seen.isdigit() and int(seen) >= number
