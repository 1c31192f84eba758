"""A grown post is **settled** by a sweep, after which a like reads nothing (issue 26 part 1;
docs/likes.md "A spread that grows", "Settling").

Items never move. After a growth the retry worker's sweep (``settle-likes``, queued by the like
aggregator when it meets the post unsettled) puts, for every user with an item in a lane of the old
spread that is not their lane now, a **pointer** in their lane (``liked`` = ``pointer``,
``livesIn`` = the item's lane), then marks the post ``settled``. A like on a settled post writes
the user's lane directly: the pointer refuses every write of the toggle, and the like follows it to
the user's old item. A stale-view writer's creation in another lane is still examined by the
aggregator and merged, the pointer put with the merge; a creation in the user's own lane is not
examined (a user with an item elsewhere has a pointer there, which refuses it).

Against DynamoDB Local and its stream, with the real LikeAggregatorFunction handler.
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.outcome import Outcome
from counters.primitives.toggle import Reason, Stamp, now_ms
from counters.services.likes import Likes
from counters.services.likes.merging import Merges
from counters.store.post_items import FIRST_SPREAD, MAX_SPREAD, lane_of
from devstack.streams import StreamPoller
from tests.integration import test_spread_merge as merges
from tests.integration.test_hot_likes import tally
from tests.integration.test_mode_switch import FAST, FOREVER, meta
from tests.integration.test_spread_growth import items_of, pointers_of, users_that_move
from tests.integration.test_spread_merge import act, drain, mover

agg_fn, batches, poller = merges.agg_fn, merges.batches, merges.poller  # the fixtures


def staying(count: int, spread: int) -> list[str]:
    """Users whose lane at ``spread`` is their lane at ``FIRST_SPREAD``."""
    return [f"s{n}" for n in range(1000) if lane_of(f"s{n}", spread) == lane_of(f"s{n}", FIRST_SPREAD)][:count]


def liked_then_grown(table: str, users: list[str], spread: int) -> Likes:
    """A hot post ``p1`` liked by ``users`` at spread 8, then grown to ``spread`` (not settled)."""
    likes = Likes(table, retry=FAST, max_spread=MAX_SPREAD)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    for user in users:
        assert likes.toggling.like("p1", user).changed
    size = FIRST_SPREAD
    while size < spread:
        likes.posts.grow("p1", likes.posts.info("p1"), 2 * size)
        size *= 2
    return likes


def settle(table: str, spread: int) -> tuple[str, int]:
    """The retry worker's sweep of ``p1`` at ``spread``: (its status, users merged)."""
    verdict = Merges(table, retry=FAST).settle("p1", spread)
    return verdict.status, int(str(verdict.result["merged"]))


def test_the_sweep_puts_a_pointer_in_each_moving_users_lane_then_settles_the_post(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    movers, stay = users_that_move(5), staying(3, 16)
    likes = liked_then_grown(table, movers + stay, 16)
    assert likes.toggling.unlike("p1", movers[0]).changed  # a tombstone is pointed to as well: it orders later replays
    assert not likes.posts.fresh("p1").settled and "settled" not in meta(ddb, table)
    assert settle(table, 16) == ("APPLIED", 5)
    for user in movers:
        assert list(items_of(ddb, table, "p1", user, 16)) == [lane_of(user, FIRST_SPREAD)]  # nothing moved
        assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): lane_of(user, FIRST_SPREAD)}
    assert all(pointers_of(ddb, table, "p1", user, 16) == {} for user in stay)
    assert meta(ddb, table)["settled"] == {"N": "16"}
    assert settle(table, 16) == ("DUPLICATE", 0)  # done again: nothing to do
    drain(poller)
    assert tally(ddb, table, "p1") == 4 + 3  # pointers count nothing


def test_on_a_settled_post_a_like_reads_no_older_lane_and_follows_the_pointer_to_the_users_item(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    movers = users_that_move(3)
    liked_then_grown(table, movers, 16)
    settle(table, 16)
    fresh = Likes(table, retry=FAST)  # a process that reads the post settled
    assert fresh.posts.info("p1").settled
    asked: list[Any] = []
    store = fresh.posts.store
    original = store.first_existing
    store.first_existing = lambda keys, retry: asked.append(keys) or original(keys, retry)  # type: ignore[method-assign]
    unlike = fresh.toggling.unlike("p1", movers[1])
    assert unlike.changed and not asked  # no older lane read: the pointer in the user's lane led to the item
    (item,) = items_of(ddb, table, "p1", movers[1], 16).values()
    assert item["liked"] == {"BOOL": False} and pointers_of(ddb, table, "p1", movers[1], 16)  # the old item, the pointer kept
    newcomer = next(f"n{n}" for n in range(1000) if lane_of(f"n{n}", 16) != lane_of(f"n{n}", FIRST_SPREAD))
    assert fresh.toggling.like("p1", newcomer).changed and not asked
    assert list(items_of(ddb, table, "p1", newcomer, 16)) == [lane_of(newcomer, 16)]
    assert fresh.posts.like_state("p1", movers[1])["liked"] is False and fresh.posts.like_state("p1", movers[2])["liked"] is True
    replay = fresh.toggling.like("p1", movers[2])  # already liked, through the pointer
    assert (replay.changed, replay.result.reason) == (False, Reason.ALREADY_SET)
    drain(poller)
    assert tally(ddb, table, "p1") == 3


@pytest.mark.parametrize("stale_first", [True, False], ids=["stale-commits-first", "current-commits-first"])
def test_a_stale_writers_creation_on_a_settled_post_is_merged_and_the_pointer_put_with_it(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller, stale_first: bool
) -> None:
    stale = Likes(table, retry=FAST, mode_ttl_ms=FOREVER)
    stale.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    assert stale.posts.info("p1").spread == FIRST_SPREAD  # cached for good
    liked_then_grown_post = Likes(table, retry=FAST)
    liked_then_grown_post.posts.grow("p1", liked_then_grown_post.posts.info("p1"), 16)
    settle(table, 16)
    current = Likes(table, retry=FAST)
    user, base = mover(16), now_ms() - 60_000
    writes = [(stale, "like", "req-0", base + 1000), (current, "like", "req-1", base + 2000)]
    for likes, op, rid, at in writes if stale_first else writes[::-1]:
        act(likes, op, user, rid, at)
    assert sorted(items_of(ddb, table, "p1", user, 16)) == sorted({lane_of(user, 8), lane_of(user, 16)})  # the duplicate
    drain(poller)
    (item,) = items_of(ddb, table, "p1", user, 16).values()
    assert list(items_of(ddb, table, "p1", user, 16)) == [lane_of(user, FIRST_SPREAD)]  # kept in the oldest lane
    assert item["changedBy"] == {"S": "req-1"}  # the latest request's state
    assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): lane_of(user, FIRST_SPREAD)}
    assert tally(ddb, table, "p1") == 1
    again = current.toggling.unlike("p1", user, request_id="req-2", at=base + 3000)  # a settled like follows the new pointer
    assert again.changed
    drain(poller)
    assert tally(ddb, table, "p1") == 0


def test_a_creation_in_the_users_own_lane_of_a_settled_post_is_not_examined(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller, agg_fn: Any
) -> None:
    liked_then_grown(table, [], 16)
    settle(table, 16)
    current = Likes(table, retry=FAST)
    read: list[Any] = []
    store = agg_fn.function.service.merges.store
    original = store.read
    store.read = lambda keys, retry: read.append(keys) or original(keys, retry)
    newcomers = users_that_move(4)
    for user in newcomers:
        assert current.toggling.like("p1", user).changed
    drain(poller)
    assert read == [] or all(not keys for keys in read)  # no chain read for a creation in its own lane
    assert tally(ddb, table, "p1") == 4


def test_a_growth_after_settling_is_settled_again_by_its_own_sweep(table: str, layer_client: Any, ddb: Any, poller: StreamPoller) -> None:
    users = [f"g{n}" for n in range(40)]
    likes = liked_then_grown(table, users, 16)
    assert settle(table, 16)[0] == "APPLIED"
    likes.posts.grow("p1", likes.posts.fresh("p1"), 32)
    assert not likes.posts.fresh("p1").settled  # grown: a like reads the older lanes again until the sweep
    assert settle(table, 16) == ("DUPLICATE", 0)  # a sweep of the spread before does nothing
    assert settle(table, 32)[0] == "APPLIED" and meta(ddb, table)["settled"] == {"N": "32"}
    for user in users:
        item_lane = lane_of(user, FIRST_SPREAD)
        assert list(items_of(ddb, table, "p1", user, 32)) == [item_lane]
        if lane_of(user, 32) != item_lane:
            assert pointers_of(ddb, table, "p1", user, 32)[lane_of(user, 32)] == item_lane
    fresh = Likes(table, retry=FAST)
    for user in users[:10]:
        assert fresh.toggling.unlike("p1", user).changed
    assert all(len(items_of(ddb, table, "p1", user, 32)) == 1 for user in users)
    drain(poller)
    assert tally(ddb, table, "p1") == 30


def test_the_sweep_does_not_settle_a_post_that_grew_again_meanwhile(table: str, layer_client: Any, ddb: Any) -> None:
    likes = liked_then_grown(table, users_that_move(2), 16)
    likes.posts.grow("p1", likes.posts.fresh("p1"), 32)
    assert settle(table, 16) == ("DUPLICATE", 0)
    assert "settled" not in meta(ddb, table)
    store = Merges(table, retry=FAST).store
    assert store.settle("p1", 16, FAST) is Outcome.REJECTED  # the condition: the spread is still 16


def test_a_pointer_refuses_every_write_of_the_toggle_and_says_where_the_item_is(table: str, layer_client: Any, ddb: Any) -> None:
    likes = liked_then_grown(table, [], 16)
    key = {"PK": "POST#p1#S11", "SK": "LIKE#USER#u1"}
    pointer = {"PK": {"S": key["PK"]}, "SK": {"S": key["SK"]}, "liked": {"S": "pointer"}, "livesIn": {"N": "3"}}
    ddb.put_item(TableName=table, Item=pointer)
    toggle = likes.toggling.toggle
    for n, on in enumerate((True, False, True)):
        result = toggle.set(key, on, Stamp(now_ms() + n, f"r{n}"), delta_attribute="delta")
        assert (result.outcome, result.reason) == (Outcome.REJECTED, Reason.MOVED)
        assert result.value is not None and result.value.points_to == 3
    assert ddb.get_item(TableName=table, Key={k: {"S": v} for k, v in key.items()})["Item"] == pointer  # untouched


def test_a_pointer_that_moves_under_a_like_twice_is_contention_never_a_write_elsewhere(table: str, layer_client: Any, ddb: Any) -> None:
    """A like follows at most ``POINTER_HOPS`` pointers (a merge may re-point one meanwhile), then
    answers contention (re-sent later), and writes nothing where no pointer led it."""
    liked_then_grown(table, [], 16)
    settle(table, 16)
    user = mover(16)
    for lane in (lane_of(user, 16), lane_of(user, FIRST_SPREAD)):  # two pointers pointing at each other
        other = lane_of(user, FIRST_SPREAD) if lane == lane_of(user, 16) else lane_of(user, 16)
        item = {"PK": {"S": f"POST#p1#S{lane}"}, "SK": {"S": f"LIKE#USER#{user}"}, "liked": {"S": "pointer"}, "livesIn": {"N": str(other)}}
        ddb.put_item(TableName=table, Item=item)
    fresh = Likes(table, retry=FAST)
    with pytest.raises(ContentionError):
        fresh.toggling.like("p1", user)
    assert items_of(ddb, table, "p1", user, 16) == {}


def test_a_stale_writers_lone_creation_after_the_sweep_gets_its_pointer_from_the_aggregator(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    """The sweep read the user's old lane before the stale writer created the user there: no
    partner to merge, yet the user's lane must point to it, or a settled like would create a second
    item in the user's lane that nothing examines."""
    stale = Likes(table, retry=FAST, mode_ttl_ms=FOREVER)
    stale.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    assert stale.posts.info("p1").spread == FIRST_SPREAD
    Likes(table, retry=FAST).posts.grow("p1", Likes(table, retry=FAST).posts.info("p1"), 16)
    assert settle(table, 16) == ("APPLIED", 0)
    user = mover(16)
    assert stale.toggling.like("p1", user).changed  # created in H mod 8, after the sweep
    drain(poller)
    assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): lane_of(user, FIRST_SPREAD)}
    current = Likes(table, retry=FAST)
    assert current.posts.info("p1").settled
    assert current.toggling.unlike("p1", user).changed  # through the pointer, to the stale writer's item
    assert list(items_of(ddb, table, "p1", user, 16)) == [lane_of(user, FIRST_SPREAD)]
    drain(poller)
    assert tally(ddb, table, "p1") == 0


def test_a_deferred_examination_reads_its_users_chains_together_and_merges_only_who_needs_it(
    table: str, layer_client: Any, ddb: Any
) -> None:
    """The retry worker's merge-likes names up to 500 users: one read of every chain (BatchGetItem
    per 100 keys), then a merge, written from that read, for the users who need one; serial reads
    per user outlasted the worker's 15 s under the bench's step and sent the commands to the DLQ."""
    from counters.core.commands import Command

    users = users_that_move(120)
    liked_then_grown(table, users, 16)
    assert settle(table, 16)[1] == 120  # every user pointed to
    stale = Likes(table, retry=FAST)
    stale.posts.known["p1"] = stale.posts.info("p1")._replace(spread=FIRST_SPREAD, settled=True)  # a view from before the growth
    late = next(u for u in (f"late{n}" for n in range(1000)) if lane_of(u, 16) != lane_of(u, FIRST_SPREAD))
    assert stale.toggling.like("p1", late).changed  # in H mod 8, after the sweep: needs its pointer
    merges = Merges(table, retry=FAST)
    reads: list[int] = []
    original = merges.store.read
    merges.store.read = lambda keys, retry: reads.append(len(keys)) or original(keys, retry)  # type: ignore[method-assign]
    command = Command("merge-likes", {"postId": "p1", "userIds": [*users, late]})
    verdict = merges.replayables()["merge-likes"].run(command)
    assert verdict.status == "APPLIED" and verdict.result["merged"] == 1
    assert reads == [2 * 121]  # every chain at once; the one user merged is written from that read
    assert pointers_of(ddb, table, "p1", late, 16) == {lane_of(late, 16): lane_of(late, FIRST_SPREAD)}
