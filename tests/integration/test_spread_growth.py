"""A hot post's spread grows while likes flow (issue 26 part 1; docs/DESIGN.md "a spread that grows").

Items never move: a user's like stays in the lane it was created in, and a later request finds it
there (the user's chain of lanes, oldest first). New users go to the lanes of the spread now. A
process grows a post when its hot writes were retried in at least half of the post's lanes; one
user's writes all fall in one lane, so no single user grows a post. Against DynamoDB Local and its
stream, with the real LikeAggregatorFunction handler.

The duplicate a stale-view writer can create, and its merge: tests/integration/test_spread_merge.py.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.primitives.toggle import now_ms
from counters.services.likes import Likes
from counters.store.post_items import FIRST_SPREAD, chain_lanes, lane_of
from devstack.streams import StreamPoller
from tests.integration.test_hot_likes import tally
from tests.integration.test_mode_switch import agg_fn, meta, poller  # noqa: F401 (the fixtures)

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def users_that_move(count: int, spread: int = 2 * FIRST_SPREAD) -> list[str]:
    """Users whose lane at ``spread`` is not their lane at ``FIRST_SPREAD``."""
    found = [f"m{n}" for n in range(1000) if lane_of(f"m{n}", spread) != lane_of(f"m{n}", FIRST_SPREAD)]
    return found[:count]


def stored_of(ddb: Any, table: str, post: str, user: str, spread: int) -> dict[int, dict[str, Any]]:
    """Every lane (of a post with ``spread``) holding anything of ``user``: an item or a pointer."""
    found = {}
    for lane in range(spread):
        key = {"PK": {"S": f"POST#{post}#S{lane}"}, "SK": {"S": f"LIKE#USER#{user}"}}
        item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        if item:
            found[lane] = item
    return found


def items_of(ddb: Any, table: str, post: str, user: str, spread: int) -> dict[int, dict[str, Any]]:
    """Every lane (of a post with ``spread``) holding an item of ``user`` (not a pointer): the truth about duplicates."""
    return {lane: item for lane, item in stored_of(ddb, table, post, user, spread).items() if "livesIn" not in item}


def pointers_of(ddb: Any, table: str, post: str, user: str, spread: int) -> dict[int, int]:
    """The lanes holding a pointer of ``user``, and the lane each names."""
    return {lane: int(item["livesIn"]["N"]) for lane, item in stored_of(ddb, table, post, user, spread).items() if "livesIn" in item}


def test_a_users_chain_is_its_lanes_over_the_spreads_oldest_first() -> None:
    for user in ("u1", "m3", "zz"):
        chain = chain_lanes(user, 64)
        assert chain[0] == lane_of(user, 8) and chain[-1] == lane_of(user, 64)
        assert len(set(chain)) == len(chain) <= 4
        assert all(b % a == 0 or b - a in (8, 16, 32) or b % 8 == a for a, b in zip(chain, chain[1:], strict=False))
    assert chain_lanes("u1", 8) == [lane_of("u1", 8)]


def test_a_later_request_finds_the_users_like_under_the_old_spread(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,  # noqa: F811
) -> None:
    old, new = Likes(table, retry=FAST), Likes(table, retry=FAST)
    old.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    movers = users_that_move(3)
    for user in movers:
        assert old.toggling.like("p1", user).changed
    grown = new.posts.grow("p1", new.posts.info("p1"), 2 * FIRST_SPREAD)
    assert grown.spread == 16 and int(meta(ddb, table)["spread"]["N"]) == 16
    for user in movers:  # the process that knows the grown spread: the like is where it was created
        assert new.posts.like_state("p1", user)["liked"] is True
        assert new.toggling.unlike("p1", user).changed
        assert list(items_of(ddb, table, "p1", user, 16)) == [lane_of(user, FIRST_SPREAD)]  # one item, not moved
    assert new.toggling.like("p1", "fresh").changed  # a new user goes where the spread now puts it
    assert list(items_of(ddb, table, "p1", "fresh", 16)) == [lane_of("fresh", 16)]
    poller.poll_once()
    assert tally(ddb, table, "p1") == 1
    listed = [liker["userId"] for liker in new.posts.likers("p1", limit=50).user_ids]
    assert listed == ["fresh"]


@pytest.fixture
def steady_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The likes service's clock moves 1 ms per reading: the growth window (``PRESSURE_WINDOW_MS``,
    10 s) holds every like of a test however slow the machine, and stamps still only increase."""
    ticks = itertools.count(now_ms())
    monkeypatch.setattr("counters.services.likes.toggling.now_ms", lambda: next(ticks))


def test_throttles_in_half_the_lanes_grow_the_post_and_one_users_throttles_never_do(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,  # noqa: F811
    steady_clock: None,
) -> None:
    from testkit.faults import FaultInjector

    likes = Likes(table, retry=FAST, max_spread=64)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    faults = FaultInjector(layer_client, seed=1)
    try:
        faults.add("throttle", operations={"UpdateItem"}, rate=0.5)
        for n in range(40):  # one user, liking and unliking over and over under throttles: one lane
            with contextlib.suppress(ContentionError):
                (likes.toggling.like if n % 2 == 0 else likes.toggling.unlike)("p1", "solo")
    finally:
        faults.detach()
    assert faults.injected["throttle"] >= 10
    assert int(meta(ddb, table)["spread"]["N"]) == FIRST_SPREAD
    for user in one_per_lane("v", FIRST_SPREAD, FIRST_SPREAD // 2):  # one retried write in each of half the lanes
        like_throttled_once(likes, layer_client, user)
    assert int(meta(ddb, table)["spread"]["N"]) == 2 * FIRST_SPREAD
    poller.poll_once()
    assert tally(ddb, table, "p1") == FIRST_SPREAD // 2 + (1 if likes.posts.like_state("p1", "solo")["liked"] else 0)


def test_a_post_of_64_lanes_grows_when_16_of_them_throttle_not_32(table: str, layer_client: Any, ddb: Any, steady_clock: None) -> None:
    """Half of 64 lanes is more than one process's retried writes meet at 100% of their capacity
    (the bench's step under 4 s of burst: 20-26 lanes in 10 s): from 32 lanes on, ``GROW_LANES``
    lanes met are enough. Each user here has one throttled write in a lane of their own."""
    from counters.services.likes.model import GROW_LANES
    from counters.store.post_items import MAX_SPREAD

    likes = Likes(table, retry=FAST, max_spread=MAX_SPREAD)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    info = likes.posts.info("p1")
    while (info.spread or 0) < 64:
        info = likes.posts.grow("p1", info, 2 * (info.spread or 0))
    for k, user in enumerate(one_per_lane("w", 64, GROW_LANES), start=1):
        like_throttled_once(likes, layer_client, user)
        assert int(meta(ddb, table)["spread"]["N"]) == (128 if k == GROW_LANES else 64), k


def one_per_lane(prefix: str, spread: int, count: int) -> list[str]:
    """``count`` users, each in a lane of ``spread`` of their own."""
    lanes: dict[int, str] = {}
    for n in range(5000):
        lanes.setdefault(lane_of(f"{prefix}{n}", spread), f"{prefix}{n}")
        if len(lanes) == count:
            return list(lanes.values())
    raise AssertionError(f"no {count} lanes of {spread}")


def like_throttled_once(likes: Likes, layer_client: Any, user: str) -> None:
    """``user`` likes ``p1``, the like's first write throttled once (a retried write in its lane)."""
    from testkit.faults import FaultInjector

    faults = FaultInjector(layer_client, seed=2)
    try:
        faults.add("throttle", operations={"UpdateItem"}, limit=1)
        assert likes.toggling.like("p1", user).changed
    finally:
        faults.detach()
    assert faults.injected["throttle"] == 1
