"""A post grown past 64 lanes is counted on lane groups (docs/likes.md, "Lane groups").

Lanes 0..63 keep their checkpoints and their part of the tally on META; each further 64 lanes on
an item of their own, ``POST#<postId>#G<g>`` / ``AGG``, made by the aggregator's first write to
it. Each item's checkpoints guard its own lanes, so a redelivered batch adds nothing to any of
them; a read sums the items; an audit waits for its probes on every item and a repair writes META
against every item's ``tallyRev``; a standard unlike may take META's part below 0. Against
DynamoDB Local and its stream, with the real LikeAggregatorFunction handler.
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.primitives.aggregator import Change
from counters.services.likes import Likes
from counters.store.post_items import LANE_GROUP, MAX_SPREAD, group_key, lane_of
from counters.store.posts import PostStore, Repair
from counters.streams import like_aggregator
from devstack.streams import StreamPoller
from tests.integration.test_audit_repair import WAIT_S, aggregator  # noqa: F401 (the fixture)
from tests.integration.test_hot_likes import FN, deliver
from tests.integration.test_mode_switch import agg_fn, meta  # noqa: F401 (the fixture)

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def grown(likes: Likes, post: str, spread: int) -> None:
    """A hot post grown to ``spread`` (one conditional write on META per doubling)."""
    likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot")
    info = likes.posts.info(post)
    while (info.spread or 0) < spread:
        info = likes.posts.grow(post, info, 2 * (info.spread or 0))


def users_per_group(spread: int, each: int) -> dict[int, list[str]]:
    """``each`` users whose lane at ``spread`` is in each lane group."""
    found: dict[int, list[str]] = {g: [] for g in range(spread // LANE_GROUP)}
    for n in range(10_000):
        group = found[lane_of(f"u{n}", spread) // LANE_GROUP]
        if len(group) < each:
            group.append(f"u{n}")
        if all(len(g) == each for g in found.values()):
            return found
    raise AssertionError("not enough users")


def item(ddb: Any, table: str, key: dict[str, str]) -> dict[str, Any] | None:
    return ddb.get_item(TableName=table, Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True).get("Item")


def lanes_of(stored: dict[str, Any]) -> set[int]:
    return {int(lane[1:]) for lane in stored.get("aggSeq", {}).get("M", {})}


@pytest.fixture
def recorded(agg_fn: Any, table: str, dynamodb_endpoint: str) -> tuple[StreamPoller, list[dict[str, Any]]]:  # noqa: F811
    """The aggregator from the stream, every record it was given kept (to deliver them again)."""
    records: list[dict[str, Any]] = []

    def handle(event: dict[str, Any]) -> tuple[str, Any]:
        records.extend(event["Records"])
        return "ok", deliver(agg_fn, event["Records"])

    return StreamPoller(table, dynamodb_endpoint, {FN: handle}), records


def test_lanes_past_64_are_counted_on_their_groups_items_once_even_delivered_again(
    table: str,
    layer_client: Any,
    ddb: Any,
    agg_fn: Any,  # noqa: F811
    recorded: tuple[StreamPoller, list[dict[str, Any]]],
) -> None:
    poller, records = recorded
    likes = Likes(table, retry=FAST)
    grown(likes, "p1", MAX_SPREAD)
    users = users_per_group(MAX_SPREAD, 3)
    for group in users.values():
        for user in group:
            assert likes.toggling.like("p1", user).changed
    likes.toggling.unlike("p1", users[3][0])
    poller.poll_once()
    deliver(agg_fn, records)  # every batch again: each item's checkpoints refuse what it applied
    deliver(agg_fn, records[len(records) // 2 :])  # and a half, as a bisected batch redelivered

    post = meta(ddb, table)
    assert lanes_of(post) and max(lanes_of(post)) < LANE_GROUP  # META's maps stay at 64 lanes
    assert int(post["likeTally"]["N"]) == 3
    for g in range(1, MAX_SPREAD // LANE_GROUP):
        stored = item(ddb, table, group_key("p1", g))
        assert stored is not None and stored["postId"]["S"] == "p1"
        assert {lane // LANE_GROUP for lane in lanes_of(stored)} == {g}
        assert int(stored["likeTally"]["N"]) == (2 if g == 3 else 3), g
    assert likes.posts.get_post("p1")["likeTally"] == 11  # the sum a reader is shown
    audit = likes.audits.audit("p1")
    assert (audit.stored, audit.counted) == (11, 11)


def test_a_groups_item_is_made_only_under_a_post_that_exists(table: str, layer_client: Any, ddb: Any) -> None:
    [applied] = like_aggregator(table, retry=FAST).apply([Change("ghost", f"S{LANE_GROUP + 6}", "100", 1)])
    assert (applied.result.outcome, applied.result.reason) == ("rejected", "parent_missing")
    assert item(ddb, table, group_key("ghost", 1)) is None


def test_an_audit_of_a_post_of_128_lanes_settles_on_every_group_and_repairs_meta_against_them(
    table: str,
    layer_client: Any,
    ddb: Any,
    aggregator: Any,  # noqa: F811
) -> None:
    likes = Likes(table, retry=FAST)
    grown(likes, "p1", 2 * LANE_GROUP)
    users = users_per_group(2 * LANE_GROUP, 4)
    for group in users.values():
        for user in group:
            likes.toggling.like("p1", user)
    [clean] = likes.audits.audit_posts(["p1"], wait_s=WAIT_S)
    assert (clean.settled, clean.stored, clean.counted) == (True, 8, 8)
    ddb.update_item(  # a drift behind the layer's back, on the group's item (tallyRev untouched)
        TableName=table,
        Key={k: {"S": v} for k, v in group_key("p1", 1).items()},
        UpdateExpression="SET likeTally = :n",
        ExpressionAttributeValues={":n": {"N": "40"}},
    )
    [found] = likes.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert (found.settled, found.drift, found.repaired) == (True, 36, True)
    assert int(meta(ddb, table)["likeTally"]["N"]) == 4 - 36  # META's part makes the sum right
    assert likes.posts.get_post("p1")["likeTally"] == 8
    [again] = likes.audits.audit_posts(["p1"], wait_s=WAIT_S)
    assert (again.settled, again.drift) == (True, 0)


def test_a_repair_is_refused_when_a_groups_count_moved_since_the_read(
    table: str, layer_client: Any, ddb: Any, recorded: tuple[StreamPoller, list[dict[str, Any]]]
) -> None:
    poller, _ = recorded
    likes = Likes(table, retry=FAST)
    grown(likes, "p1", 2 * LANE_GROUP)
    users = users_per_group(2 * LANE_GROUP, 2)
    likes.toggling.like("p1", users[0][0])
    poller.poll_once()
    store = PostStore(table)
    seen = store.read("p1", FAST)
    assert seen is not None and [p.group for p in seen.parts] == [0, 1] and seen.tally == 1
    likes.toggling.like("p1", users[1][0])  # counted on the group's item after the read
    poller.poll_once()
    assert store.repair(seen, 1, "token-1", FAST, seen_capacity()) is Repair.MOVING
    assert int(meta(ddb, table)["likeTally"]["N"]) == 1 and "repairToken" not in meta(ddb, table)
    now = store.read("p1", FAST)
    assert now is not None and now.tally == 2
    assert store.repair(now, 2, "token-2", FAST, seen_capacity()) is Repair.REPAIRED
    assert store.repair(now, 2, "token-2", FAST, seen_capacity()) is Repair.REPAIRED  # its own write, recognised by its token


def seen_capacity() -> Any:
    from counters.core.outcome import Capacity

    return Capacity()


def test_a_standard_unlike_of_a_like_counted_on_a_group_takes_metas_part_below_zero(
    table: str, layer_client: Any, ddb: Any, recorded: tuple[StreamPoller, list[dict[str, Any]]]
) -> None:
    """The like was counted on G1 while the post was hot; standard, its unlike is counted on META in
    its transaction: META alone then reads -1, the post 0. The floor that keeps META at 0 or more
    would refuse it for ever (the sum is what is floored: the tally GET shows)."""
    poller, _ = recorded
    likes = Likes(table, retry=FAST)
    grown(likes, "p1", 2 * LANE_GROUP)
    user = users_per_group(2 * LANE_GROUP, 1)[1][0]
    likes.toggling.like("p1", user)
    poller.poll_once()
    likes.posts.switch_mode("p1", "standard")
    assert likes.posts.get_post("p1")["likeTally"] == 1
    assert likes.toggling.unlike("p1", user).changed
    poller.poll_once()
    assert int(meta(ddb, table)["likeTally"]["N"]) == -1
    assert likes.posts.get_post("p1")["likeTally"] == 0
    assert likes.posts.like_state("p1", user)["liked"] is False
