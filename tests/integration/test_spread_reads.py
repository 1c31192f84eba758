"""The reads of a grown post (issue 26 part 1): its audit and its likers listing through a change of
spread, and while a stale-view duplicate is not merged yet (docs/likes.md "A spread that grows").

- The audit probes and counts every lane of the spread it reads at the audit, and counts like items
  AS STORED: a user with two unmerged items is counted twice, as the tally counts both items'
  deltas until the merge moves them. The duplicate is reported apart and never repaired (a repair
  would correct what the merge corrects again).
- The listing cursor (lane, last user) stays valid as lanes are added after the old ones: a listing
  continued by a process that read the spread before the growth still reaches the new lanes, and a
  cursor naming a new lane is taken by such a process.
- A user with items in two lanes is listed once, from the lower lane that likes.

Against DynamoDB Local and its stream, with the real LikeAggregatorFunction handler.
"""

from __future__ import annotations

from typing import Any

from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from counters.store.post_items import FIRST_SPREAD, lane_of
from devstack.streams import StreamPoller
from tests.integration.test_audit_repair import WAIT_S, agg_fn, aggregator, wait_for_tally  # noqa: F401 (the fixtures)
from tests.integration.test_mode_switch import meta
from tests.integration.test_spread_growth import items_of, users_that_move

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def users_in(lanes: range, spread: int, count: int, prefix: str) -> list[str]:
    """``count`` users whose lane at ``spread`` is in ``lanes``."""
    found = [f"{prefix}{n}" for n in range(5000) if lane_of(f"{prefix}{n}", spread) in lanes]
    return found[:count]


def liked_hot_post(table: str, count: int) -> tuple[Likes, list[str]]:
    """A hot post ``p1`` liked by ``count`` users of the first 8 lanes (created at spread 8)."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    users = users_in(range(FIRST_SPREAD), FIRST_SPREAD, count, "o")
    for user in users:
        assert likes.toggling.like("p1", user).changed
    return likes, users


def list_all(likes: Likes, post: str, limit: int, cursor: str | None = None) -> tuple[list[str], int]:
    """Every liker listed from ``cursor`` on, page after page: (user ids in listing order, pages)."""
    listed: list[str] = []
    pages = 0
    while True:
        page = likes.posts.likers(post, limit=limit, cursor=cursor)
        pages += 1
        listed.extend(liker["userId"] for liker in page.user_ids)
        cursor = page.cursor
        if cursor is None:
            return listed, pages


def test_an_audit_of_a_post_grown_to_32_probes_and_counts_every_lane(
    table: str,
    layer_client: Any,
    ddb: Any,
    aggregator: StreamPoller,  # noqa: F811
) -> None:
    likes, old = liked_hot_post(table, 8)
    likes.posts.grow("p1", likes.posts.info("p1"), 16)
    mid = users_in(range(8, 16), 16, 6, "m")
    for user in mid:
        assert likes.toggling.like("p1", user).changed
    assert likes.posts.grow("p1", likes.posts.info("p1"), 32).spread == 32
    new = users_in(range(16, 32), 32, 6, "n")
    for user in new + old[:2]:  # old users liking again and unliking: their items where they were created
        assert likes.toggling.like("p1", user).changed is (user in new)
    assert likes.toggling.unlike("p1", old[0]).changed
    assert all(list(items_of(ddb, table, "p1", u, 32)) == [lane_of(u, 32)] for u in new)
    wait_for_tally(ddb, table, "p1", len(old) + len(mid) + len(new) - 1)
    [result] = likes.audits.audit_posts(["p1"], wait_s=WAIT_S)
    assert (result.settled, result.counted, result.drift, result.duplicates) == (True, 19, 0, 0)
    assert sorted(meta(ddb, table)["aggProbe"]["M"]) == sorted(f"S{n}" for n in range(32))  # a probe in every lane, applied


def test_an_audit_of_a_grown_post_outlasts_its_throttled_probes_in_one_call(
    table: str,
    layer_client: Any,
    ddb: Any,
    aggregator: StreamPoller,  # noqa: F811
) -> None:
    """64 probe writes into a post grown to 32 lanes: the first is throttled more often than the
    in-line budget (FAST: 3 attempts) allows. The audit's calls take ``AUDIT_ATTEMPTS``, so it
    settles in one call where it used to answer 503 (``audit it again``), again and again under
    the proof's faults. The throttles are the first ones of the auditing client's UpdateItems,
    whatever the timing (the aggregator has a client of its own)."""
    from counters.core.client import CLIENT_CONFIG, botocore_session, guard
    from counters.services.likes.audit import AUDIT_ATTEMPTS
    from testkit.faults import FaultInjector

    writer, users = liked_hot_post(table, 5)
    writer.posts.grow("p1", writer.posts.info("p1"), 16)
    writer.posts.grow("p1", writer.posts.info("p1"), 32)
    wait_for_tally(ddb, table, "p1", len(users))
    own = botocore_session().create_client("dynamodb", config=CLIENT_CONFIG)
    guard(own.meta.events, "dynamodb")
    throttled = FAST.max_attempts + 2
    assert throttled < AUDIT_ATTEMPTS
    faults = FaultInjector(own, seed=7).add("throttle", operations={"UpdateItem"}, rate=0.0, at_least=throttled)
    auditor = Likes(table, retry=FAST, dynamodb=own)
    [result] = auditor.audits.audit_posts(["p1"], wait_s=WAIT_S)
    assert faults.injected["throttle"] == throttled  # all on the first probe: more than the in-line budget
    assert (result.settled, result.counted, result.drift) == (True, len(users), 0)
    assert sorted(meta(ddb, table)["aggProbe"]["M"]) == sorted(f"S{n}" for n in range(32))


def test_an_unmerged_duplicate_is_counted_as_stored_and_reported_never_repaired(
    table: str,
    layer_client: Any,
    ddb: Any,
    aggregator: StreamPoller,  # noqa: F811
    agg_fn: Any,  # noqa: F811
) -> None:
    agg_fn.function.service.merges = None  # the merge held back: the window before it, which lasts one aggregator lag
    stale, current = Likes(table, retry=FAST), Likes(table, retry=FAST)
    stale.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    stale.posts.info("p1")  # this process reads the spread (8) now and trusts it for mode_ttl_ms
    current.posts.grow("p1", current.posts.info("p1"), 16)
    u, v = users_that_move(2)
    assert current.toggling.like("p1", u).changed  # the current view: created in lane_of(u, 16), its lower lane empty
    assert stale.toggling.like("p1", u).changed  # the stale view (spread 8): a second item, in lane_of(u, 8)
    assert sorted(items_of(ddb, table, "p1", u, 16)) == sorted({lane_of(u, 8), lane_of(u, 16)})
    assert current.toggling.like("p1", "w").changed
    wait_for_tally(ddb, table, "p1", 3)  # the tally counts both of u's items until the merge
    [result] = current.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert (result.settled, result.stored, result.counted, result.drift, result.duplicates) == (True, 3, 3, 0, 1)
    assert result.repaired is False and int(meta(ddb, table)["likeTally"]["N"]) == 3
    listed, _ = list_all(current, "p1", limit=1)
    assert sorted(listed) == sorted([u, "w"])  # u once, from its lower lane

    # a stale unlike makes a tombstone under a newer like: the user likes (the tally counts 1), listed once
    assert current.toggling.like("p1", v).changed
    assert stale.toggling.unlike("p1", v).changed is False  # no like seen where the stale view looks: a tombstone
    assert sorted(items_of(ddb, table, "p1", v, 16)) == sorted({lane_of(v, 8), lane_of(v, 16)})
    listed, _ = list_all(current, "p1", limit=50)
    assert sorted(listed) == sorted([u, v, "w"])


def test_a_listing_paged_across_a_growth_lists_every_liker_once(table: str, layer_client: Any, ddb: Any) -> None:
    reader, writer = Likes(table, retry=FAST), Likes(table, retry=FAST)
    reader.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    before = users_in(range(FIRST_SPREAD), FIRST_SPREAD, 12, "b")
    for user in before:
        assert writer.toggling.like("p1", user).changed
    page = reader.posts.likers("p1", limit=5)  # cursor taken at spread 8 (the reader keeps that spread cached)
    first = [liker["userId"] for liker in page.user_ids]
    assert len(first) == 5 and page.cursor is not None
    writer.posts.grow("p1", writer.posts.info("p1"), 16)
    after = users_in(range(8, 16), 16, 6, "a")
    for user in after:
        assert writer.toggling.like("p1", user).changed
    assert reader.posts.info("p1").spread == FIRST_SPREAD  # still the spread read before the growth
    rest, _ = list_all(reader, "p1", limit=5, cursor=page.cursor)
    assert sorted(first + rest) == sorted(before + after) and len(first + rest) == len(before) + len(after)


def test_a_cursor_into_a_new_lane_is_taken_by_a_process_that_has_not_seen_the_growth(table: str, layer_client: Any, ddb: Any) -> None:
    stale, current = Likes(table, retry=FAST), Likes(table, retry=FAST)
    stale.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    assert stale.posts.info("p1").spread == FIRST_SPREAD
    current.posts.grow("p1", current.posts.info("p1"), 16)
    users = users_in(range(8, 16), 16, 6, "c")
    for user in users:
        assert current.toggling.like("p1", user).changed
    page = current.posts.likers("p1", limit=1)  # lanes 0-7 are empty: the cursor names a lane >= 8 and a user in it
    assert page.cursor is not None
    rest, _ = list_all(stale, "p1", limit=2, cursor=page.cursor)
    assert sorted([liker["userId"] for liker in page.user_ids] + rest) == sorted(users)
