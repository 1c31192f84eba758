"""Posts: create, read, switch mode; a user's own like and the likers list (the reads of likes).

Also the process's view of each post ([`PostInfo`][counters.services.likes.model.PostInfo], an LRU
trusted for ``mode_ttl_ms``) that the like path routes by.
"""

from __future__ import annotations

import time

from counters.core.commands import new_request_id
from counters.core.errors import (
    AlreadyExists,
    ContentionError,
    IdempotencyKeyReused,
    InvalidCursor,
    InvalidRequest,
    NotFound,
    NotSwitchable,
)
from counters.core.failures import RetryPolicy
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass
from counters.primitives.toggle import now_ms
from counters.services.likes.cursor import cursor_key, decode_cursor, encode_cursor
from counters.services.likes.model import (
    HOT,
    MODE_TTL_MS,
    SPREAD,
    STANDARD,
    UNSETTLED_TTL_MS,
    LikeState,
    PostInfo,
    PublicLiker,
    PublicPost,
    derived_form,
    no_aggregator,
    post_id_for,
    public_post,
    require_mode,
)
from counters.store.expr import Cond
from counters.store.post_items import FIRST_SPREAD, LIKE_PREFIX, MAX_SPREAD, Mode, Post, chain_lanes, lane_like_key, like_key
from counters.store.posts import Liker, PostStore
from counters.store.toggles import ToggleStore

LIKERS_QUERIES = 12  # queries per likers page once it lists a liker (tombstones and empty spread keys make pages short)
LIKERS_READ = 25  # items a likers Query reads at least (tombstones are read, then filtered out)


@dataclass
class LikersPage:
    """One page of likers: ``user_ids`` (``userId``, ``likedAt``), the cursor of the next page."""

    user_ids: list[PublicLiker]
    cursor: str | None
    capacity: Capacity


class Posts:
    """Posts and the reads of their likes; remembers each post's layout and mode (an LRU)."""

    def __init__(
        self,
        store: PostStore,
        likes: ToggleStore[Post],
        *,
        retry: RetryPolicy,
        mode_ttl_ms: int = MODE_TTL_MS,
        cache_size: int = CACHE_SIZE,
        cursor_secret: str = "",
        stream_consumers: bool = True,
    ) -> None:
        """``store``'s policy is what likes may do on this table ([`Likes`][counters.services.likes.Likes] resolves it).
        ``stream_consumers``: whether the like aggregator runs; ``False``: making a post hot is refused."""
        self.store, self.likes, self.retry, self.policy = store, likes, retry, store.policy
        self.stream_consumers = stream_consumers
        self.mode_ttl_ms = mode_ttl_ms
        self.cursor_key = cursor_key(cursor_secret, store.table_name)
        self.known: LRU[str, PostInfo] = LRU(cache_size)  # posts seen by this process (a post is never deleted)

    def create_post(
        self, *, author_id: str, body: str, post_id: str | None = None, idempotency_key: str | None = None, mode: str | None = None
    ) -> tuple[PublicPost, bool]:
        """Create a post with ``likeTally = 0``; returns (the post, created now?).

        Re-sends are the same post, never a second one: with ``idempotency_key`` the id is
        derived from (author, key); with a client ``post_id`` the id is the client's, and never
        of the derived form ([`derived_form`][counters.services.likes.model.derived_form]: [`InvalidRequest`][counters.core.errors.InvalidRequest]), so the two never meet. Either
        way the Put is conditioned on the id being new, and a post already stored with the
        same author and body, created in the ``mode`` asked for (whatever its mode now), is this request's (``created`` False: an earlier attempt, or the
        one whose answer was lost, wrote it: ``created`` is True when the stored post carries
        this request's id). A different post under that id is
        [`AlreadyExists`][counters.core.errors.AlreadyExists] (the client's id) or [`IdempotencyKeyReused`][counters.core.errors.IdempotencyKeyReused] (the key).
        Without either, the id is random (on MREC drawn with this Region as its home: the store
        creates a named id only in its home Region, [docs/regions.md "Creations"](../regions.md#creations)) and a re-send
        creates another post.

        ``mode`` (``standard`` or ``hot``; ``None``: standard, or hot on a table without transactions (MRSC), the one mode it has) is stored on the post with ``modeEpoch`` 0 (each
        [`switch_mode`][counters.services.likes.posts.Posts.switch_mode] adds one), its ``spread`` (where its likes live, fixed for its life)
        and the aggregator's empty checkpoint and watermark maps, in either mode.
        """
        if mode is None:
            mode = self.policy.writes.choose(together=STANDARD, in_order=HOT)  # standard counts in a transaction
        wanted = require_mode(mode)
        if wanted is not Mode.HOT:
            self.store.admit("create:standard")
        elif not self.stream_consumers:
            raise no_aggregator("a hot post was asked for", standard=self.policy.writes.choose(together=True, in_order=False))
        if post_id is not None and derived_form(post_id) and not (idempotency_key and post_id == post_id_for(author_id, idempotency_key)):
            raise InvalidRequest("postId may not be a version-5 UUID in hex: that form is kept for ids derived from an Idempotency-Key")
        if post_id is None:
            post_id = post_id_for(author_id, idempotency_key) if idempotency_key else self.store.new_post_id()
        post = Post(post_id=post_id, author_id=author_id, body=body, created_at=int(time.time()), request_id=new_request_id(), mode=wanted)
        written = self.store.create(post, SPREAD, self.retry)
        if written.outcome is Outcome.APPLIED and written.post is not None:
            return public_post(written.post), True
        if written.outcome is not Outcome.REJECTED:
            raise ContentionError(f"could not store post {post_id!r}; resend the same request")
        stored = written.post or Post()
        if stored.author_id == author_id and stored.body == body and stored.created_mode == mode:
            return public_post(stored), stored.request_id == post.request_id
        if idempotency_key and post_id == post_id_for(author_id, idempotency_key):
            raise IdempotencyKeyReused("this Idempotency-Key was already used for a different post")
        raise AlreadyExists(f"post {post_id!r} already exists", cause_code="ConditionalCheckFailed")

    def get_post(self, post_id: str) -> PublicPost:
        """Read the post (and remember its layout); [`NotFound`][counters.core.errors.NotFound] if there is none."""
        post = self.store.read(post_id, self.retry)
        if post is None:
            raise NotFound(f"post {post_id!r} not found")
        self.known[post_id] = PostInfo.of(post)
        if self.policy.others:  # each Region counts its own likes: show every Region's tally
            return public_post(post, regions=self.store.region_tallies(post_id, self.retry))
        return public_post(post)

    def info(self, post_id: str) -> PostInfo:
        """The post's layout and mode; [`NotFound`][counters.core.errors.NotFound] if it is missing.

        Read (0.5 RCU; a miss is read again strongly, 1 RCU, so a post created a moment ago by
        another process is found) once per process and post (while it is among the ``cache_size`` posts
        used last: an LRU), trusted for ``mode_ttl_ms``: the standard
        transaction's fence refuses a stale ``standard`` at once, and a stale ``hot`` is still
        counted once (see the package doc). A post is never deleted, so a remembered post exists:
        the hot like checks existence through this read. A grown post not settled yet is trusted
        for ``UNSETTLED_TTL_MS`` at most: the lanes its sweep has done are read by no like that knows.
        """
        info = self.known.get(post_id)
        trusted = self.mode_ttl_ms if info is None or info.settled else min(self.mode_ttl_ms, UNSETTLED_TTL_MS)
        if info is not None and now_ms() - info.read_at < trusted:
            return info
        return self.fresh(post_id)

    def remember(self, post_id: str, post: Post) -> PostInfo:
        """Remember the layout of a post just read."""
        info = self.known[post_id] = PostInfo.of(post)
        return info

    def grow(self, post_id: str, info: PostInfo, to: int) -> PostInfo:
        """Grow the post's spread from ``info.spread`` to ``to`` (one conditional write on META; a
        post grown meanwhile by another process is taken as found) and remember it."""
        if info.spread is None:
            return info
        written = self.store.grow(post_id, info.spread, to, self.retry)
        return self.remember(post_id, written.post) if written.post is not None else info

    def locate(self, post_id: str, user_id: str, info: PostInfo) -> dict[str, str]:
        """The key of a user's like of the post: where it was created if the user has one (the
        oldest lane of the user's chain that holds an item: items never move when the spread grows),
        else where a new one is created (the lane of the post's spread now). On a post that never
        grew the chain is one key and nothing is read; on a **settled** post nothing is read either:
        the user's lane of the spread holds their item or a pointer to it, which the write follows
        (its ``livesIn``: [`lane_like_key`][counters.store.post_items.lane_like_key]). While the sweep settles it, the
        lanes it has done (``swept``, from ``S0``: the first 8, in every user's chain, come first)
        are not read either, for the same reason."""
        if info.spread is None:
            return like_key(post_id, user_id)  # stored before spread: one key
        *older_lanes, lane = chain_lanes(user_id, info.spread)  # hashed once per like (the hot path)
        newest = lane_like_key(post_id, user_id, lane)
        older = [lane_like_key(post_id, user_id, n) for n in older_lanes if n >= info.swept]
        if not older:
            return newest
        return self.store.first_existing(older, self.retry) or newest

    def like_state(self, post_id: str, user_id: str) -> LikeState:
        """The caller's own like of a post, read from its state item (strongly consistent: exact at
        once in either mode, whatever the aggregator's lag; a pointer is followed)."""
        state = self.likes.read_state(self.locate(post_id, user_id, self.info(post_id)), self.retry)
        if state is not None and state.points_to is not None:
            state = self.likes.read_state(lane_like_key(post_id, user_id, state.points_to), self.retry)
        return {"postId": post_id, "userId": user_id, "liked": state is not None and state.on}

    def fresh(self, post_id: str) -> PostInfo:
        """The post's layout read now (0.5 RCU), not the cached one, and remembered."""
        post = self.store.layout(post_id, self.retry)
        if post is None:  # not seen yet by an eventually consistent read, right after its creation? Ask strongly.
            post = self.store.layout(post_id, self.retry, strong=True)
        if post is None:
            raise NotFound(f"post {post_id!r} not found")
        return self.remember(post_id, post)

    def _decode(self, post_id: str, cursor: str, info: PostInfo) -> tuple[PostInfo, int, str | None]:
        """(the post's layout, the cursor's lane and user); a lane beyond the spread this process
        knows may be one of a grown post's new lanes: it is checked against the spread read now."""
        try:
            return (info, *decode_cursor(self.cursor_key, post_id, cursor, len(info.lanes(post_id))))
        except InvalidCursor:
            if info.spread is None or info.spread >= MAX_SPREAD:
                raise
            info = self.fresh(post_id)
            return (info, *decode_cursor(self.cursor_key, post_id, cursor, len(info.lanes(post_id))))

    def _unmerged_skipped(self, post_id: str, info: PostInfo, lane: int, found: list[Liker], capacity: Capacity) -> list[Liker]:
        """``found`` (likers listed from lane ``lane``) less the users liking in a lower lane of
        their chain ([`chain_lanes`][counters.store.post_items.chain_lanes]): a stale-view
        duplicate not merged yet, listed once, from its lower lane (listed first). One strongly
        consistent BatchGetItem for the items whose lane is not the lowest of their chain (none
        on a post that never grew, nor in its first ``FIRST_SPREAD`` lanes)."""
        if info.spread is None or lane < FIRST_SPREAD:
            return found
        lower = {liker.user_id: [n for n in chain_lanes(liker.user_id, info.spread) if n < lane] for liker in found}
        keys = [lane_like_key(post_id, user, n) for user, lanes in lower.items() for n in lanes]
        if not keys:
            return found
        liking = {sk[len(LIKE_PREFIX) :] for _, sk in self.store.liking(keys, self.retry, capacity)}
        return [liker for liker in found if liker.user_id not in liking]

    def switch_mode(self, post_id: str, mode: str) -> tuple[PublicPost, bool]:
        """Switch a post to ``mode``; (the post, switched by this call?).

        One conditional UpdateItem on META: ``mode``, ``modeEpoch`` + 1, ``modeAt``, if the post
        is in the other mode. No like item moves (their keys do not depend on the mode), so likes
        may flow during the switch: each flip is counted once by the write that made it (package
        doc). Sent again, it finds the post already in ``mode``: switched ``False`` (also when an
        earlier attempt of this call switched it and its answer was lost). A post stored before
        ``spread`` cannot switch ([`NotSwitchable`][counters.core.errors.NotSwitchable]).
        """
        self.store.admit("switch-mode")
        if mode == HOT and not self.stream_consumers:
            raise no_aggregator(f"post {post_id!r} may not switch to hot")
        written = self.store.switch_mode(post_id, require_mode(mode), now_ms(), self.retry)
        if written.outcome is Outcome.APPLIED and written.post is not None:
            post, switched = written.post, True
        elif written.outcome is Outcome.REJECTED:
            if written.post is None:
                raise NotFound(f"post {post_id!r} not found")
            if written.post.spread is None:
                raise NotSwitchable(f"post {post_id!r} keeps its likes in seed 01's layout: it stays {written.post.mode}")
            post, switched = written.post, False
        else:
            raise ContentionError(f"could not switch post {post_id!r}; resend the same request")
        self.remember(post_id, post)
        return public_post(post), switched

    def likers(self, post_id: str, *, limit: int, cursor: str | None = None) -> LikersPage:
        """One page of likers; ``cursor`` is opaque (from the previous page). A standard post's
        likers come oldest key first; a hot post's lane by lane (``S0`` first), each lane in
        key order.

        The cursor names only what a listing showed: the lane and the last liker listed in it
        (or none: the lane from its start), signed for this post ([`encode_cursor`][counters.services.likes.cursor.encode_cursor]).
        DynamoDB's LastEvaluatedKey, which may be a tombstone (a user who unliked), is only
        followed inside the page, never handed out. So a page reads on until it has listed at
        least one liker (a page that ends in a run of tombstones would otherwise hand out a
        cursor that makes no progress), and stops after ``LIKERS_QUERIES`` queries once it has.

        A growing spread adds lanes after the old ones, so a cursor stays valid: a cursor naming a
        lane this process has not seen yet is checked against the spread read then, and a listing
        that has listed every lane it knew of reads the spread once more (0.5 RCU) and goes on into
        the lanes added meanwhile. A user with items in two lanes (a stale-view duplicate the
        aggregator has not merged yet) is listed once: from the lowest lane that likes
        (``_unmerged_skipped``).
        """
        info = self.info(post_id)  # 404 for a missing post rather than an empty list
        info, lane, resume = (info, 0, None) if not cursor else self._decode(post_id, cursor, info)
        lanes = info.lanes(post_id)
        start: dict[str, str] | None = None if resume is None else {"PK": lanes[lane], "SK": f"{LIKE_PREFIX}{resume}"}
        capacity = Capacity()
        likers: list[Liker] = []
        rounds = 0
        counted: Cond = self.likes.is_on()  # tombstones are stored, not listed
        refreshed = False
        while True:
            while lane < len(lanes) and len(likers) < limit and (rounds < LIKERS_QUERIES or not likers):
                rounds += 1
                wanted = limit - len(likers)
                found, last = self.store.likers(lanes[lane], max(wanted, LIKERS_READ), counted, start, self.retry, capacity)
                kept = self._unmerged_skipped(post_id, info, lane, found, capacity)
                taken = kept[:wanted]
                likers.extend(taken)
                if taken:
                    resume = taken[-1].user_id
                if len(kept) > wanted:
                    break  # the page is full inside this lane: the next one resumes after its last liker
                if last is None:
                    lane, start, resume = lane + 1, None, None  # this lane is done: the next one from its start
                else:
                    start = last  # DynamoDB's position (maybe a tombstone): followed here, never in a cursor
            if lane < len(lanes) or refreshed or info.spread is None or info.spread >= MAX_SPREAD:
                break
            # every lane this process knew of is listed: the post may have grown since it read the
            # spread (a cache of up to ``mode_ttl_ms``), and lanes are only added after the old ones
            refreshed = True
            info = self.fresh(post_id)
            lanes = info.lanes(post_id)
        listed: list[PublicLiker] = [{"userId": liker.user_id, "likedAt": liker.liked_at} for liker in likers]
        if lane >= len(lanes):
            return LikersPage(listed, None, capacity)
        return LikersPage(listed, encode_cursor(self.cursor_key, post_id, lane, resume), capacity)
