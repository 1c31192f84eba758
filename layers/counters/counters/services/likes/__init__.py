"""Posts and likes: the reference-count primitive applied to seed 01's item shapes.

The items (post ``META``, like state items under spread keys or seed 01's layout, audit probes)
are [`counters.store.post_items`][counters.store.post_items]' and their requests [`counters.store.posts`][counters.store.posts]'. The service is split by job, and
[`Likes`][counters.services.likes.Likes] composes the parts (callers use them: ``likes.posts``, ``likes.toggling``, ``likes.audits``): [`posts`][counters.services.likes.posts] (create, read, switch mode, likers),
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

**Switching modes** ([`Posts.switch_mode`][counters.services.likes.posts.Posts.switch_mode]) moves nothing: a user's state item is the same
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

from functools import cached_property
from typing import TYPE_CHECKING

from counters.core.client import DynamoDBClient
from counters.core.commands import Replayable
from counters.core.failures import RetryPolicy
from counters.core.lru import CACHE_SIZE
from counters.core.regions import ONE_REGION, RegionSettings, Topology
from counters.core.settings import Settings
from counters.core.settings import stream_consumers as stream_consumers_run
from counters.primitives.refcount import RefCount
from counters.primitives.toggle import Toggle
from counters.services.likes.merging import Merges
from counters.services.likes.model import MODE_TTL_MS, SPREAD, LikeSettings, likes_policy, no_aggregator
from counters.services.likes.posts import Posts
from counters.services.likes.toggling import Toggling
from counters.store.post_items import TALLY
from counters.store.posts import PostStore, like_toggles

if TYPE_CHECKING:  # imported on first use (Likes.audits): only the audit routes need it
    from counters.services.likes.audit import Audits

__all__ = ["Likes"]


class Likes:
    """Posts and their likes: the parts composed over the family's stores. ``posts``
    ([`Posts`][counters.services.likes.posts.Posts]: create, read, switch mode, a user's like, likers),
    ``toggling`` ([`Toggling`][counters.services.likes.toggling.Toggling]: like and unlike exactly once),
    ``audits`` ([`Audits`][counters.services.likes.audit.Audits], built on first use)."""

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
        [`RegionPolicy`][counters.core.policy.RegionPolicy] that every part follows
        ([`likes_policy`][counters.services.likes.model.likes_policy]).
        ``hot_after_retries``: promote a standard post to hot once this process has retried that
        many attempts of its likes (conflicts, throttles) within ``PRESSURE_WINDOW_MS``; 0: never.
        ``cache_size``: how many posts the mode cache and the pressure map each keep (LRU).
        ``max_spread``: a hot post's spread doubles up to this when its lanes throttle (``SPREAD``: never).
        ``stream_consumers``: whether the like aggregator runs on the table's stream (``None``:
        ``TALLY_STREAM_CONSUMERS``, [`stream_consumers`][counters.core.settings.stream_consumers]); without it a hot post's like,
        creating a hot post, a switch to hot and ``hot_after_retries`` raise
        [`StreamConsumerMissing`][counters.core.errors.StreamConsumerMissing] before anything is written."""
        self.table_name = table_name
        consumers = stream_consumers_run(stream_consumers)
        if hot_after_retries and not consumers:
            raise no_aggregator(f"hot_after_retries={hot_after_retries} promotes standard posts to hot")
        self.policy = policy = likes_policy(topology)
        self.retry = retry = retry or RetryPolicy()
        likes = like_toggles(table_name, dynamodb=dynamodb)
        self.toggle = Toggle(likes, retry=retry)
        self.refcount = RefCount(table_name, tally_attribute=TALLY, dynamodb=dynamodb, retry=retry)
        store = PostStore(table_name, dynamodb=dynamodb, policy=policy)
        self.posts = Posts(
            store,
            likes,
            retry=retry,
            mode_ttl_ms=mode_ttl_ms,
            cache_size=cache_size,
            cursor_secret=cursor_secret,
            stream_consumers=consumers,
        )
        self.toggling = Toggling(self.posts, self.toggle, hot_after_retries=hot_after_retries, cache_size=cache_size, max_spread=max_spread)
        self.merges = None if store.refused("grow-spread") else Merges(table_name, dynamodb=dynamodb, retry=retry)

    @cached_property
    def audits(self) -> Audits:
        """The audit part ([`Audits`][counters.services.likes.audit.Audits]), built on first use with its module."""
        from counters.services.likes.audit import Audits

        return Audits(self.posts.store, self.refcount, self.toggle.counted(), retry=self.retry)

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

    def replayables(self) -> dict[str, Replayable]:
        """The deferred like/unlike commands the retry worker replays, and on one Region the like
        aggregator's deferred examinations ([`Merges.deferred`][counters.services.likes.merging.Merges.deferred])."""
        return self.toggling.replayables() | ({} if self.merges is None else self.merges.replayables())
