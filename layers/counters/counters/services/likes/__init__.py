"""Posts and likes: the reference-count primitive applied to seed 01's item shapes.

The items (post ``META``, like state items under spread keys or seed 01's layout, audit probes)
are [`counters.store.post_items`][counters.store.post_items]' and their requests [`counters.store.posts`][counters.store.posts]'. The service is split by job, and
[`Likes`][counters.services.likes.Likes] composes the parts: [`posts`][counters.services.likes.posts] (create, read, switch mode, likers),
[`toggling`][counters.services.likes.toggling] (like/unlike, promotion under pressure, deferred replay), [`audit`][counters.services.likes.audit] (quick
audit, audits at a settled point, repair); [`model`][counters.services.likes.model] holds what they share and [`cursor`][counters.services.likes.cursor]
the likers cursor. The stream's records are parsed above the service ([`counters.streams`][counters.streams]).

Like and unlike are a [`Toggle`][counters.primitives.toggle.Toggle]: the latest request of a user on
a post wins, whenever its replay runs. A post's ``mode`` is data on ``META``:

* ``standard`` counts in the like's transaction (the state item with ``delta = 0`` + ``ADD
  likeTally`` on META, conditioned on the post still being ``standard``: the fence);
* ``hot`` writes the like's state item alone (one conditional write, ``delta`` = +1/-1), and the
  tally is kept from the table's stream by [`counters.primitives.aggregator`][counters.primitives.aggregator] (exact as of a
  watermark).

**Switching modes** ([`Likes.switch_mode`][counters.services.likes.Likes.switch_mode]) moves nothing: a user's state item is the same
item in both modes (its key depends on ``spread``, fixed at creation, not on the mode), so the
latest-request rule holds across a switch, and **every flip is counted exactly once by the write
that made it**: a standard flip in its own transaction (its ``delta`` 0 keeps it out of the
aggregator), a hot flip by the aggregator. So a write made on a stale idea of the mode is still
counted once; the fence (the standard transaction's condition on META's ``mode``) only routes: a
process that still believes a post is standard after it went hot is refused, re-reads the mode and
writes hot, so likes stop transacting on the hot post's META. A hot write cannot be fenced (it
touches no shared item, which is the point); after a switch back to standard, a process's cached
``hot`` expires within ``MODE_TTL_MS`` and hot writes made until then are counted by the
aggregator within its lag.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from counters.core.client import DynamoDBClient
from counters.core.commands import Replayable
from counters.core.failures import RetryPolicy
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.policy import MREC, MRSC, RegionPolicy
from counters.core.regions import ONE_REGION, RegionSettings, Topology
from counters.core.settings import Settings
from counters.core.settings import stream_consumers as stream_consumers_run
from counters.primitives.refcount import RefCount
from counters.primitives.toggle import Toggle
from counters.services.likes.cursor import CURSOR_LABEL, cursor_key, decode_cursor, encode_cursor
from counters.services.likes.merging import Merges
from counters.services.likes.model import (
    AUDIT_MARGIN_S,
    GROW_LANES,
    HOT,
    MODE_TTL_MS,
    MODES,
    NAMESPACE,
    PRESSURE_WINDOW_MS,
    SPREAD,
    STANDARD,
    LikeAggregator,
    LikeChange,
    LikePayload,
    LikeSettings,
    LikeState,
    PostInfo,
    PublicLiker,
    PublicPost,
    aggregated_post,
    derived_form,
    like_aggregator,
    no_aggregator,
    post_id_for,
    public_post,
    require_mode,
)
from counters.services.likes.posts import LIKERS_QUERIES, LIKERS_READ, LikersPage, Posts
from counters.services.likes.toggling import Toggling
from counters.store.post_items import (
    AGG_AT,
    AGG_LAG,
    AGG_PROBE,
    AGG_SEQ,
    CREATED_MODE,
    DELTA,
    LIKE_PREFIX,
    LIKED,
    PROBE_SEQ,
    PROBE_SK,
    REPAIRED_BY,
    REVISION,
    TALLY,
    hot_like_key,
    hot_pk,
    lane_of,
    like_key,
    parse_hot_pk,
    post_key,
)
from counters.store.posts import STANDARD_GUARD, PostStore, like_checkpoints, like_toggles

if TYPE_CHECKING:  # imported on first use (__getattr__, Likes.audits): only the audit routes need them
    from counters.services.likes.audit import DEADLINE as DEADLINE
    from counters.services.likes.audit import Audits as Audits
    from counters.services.likes.audit import QuickAudit as QuickAudit
    from counters.services.likes.audit import Settled as Settled

_AUDIT = ("DEADLINE", "Audits", "QuickAudit", "Settled")
"""Names re-exported from [`audit`][counters.services.likes.audit], which an API handler's cold start
does not import: only ``GET /posts/{id}/audit`` and ``POST /audits`` use it."""


def __getattr__(name: str) -> object:
    """An audit name, its module imported on first access (PEP 562) and the name cached here."""
    if name not in _AUDIT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("counters.services.likes.audit"), name)
    globals()[name] = value
    return value


__all__ = [
    "AGG_AT",
    "AGG_LAG",
    "AGG_PROBE",
    "AGG_SEQ",
    "AUDIT_MARGIN_S",
    "CREATED_MODE",
    "CURSOR_LABEL",
    "DEADLINE",
    "DELTA",
    "GROW_LANES",
    "HOT",
    "LIKED",
    "LIKERS_QUERIES",
    "LIKERS_READ",
    "LIKE_PREFIX",
    "MODES",
    "MODE_TTL_MS",
    "NAMESPACE",
    "PRESSURE_WINDOW_MS",
    "PROBE_SEQ",
    "PROBE_SK",
    "REPAIRED_BY",
    "REVISION",
    "SPREAD",
    "STANDARD",
    "STANDARD_GUARD",
    "TALLY",
    "LikeChange",
    "LikePayload",
    "LikeSettings",
    "LikeState",
    "PublicLiker",
    "Likes",
    "LikersPage",
    "PostInfo",
    "PublicPost",
    "QuickAudit",
    "Settled",
    "aggregated_post",
    "cursor_key",
    "decode_cursor",
    "derived_form",
    "encode_cursor",
    "hot_like_key",
    "hot_pk",
    "lane_of",
    "LikeAggregator",
    "like_aggregator",
    "like_checkpoints",
    "like_key",
    "parse_hot_pk",
    "post_id_for",
    "post_key",
    "public_post",
    "require_mode",
]


class Likes:
    """Create posts, like/unlike them exactly once, list likers, audit the tally (the parts composed)."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        mode_ttl_ms: int = MODE_TTL_MS,
        hot_after_retries: int = 0,
        cache_size: int = CACHE_SIZE,
        cursor_secret: str = "",
        topology: Topology = ONE_REGION,
        max_spread: int = SPREAD,
        stream_consumers: bool | None = None,
    ) -> None:
        """``topology``: the global table this Region writes in ([docs/likes.md "Global tables"](../likes.md#global-tables); the
        default: one Region), resolved here, once, into the feature's
        [`RegionPolicy`][counters.core.policy.RegionPolicy] that every part follows: likes are
        counted per Region on MREC and on MRSC alike (each Region its own ``TALLY#<Region>``).
        ``hot_after_retries``: promote a standard post to hot once this process has retried that
        many attempts of its likes (conflicts, throttles) within ``PRESSURE_WINDOW_MS``; 0: never.
        ``cache_size``: how many posts the mode cache and the pressure map each keep (LRU).
        ``max_spread``: a hot post's spread doubles up to this when its lanes throttle (``SPREAD``: never).
        ``stream_consumers``: whether the like aggregator runs on the table's stream (``None``:
        ``TALLY_STREAM_CONSUMERS``, [`stream_consumers`][counters.core.settings.stream_consumers]); without it a hot post's like,
        creating a hot post, a switch to hot and ``hot_after_retries`` raise
        [`StreamConsumerMissing`][counters.core.errors.StreamConsumerMissing] before anything is written."""
        self.table_name = table_name
        self.stream_consumers = consumers = stream_consumers_run(stream_consumers)
        if hot_after_retries and not consumers:
            raise no_aggregator(f"hot_after_retries={hot_after_retries} promotes standard posts to hot")
        self.policy = policy = RegionPolicy.of(topology, per_region_in=(MREC, MRSC))
        self.retry = retry or RetryPolicy()
        store = PostStore(table_name, dynamodb=dynamodb, policy=policy)
        likes = like_toggles(table_name, dynamodb=dynamodb)
        self.toggle = Toggle(likes, retry=self.retry)
        self.refcount = RefCount(table_name, tally_attribute=TALLY, dynamodb=dynamodb, retry=self.retry)
        self.posts = Posts(
            table_name,
            store=store,
            likes=likes,
            retry=self.retry,
            mode_ttl_ms=mode_ttl_ms,
            cache_size=cache_size,
            cursor_secret=cursor_secret,
            policy=policy,
            stream_consumers=consumers,
        )
        self.toggling = Toggling(
            self.posts,
            self.toggle,
            retry=self.retry,
            hot_after_retries=hot_after_retries,
            cache_size=cache_size,
            policy=policy,
            max_spread=max_spread,
        )
        self._audits: Audits | None = None

    @property
    def audits(self) -> Audits:
        """The audit part ([`Audits`][counters.services.likes.audit.Audits]), built on first use with its module."""
        if self._audits is None:
            from counters.services.likes.audit import Audits as Audits

            self._audits = Audits(self.posts.store, self.refcount, self.toggle.counted(), retry=self.retry, policy=self.policy)
        return self._audits

    @classmethod
    def from_settings(cls, settings: Settings) -> Likes:
        """The service on the settings' table (hot mode, cursor secret and Regions from the settings when they have them)."""
        hot_after = settings.hot_after_retries if isinstance(settings, LikeSettings) else 0
        secret = settings.cursor_secret if isinstance(settings, LikeSettings) else ""
        max_spread = settings.max_spread if isinstance(settings, LikeSettings) else SPREAD
        topology = settings.topology if isinstance(settings, RegionSettings) else ONE_REGION  # a replay too (the retry worker)
        return cls(
            settings.table_name,
            retry=settings.retry,
            hot_after_retries=hot_after,
            cursor_secret=secret,
            topology=topology,
            max_spread=max_spread,
            stream_consumers=settings.stream_consumers,
        )

    @property
    def mode_ttl_ms(self) -> int:
        """How long a remembered post mode is trusted (ms)."""
        return self.posts.mode_ttl_ms

    @property
    def hot_after_retries(self) -> int:
        """Retried attempts on a standard post after which it turns hot (0: never)."""
        return self.toggling.hot_after_retries

    @property
    def _posts(self) -> LRU[str, PostInfo]:
        """The posts this process remembers ([`Posts.info`][counters.services.likes.posts.Posts.info])."""
        return self.posts.known

    @property
    def _pressure(self) -> LRU[str, list[tuple[int, int]]]:
        """Recent retried attempts per standard post (`Toggling._under_pressure`)."""
        return self.toggling.pressure

    # -- posts (Posts) ----------------------------------------------------------------------
    def create_post(
        self, *, author_id: str, body: str, post_id: str | None = None, idempotency_key: str | None = None, mode: str | None = None
    ) -> tuple[PublicPost, bool]:
        """[`Posts.create_post`][counters.services.likes.posts.Posts.create_post]: (the post, created now?)."""
        return self.posts.create_post(author_id=author_id, body=body, post_id=post_id, idempotency_key=idempotency_key, mode=mode)

    def get_post(self, post_id: str) -> PublicPost:
        """The post's public form: mode and tally (per Region on a global table); [`NotFound`][counters.core.errors.NotFound] if there is none."""
        return self.posts.get_post(post_id)

    def switch_mode(self, post_id: str, mode: str) -> tuple[PublicPost, bool]:
        """[`Posts.switch_mode`][counters.services.likes.posts.Posts.switch_mode]: (the post, switched by this call?)."""
        return self.posts.switch_mode(post_id, mode)

    def like_state(self, post_id: str, user_id: str) -> LikeState:
        """Whether ``user_id`` likes ``post_id`` now, as the like routes answer it."""
        return self.posts.like_state(post_id, user_id)

    def likers(self, post_id: str, *, limit: int, cursor: str | None = None) -> LikersPage:
        """[`Posts.likers`][counters.services.likes.posts.Posts.likers]: one page, and the signed cursor of the next."""
        return self.posts.likers(post_id, limit=limit, cursor=cursor)

    # -- like/unlike (Toggling) ---------------------------------------------------------------
    def like(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """[`Toggling.like`][counters.services.likes.toggling.Toggling.like]: like, unless a newer request of this user on this post decided."""
        return self.toggling.like(post_id, user_id, request_id=request_id, at=at)

    def unlike(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """[`Toggling.unlike`][counters.services.likes.toggling.Toggling.unlike]: the like item stays as a tombstone that orders later replays."""
        return self.toggling.unlike(post_id, user_id, request_id=request_id, at=at)

    # -- audits (Audits) ------------------------------------------------------------------
    def audit(self, post_id: str) -> QuickAudit:
        """[`Audits.audit`][counters.services.likes.audit.Audits.audit]: the tally against a count now (no drift concluded for a hot post)."""
        return self.audits.audit(post_id)

    def audit_posts(
        self, post_ids: list[str], *, repair: bool = False, wait_s: float = 8.0, poll_s: float = 0.1, budget_s: float | None = None
    ) -> list[Settled]:
        """[`Audits.audit_posts`][counters.services.likes.audit.Audits.audit_posts]: each post at a settled point, a drift repaired surgically."""
        return self.audits.audit_posts(post_ids, repair=repair, wait_s=wait_s, poll_s=poll_s, budget_s=budget_s)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred like/unlike commands the retry worker replays, and on one Region the like
        aggregator's deferred examinations ([`Merges.deferred`][counters.services.likes.merging.Merges.deferred])."""
        found = self.toggling.replayables()
        if not self.posts.store.refused("grow-spread"):
            found |= Merges(self.table_name, dynamodb=self.posts.store.dynamodb, retry=self.retry).replayables()
        return found
