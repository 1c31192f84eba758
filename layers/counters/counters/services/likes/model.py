"""What the likes service's parts share: settings, modes, a process's view of a post, the answers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple, NotRequired, TypedDict

from counters.core.client import DynamoDBClient
from counters.core.commands import require
from counters.core.errors import InvalidRequest, StreamConsumerMissing
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.outcome import Result
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.core.settings import env
from counters.primitives.aggregator import Aggregator, as_of
from counters.primitives.toggle import now_ms
from counters.services.likes.merging import Merges
from counters.store.aggregates import CheckpointStore
from counters.store.post_items import FIRST_SPREAD, Mode, Post, chain_keys, hot_pk, like_key, post_key
from counters.store.posts import like_checkpoints

NAMESPACE = uuid.UUID("4c3d0a52-88f4-4f1e-9a0e-2f5b0c7d9e61")
STANDARD, HOT = Mode.STANDARD.value, Mode.HOT.value
MODES = (STANDARD, HOT)
SPREAD = FIRST_SPREAD  # a post's like partition keys at creation; stored on the post (``spread``), it only grows
MODE_TTL_MS = 30_000  # how long a process trusts the mode it read (the fence makes a stale standard safe)
UNSETTLED_TTL_MS = 1_000
"""How long a process trusts what it read of a grown post not settled yet: its sweep's progress
(``swept``) is what stops the likes' reads of the older lanes, so a process learns it within a
second (one eventually consistent GetItem of META a second per process, only until settled; a
stale view costs reads, never a count)."""
PRESSURE_WINDOW_MS = 10_000  # retried attempts of a standard post's likes are summed over this window
GROW_LANES = 16
"""A hot post grows when one process's retried writes met half of its lanes, or this many, within
``PRESSURE_WINDOW_MS``. At 64 lanes half is 32, and a process meets a lane only with its own
retried writes: at 100% of 64 lanes' capacity under 4 s of burst a key (the bench's ``--step-burst
4``) the retried writes of any 10 s met 20-26 lanes, and the post never grew past 64. 16 users in
16 lanes is still no one user ([docs/DESIGN.md, "Growth and its abuse"](../DESIGN.md))."""
AUDIT_MARGIN_S = 3.0  # POST /audits answers this long before the function's timeout (it stops starting calls)


class PublicPost(TypedDict):
    """A post as the API shows it ([public_post][counters.services.likes.model.public_post];
    `GET /posts/{id}` answers it as JSON).
    `asOf` and `lagMs` are present for a hot post only."""

    postId: str
    authorId: str | None
    body: str | None
    likeTally: int
    createdAt: int | None
    mode: str
    modeEpoch: int
    """How many times the post switched modes."""
    asOf: NotRequired[int | None]
    """Hot posts: `likeTally` is exact as of this time (ms), null before the first aggregation; never before
    `createdAt` (the stream's creation times are rounded down: to the second on AWS, to the minute on DynamoDB Local)."""
    lagMs: NotRequired[int | None]
    """Hot posts: how long the oldest like of the aggregator's last write to this post had waited (ms);
    it does not grow while the post is idle; null before the first aggregation; never more than the post's age
    (the stream's rounded creation times make it read high by up to 1 s on AWS, 60 s on DynamoDB Local)."""


class SwitchedPost(PublicPost):
    """A mode switch's answer: the post, and whether this request switched it."""

    switched: bool
    """False: the post already was in this mode (a re-send finds its own switch done)."""


class LikeState(TypedDict):
    """A user's own like of a post ([Likes.like_state][counters.services.likes.Likes.like_state])."""

    postId: str
    userId: str
    liked: bool


class LikeChanged(LikeState):
    """A like's or an unlike's answer: the user's like now, and whether this request changed it."""

    changed: bool


class PublicLiker(TypedDict):
    """One liker of a post ([LikersPage][counters.services.likes.posts.LikersPage]): who, and when
    (epoch s; `None` for a like stored without its time)."""

    userId: str
    likedAt: int | None


class PublicLikers(TypedDict):
    """A page of a post's likers, and the cursor of the next page (`None`: the last page)."""

    postId: str
    likers: list[PublicLiker]
    cursor: str | None


def no_aggregator(what: str, *, standard: bool = True) -> StreamConsumerMissing:
    """The refusal of a hot like (or of making a post hot) where no like aggregator was declared:
    ``what`` is refused, and the message names what to run and how to say it runs."""
    fix = (
        "; or keep the post standard (mode='standard'), counted in the like's own transaction"
        if standard
        else " (on MRSC a post is hot: standard likes need transactions, which MRSC tables do not have)"
    )
    return StreamConsumerMissing(
        f"{what}: a hot post's likes are counted only by the like aggregator, a consumer of the table's "
        f"stream (LikeAggregatorFunction, functions/like_aggregator: sam deploy and make dev run it), and "
        f"this Likes was not told that one runs. Run it on the table's stream, then pass "
        f"Likes(..., stream_consumers=True) or set TALLY_STREAM_CONSUMERS=true{fix}"
    )


@dataclass(frozen=True, kw_only=True)
class LikeSettings(RegionSettings):
    """``HOT_AFTER_RETRIES`` (template parameter ``HotAfterRetries``): promote a standard post to
    hot after this many retried attempts of its likes in one process within 10 s; 0: never.
    The global table's Regions and mode ([`RegionSettings`][counters.core.regions.RegionSettings]): [docs/likes.md "Global tables"](../likes.md#global-tables)."""

    hot_after_retries: int = env("HOT_AFTER_RETRIES", 0)
    max_spread: int = env("LIKES_MAX_SPREAD", FIRST_SPREAD)
    """(template parameter ``LikesMaxSpread``): a hot post's spread doubles up to this when its lanes
    throttle; ``FIRST_SPREAD`` (8): never ([docs/likes.md, "A spread that grows"](../likes.md#a-spread-that-grows))."""
    cursor_secret: str = env("CURSOR_SECRET", "")
    """Signs the likers cursors (the template passes the stack's id: random per deployment, unknown
    to API callers); unset (tests, the local stack), a key derived from the table name."""


class PostInfo(NamedTuple):
    """What a process knows of a post: where its likes live and how they are counted."""

    spread: int | None  # None: likes stored before ``spread`` (seed 01's item collection, standard only)
    mode: str
    epoch: int
    read_at: int  # ms
    settled: bool = True  # every user's item, or a pointer to it, is in their lane of ``spread`` ([`Post.settled`][counters.store.post_items.Post.settled])
    swept: int = (
        0  # lanes of the previous spread, from S0, that a like need not read ([`Post.swept`][counters.store.post_items.Post.swept])
    )

    @classmethod
    def of(cls, post: Post) -> PostInfo:
        """What to remember of a post just read."""
        return cls(post.spread, post.mode, post.epoch, now_ms(), post.settled, post.swept)

    def lanes(self, post_id: str) -> list[str]:
        """The partition keys the post's like items live under."""
        return [post_key(post_id)["PK"]] if self.spread is None else [hot_pk(post_id, n) for n in range(self.spread)]

    def like_keys(self, post_id: str, user_id: str) -> list[dict[str, str]]:
        """Where a user's like of the post may be, oldest lane first: the one key of its layout, or
        the user's chain over the spreads the post has had ([`chain_keys`][counters.store.post_items.chain_keys]);
        a new like is created under the last."""
        return [like_key(post_id, user_id)] if self.spread is None else chain_keys(post_id, user_id, self.spread)


@dataclass
class LikeChange:
    """The answer to like/unlike: the state now, and whether this request changed it."""

    liked: bool
    changed: bool
    result: Result
    promoted: bool = False  # this request's retries switched the post to hot (``hot_after_retries``)


@dataclass(frozen=True)
class LikePayload:
    """A deferred like or unlike."""

    postId: str
    userId: str
    at: int | None = None
    """When the API received the request (ms): a replay is ordered by it, not by when it runs."""

    def __post_init__(self) -> None:
        require(valid_id(self.postId) and valid_id(self.userId), "invalid postId/userId")
        require(self.at is None or (type(self.at) is int and self.at > 0), "invalid at")


def post_id_for(author_id: str, idempotency_key: str) -> str:
    """The post id a key stands for: per author, so one author's key never names another's post."""
    return uuid.uuid5(NAMESPACE, f"{author_id}\n{idempotency_key}").hex


def derived_form(post_id: str) -> bool:
    """Whether ``post_id`` has the form [`post_id_for`][counters.services.likes.model.post_id_for] gives (a version-5 UUID, 32 lowercase
    hex digits): a form a client's own ``postId`` may not take, so no one can take the id
    another author's Idempotency-Key stands for before that author's create."""
    if len(post_id) != 32 or post_id.strip("0123456789abcdef"):
        return False
    return uuid.UUID(hex=post_id).version == 5


def like_aggregator(
    table_name: str,
    *,
    dynamodb: DynamoDBClient | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], int] | None = None,
    region: str = "",
) -> LikeAggregator:
    """The hot mode's tally keeper: hot like deltas from the stream onto ``likeTally`` on META;
    with ``region`` (a global table), onto that Region's own tally item ([docs/likes.md "Global tables"](../likes.md#global-tables)).
    One Region: it also merges a user's duplicate items on a grown post (``merges``)."""
    merges = None if region else Merges(table_name, dynamodb=dynamodb, retry=retry)
    return LikeAggregator(like_checkpoints(table_name, dynamodb=dynamodb, region=region), retry=retry, clock=clock, merges=merges)


class LikeAggregator(Aggregator):
    """The like tally's [`Aggregator`][counters.primitives.aggregator.Aggregator] and, on one Region,
    the [`Merges`][counters.services.likes.merging.Merges] run after its tally write (``None`` on a
    global table, where a spread never grows: ``grow-spread`` in the posts' table)."""

    def __init__(
        self,
        store: CheckpointStore,
        *,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] | None = None,
        merges: Merges | None = None,
    ) -> None:
        super().__init__(store, retry=retry, clock=clock)
        self.merges = merges


def aggregated_post(info: PostInfo) -> bool:
    """Whether some of the post's likes are (or were) counted by the stream's aggregator: it is
    or was hot. Its tally then trails its likes by the aggregator's lag."""
    return info.spread is not None and (info.mode == HOT or info.epoch > 0)


def require_mode(mode: str) -> Mode:
    """``mode`` as a [`Mode`][counters.store.post_items.Mode]; [`InvalidRequest`][counters.core.errors.InvalidRequest] if it is not one."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")
    return Mode(mode)


def public_post(post: Post, *, regions: list[Post] | None = None) -> PublicPost:
    """The post as the API shows it; a hot post's tally is exact as of ``asOf`` (ms: the oldest
    lane watermark of the aggregator, ``None`` before its first batch), and ``lagMs`` is the lag
    of what was pending when the aggregator last counted for it: how long the oldest like of its
    last write to META had waited (``None`` before the first). It does not grow while the post is
    idle: a post whose likes are all aggregated is not behind, however old ``asOf`` is. A like not
    delivered to the aggregator yet is invisible here (a hot like writes nothing shared); the
    aggregator's iterator-age alarm watches for that.

    Both are bounded by the post's own life, which holds whatever the precision of the stream's
    creation times (DynamoDB Local rounds them down to the minute): ``asOf`` is never before
    ``createdAt`` (no like precedes its post), and ``lagMs`` never more than the post's age now
    (its oldest pending like was written after the post). Nothing finer is claimed: on AWS the
    creation times have second precision, locally a minute's, within those bounds.

    ``regions`` (a global table): the tally items of the Regions that counted; ``likeTally`` is
    their sum, ``asOf`` the least of their watermarks and ``lagMs`` the largest lag. Each Region's
    item trails what was replicated into it by its aggregator's lag; the sum is exact once the
    Regions have converged and their aggregators have caught up ([docs/likes.md "Global tables"](../likes.md#global-tables))."""
    if regions is not None:
        marks = {f"{n}.{lane}": at for n, r in enumerate(regions) for lane, at in r.watermarks.items()}
        lags = [r.lag_ms for r in regions if r.lag_ms is not None]
        post = replace(post, tally=sum(r.tally for r in regions), watermarks=marks, lag_ms=max(lags, default=None))
    public: PublicPost = {
        "postId": post.post_id,
        "authorId": post.author_id,
        "body": post.body,
        "likeTally": post.tally,
        "createdAt": post.created_at,
        "mode": post.mode,
        "modeEpoch": post.epoch,
    }
    if post.mode == HOT:
        watermark = as_of(post.watermarks)
        lag = None if watermark is None else post.lag_ms
        if post.created_at is not None:  # bounds the post's own life gives: its likes were all written after it
            born = post.created_at * 1000  # whole seconds, rounded down: never later than the post's creation
            watermark = None if watermark is None else max(watermark, born)
            lag = None if lag is None else min(lag, max(0, now_ms() - born))
        public["asOf"] = watermark
        public["lagMs"] = lag
    return public
