"""Like and unlike: the toggle routed by the post's mode, promotion under pressure, deferred replay."""

from __future__ import annotations

from counters.core.commands import Command, Replayable, Verdict, new_request_id
from counters.core.errors import ContentionError, IntegrityError, NotFound
from counters.core.json import JSONObject
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.outcome import Outcome, Result
from counters.primitives.toggle import Reason, Stamp, Toggle, Toggled, now_ms
from counters.services.likes.model import GROW_LANES, HOT, PRESSURE_WINDOW_MS, STANDARD, LikeChange, LikePayload, PostInfo, no_aggregator
from counters.services.likes.posts import Posts
from counters.store.post_items import DELTA, FIRST_SPREAD, LIKED_AT, MAX_SPREAD, POST_ID, USER_ID, Post, lane_like_key
from counters.store.posts import standard_tally

POINTER_HOPS = 2
"""Pointers a like follows (a merge may re-point one meanwhile); then it is contention, re-sent."""


class Toggling:
    """Likes and unlikes exactly once, the latest request of a user on a post winning."""

    def __init__(
        self,
        posts: Posts,
        toggle: Toggle[Post],
        *,
        hot_after_retries: int = 0,
        cache_size: int = CACHE_SIZE,
        max_spread: int = FIRST_SPREAD,
    ) -> None:
        """``hot_after_retries``: promote a standard post to hot once this process has retried that
        many attempts of its likes (conflicts, throttles) within ``PRESSURE_WINDOW_MS``; 0: never
        (and never on a global table: a post's mode is fixed there, [docs/likes.md "Global tables"](../likes.md#global-tables)).
        What likes may do on this table is ``posts``' policy ([`Likes`][counters.services.likes.Likes] resolves it)."""
        self.posts, self.toggle, self.retry = posts, toggle, posts.retry
        self.policy = posts.policy
        self.hot_after_retries = 0 if posts.store.refused("switch-mode") else hot_after_retries  # promotion switches the mode
        self.pressure: LRU[str, list[tuple[int, int]]] = LRU(cache_size)  # post -> (ms, retried attempts) of recent standard likes
        self.max_spread = FIRST_SPREAD if posts.store.refused("grow-spread") else min(max_spread, MAX_SPREAD)
        """A hot post's spread doubles up to this when its lanes throttle (``FIRST_SPREAD``: never grows)."""
        self.heat: LRU[str, list[tuple[int, str]]] = LRU(cache_size)  # post -> (ms, lane) of recent hot writes that were retried

    def like(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """Like, unless a newer request of this user on this post already decided (the latest wins).

        ``at``: when the API received the request (ms; default now), kept by a deferred replay.
        The like item carries the request's id, so a re-drive of this request that finds it
        knows the like is its own (``changed``) rather than an earlier one's."""
        return self._set(post_id, user_id, True, request_id or new_request_id(), now_ms() if at is None else at)

    def unlike(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """Unlike (the like item stays as a tombstone that orders later replays), unless a newer
        request of this user on this post already decided."""
        return self._set(post_id, user_id, False, request_id or new_request_id(), now_ms() if at is None else at)

    def _set(self, post_id: str, user_id: str, liked: bool, request_id: str, at: int) -> LikeChange:
        command = Command("like" if liked else "unlike", {"postId": post_id, "userId": user_id, "at": at}, request_id)
        stamp = Stamp(at, request_id)
        info = self.posts.info(post_id)
        result = self._write(post_id, user_id, liked, stamp, info)
        if result.reason == Reason.GUARD and result.parent is not None:  # the fence: the post went hot since this process read its mode
            info = self.posts.remember(post_id, result.parent)
            result = self._write(post_id, user_id, liked, stamp, info)
        promoted = info.mode == STANDARD and self._under_pressure(post_id, info, result) and self._promote(post_id)
        if promoted and result.outcome is Outcome.CONTENTION:  # one more try, as the hot post it now is
            result = self._write(post_id, user_id, liked, stamp, self.posts.info(post_id))
        change = self._change(result, command)
        change.promoted = promoted
        return change

    def _under_pressure(self, post_id: str, info: PostInfo, result: Result) -> bool:
        """Whether this process's standard likes of the post retried ``hot_after_retries`` attempts
        (conflicts on META, throttles) within the window: the post is hot, whatever its mode says.
        Only attempts retried because of a conflict or a throttle count: a user's own re-sends
        (a refused flip, then a stamp-only write) are no pressure."""
        if not self.hot_after_retries or info.spread is None or result.contended_retries < 1:
            return False
        now = now_ms()
        recent = [(t, n) for t, n in (self.pressure.get(post_id) or []) if now - t < PRESSURE_WINDOW_MS]
        recent.append((now, result.contended_retries))
        self.pressure[post_id] = recent
        return sum(n for _, n in recent) >= self.hot_after_retries

    def _promote(self, post_id: str) -> bool:
        """Switch the post to hot ([`Posts.switch_mode`][counters.services.likes.posts.Posts.switch_mode]); False if another request just did, or it failed."""
        self.pressure.pop(post_id, None)
        try:
            return self.posts.switch_mode(post_id, HOT)[1]
        except ContentionError:
            return False  # the next likes under pressure try again

    def _write(self, post_id: str, user_id: str, liked: bool, stamp: Stamp, info: PostInfo) -> Toggled[Post]:
        """One decision path in every mode: the like item, counted where the post's mode and the
        table say ([`Toggle.set`][counters.primitives.toggle.Toggle.set]). Hot: the like item alone, its ``delta``
        counted by the stream's aggregator. Standard: in the like's transaction, on META (fenced
        by the post's mode) or, where each Region counts its own likes (a global table), on this
        Region's tally item, every version naming its writer ([docs/likes.md "Global tables"](../likes.md#global-tables)).
        A post stored before ``spread`` counts on META, standard for good."""
        policy = self.policy
        attributes: dict[str, object] = {USER_ID: user_id}
        if liked:
            attributes[LIKED_AT] = stamp.at // 1000
        key = self.posts.locate(post_id, user_id, info)
        if info.spread is None:  # seed 01's layout: standard for good, one tally on META
            self.posts.store.admit("like:before-spread")
            return self.toggle.set(key, liked, stamp, tally=standard_tally(post_id), attributes=attributes)
        attributes[POST_ID] = post_id
        if info.mode != HOT:
            self.posts.store.admit("like:standard")
        elif not self.posts.stream_consumers:
            raise no_aggregator(f"post {post_id!r} is hot and a like of it would never be counted")
        tally = None if info.mode == HOT else standard_tally(post_id, policy.writer)
        result = self.toggle.set(key, liked, stamp, tally=tally, writer=policy.writer, attributes=attributes, delta_attribute=DELTA)
        for _ in range(POINTER_HOPS):  # a pointer in the user's lane (a grown post): where their item lives
            if result.reason != Reason.MOVED or result.value is None or result.value.points_to is None:
                break
            key = lane_like_key(post_id, user_id, result.value.points_to)
            result = self.toggle.set(key, liked, stamp, tally=tally, writer=policy.writer, attributes=attributes, delta_attribute=DELTA)
        if tally is None and result.contended_retries and self._lanes_hot(post_id, info, key["PK"]):
            self.posts.grow(post_id, info, 2 * info.spread)
        return result

    def _lanes_hot(self, post_id: str, info: PostInfo, lane: str) -> bool:
        """Whether this process's hot writes to the post were retried (throttles, conflicts) in at
        least half of its lanes, or ``GROW_LANES``, within ``PRESSURE_WINDOW_MS`` (``lane``: this
        write's), and the post may still grow. One user's writes all fall in one lane, so no single
        user grows a post."""
        if info.spread is None or info.spread >= self.max_spread:
            return False
        now = now_ms()
        recent = [(t, n) for t, n in (self.heat.get(post_id) or []) if now - t < PRESSURE_WINDOW_MS]
        recent.append((now, lane))
        self.heat[post_id] = recent
        if len({n for _, n in recent}) < min(info.spread // 2, GROW_LANES):
            return False
        self.heat.pop(post_id, None)
        return True

    @staticmethod
    def _change(result: Toggled[Post], command: Command) -> LikeChange:
        post_id, liked = command.payload["postId"], command.op == "like"
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return LikeChange(liked=liked, changed=True, result=result)
        if result.outcome is Outcome.REJECTED:
            if result.reason == Reason.PARENT_MISSING:
                raise NotFound(f"post {post_id!r} not found")
            if result.reason == Reason.TALLY_WOULD_GO_NEGATIVE and result.parent is not None and result.parent.epoch > 0:
                # A post that was hot: this user's hot like may not be aggregated yet. Later, it is.
                raise ContentionError(
                    f"post {post_id!r}: its tally has not caught up with its stream yet; retry the request", command=command
                )
            if result.reason == Reason.TALLY_WOULD_GO_NEGATIVE:
                raise IntegrityError(f"post {post_id!r}: like exists but likeTally is 0")
            if result.reason == Reason.STALE:  # a newer request decided: the state is the other one
                return LikeChange(liked=not liked, changed=False, result=result)
            if result.reason == Reason.ALREADY_SET:
                return LikeChange(liked=liked, changed=False, result=result)
        # Contention, or the mode switched twice under this request: safe to re-drive (the stamp
        # makes a replay idempotent whatever happened in-line).
        raise ContentionError(f"post {post_id!r} is busy after {result.attempts} attempts; retry the request", command=command)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred like/unlike commands the retry worker replays."""
        return {"like": Replayable(LikePayload, self._replay), "unlike": Replayable(LikePayload, self._replay)}

    def _replay(self, p: LikePayload, command: Command) -> Verdict:
        """Replay with the request's own id and time: APPLIED if this request made the state
        (now or in an attempt whose answer was lost), DUPLICATE if the state already was so,
        REJECTED ``stale`` if a newer request of this user decided."""
        at = p.at if p.at is not None else command.created_at * 1000  # queued before requests carried their time
        change = (self.like if command.op == "like" else self.unlike)(p.postId, p.userId, request_id=command.operation_id, at=at)
        body: JSONObject = {"postId": p.postId, "userId": p.userId, "liked": change.liked, "changed": change.changed}
        if change.result.reason == Reason.STALE:
            message = "a newer request of this user on this post decided the state"
            return Verdict("REJECTED", {"error": "stale", "message": message, **body})
        return Verdict("APPLIED" if change.changed else "DUPLICATE", body)
