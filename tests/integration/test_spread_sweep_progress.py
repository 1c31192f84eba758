"""The sweep of a grown post keeps its progress lane by lane (``swept`` on META), and what it has
swept is read by no one any more (issue 26 part 1, "a step is absorbed"; docs/likes.md "Settling").

Until a grown post is settled every like reads the older lanes of its user's chain, and one of them
is always among the first 8 lanes: under a step those 8 keys' reads saturate, and a sweep that had
to read them all again after each contended call never finished (the bench's step: 54 messages in
the retry DLQ, the post never settled). So the sweep:

* sweeps lanes in order from ``S0`` and, after each, marks ``swept`` = the lanes done (a conditional
  UpdateItem: the spread unchanged, never backwards); a redelivered sweep resumes there;
* sweeps a contended lane again (``LANE_ROUNDS``, a count) before the message fails;
* a like reads none of the swept lanes, and the aggregator's examination of a creation in its
  user's own lane reads none either: a user with an item there when the sweep read it has a
  pointer in their lane, and an item created there later is a creation outside its user's lane,
  which the aggregator always merges;
* a growth removes ``swept`` with the spread it was for.

Against DynamoDB Local and its stream, with the real LikeAggregatorFunction handler.
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.outcome import Outcome
from counters.primitives.toggle import now_ms
from counters.services.likes import Likes
from counters.services.likes.merging import LANE_ROUNDS, Merges
from counters.services.likes.model import UNSETTLED_TTL_MS
from counters.store.post_items import FIRST_SPREAD, lane_of
from devstack.streams import StreamPoller
from tests.integration import test_spread_merge as merges
from tests.integration.test_hot_likes import tally
from tests.integration.test_mode_switch import FAST, FOREVER, meta
from tests.integration.test_spread_growth import items_of, pointers_of
from tests.integration.test_spread_settle import liked_then_grown

agg_fn, batches, poller = merges.agg_fn, merges.batches, merges.poller  # the fixtures
drain = merges.drain


def movers_by_lane(spread: int = 16) -> dict[int, str]:
    """One user per lane of ``FIRST_SPREAD`` whose lane at ``spread`` is another one."""
    found: dict[int, str] = {}
    for n in range(5000):
        user = f"m{n}"
        lane = lane_of(user, FIRST_SPREAD)
        if lane not in found and lane_of(user, spread) != lane:
            found[lane] = user
        if len(found) == FIRST_SPREAD:
            return found
    raise AssertionError("no mover for every lane")


def failing_at(merges_: Merges, lane: int, times: int) -> list[str]:
    """Make the sweep's Query of ``lane`` contended ``times`` times; the lanes it queried, in order."""
    asked: list[str] = []
    original = merges_.store.lane_users
    left = [times]

    def lane_users(pk: str, retry: Any) -> Any:
        asked.append(pk)
        if pk.endswith(f"#S{lane}") and left[0] > 0:
            left[0] -= 1
            raise ContentionError("throttled (injected)")
        return original(pk, retry)

    merges_.store.lane_users = lane_users  # type: ignore[method-assign]
    return asked


def counting_reads(likes: Likes) -> list[list[dict[str, str]]]:
    """The older lanes each like of ``likes`` reads (``Posts.locate``'s one BatchGetItem)."""
    asked: list[list[dict[str, str]]] = []
    store = likes.posts.store
    original = store.first_existing
    store.first_existing = lambda keys, retry: asked.append(keys) or original(keys, retry)  # type: ignore[method-assign]
    return asked


def test_a_contended_sweep_keeps_the_lanes_it_did_and_a_redelivery_resumes_there(table: str, layer_client: Any, ddb: Any) -> None:
    users = movers_by_lane()
    liked_then_grown(table, list(users.values()), 16)
    first = Merges(table, retry=FAST)
    failing_at(first, 5, LANE_ROUNDS)  # lane 5 stays contended for every round of this message
    with pytest.raises(ContentionError):
        first.settle("p1", 16)
    assert meta(ddb, table)["swept"] == {"N": "5"} and "settled" not in meta(ddb, table)  # 0..4: done from S0
    for lane, user in users.items():  # the 8 lanes are swept at once: all but lane 5 are done
        expected = {lane_of(user, 16): lane} if lane != 5 else {}
        assert pointers_of(ddb, table, "p1", user, 16) == expected
    again = Merges(table, retry=FAST)
    asked = failing_at(again, 5, 0)
    verdict = again.settle("p1", 16)
    assert (verdict.status, verdict.result["merged"]) == ("APPLIED", 3)  # lanes 6 and 7 again: their pointers put again, nothing read
    assert sorted(asked) == [f"POST#p1#S{lane}" for lane in range(5, 8)]  # resumed at lane 5, 0..4 not read again
    assert meta(ddb, table)["settled"] == {"N": "16"}


def test_a_contended_lane_is_swept_again_before_the_message_fails(table: str, layer_client: Any, ddb: Any) -> None:
    users = movers_by_lane()
    liked_then_grown(table, list(users.values()), 16)
    merges_ = Merges(table, retry=FAST)
    failing_at(merges_, 0, LANE_ROUNDS - 1)  # the first lane: the busiest under a step
    verdict = merges_.settle("p1", 16)
    assert (verdict.status, verdict.result["merged"]) == ("APPLIED", 8)
    assert meta(ddb, table)["settled"] == {"N": "16"}


def test_a_like_reads_none_of_the_lanes_swept_and_finds_the_users_item_through_the_pointer(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    users = movers_by_lane()
    liked_then_grown(table, list(users.values()), 16)
    sweep = Merges(table, retry=FAST)
    failing_at(sweep, 4, LANE_ROUNDS)
    with pytest.raises(ContentionError):
        sweep.settle("p1", 16)
    fresh = Likes(table, retry=FAST)  # reads the post swept to lane 4, not settled
    info = fresh.posts.info("p1")
    assert (info.settled, info.swept) == (False, 4)
    asked = counting_reads(fresh)
    for lane in (1, 3):  # swept: nothing read, the pointer in the user's lane leads to the item
        assert fresh.toggling.unlike("p1", users[lane]).changed
    assert asked == []
    assert fresh.toggling.unlike("p1", users[6]).changed  # not swept yet: its older lane is read
    assert asked == [[{"PK": "POST#p1#S6", "SK": f"LIKE#USER#{users[6]}"}]]
    for lane in (1, 3, 6):
        assert list(items_of(ddb, table, "p1", users[lane], 16)) == [lane]  # the old item, unliked in place
    drain(poller)
    assert tally(ddb, table, "p1") == FIRST_SPREAD - 3


def test_a_stale_creation_in_a_swept_lane_is_merged_and_a_later_like_finds_it(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller, agg_fn: Any
) -> None:
    """The sweep read lane 2 before a stale-view writer created the user there: the like that
    skips lane 2 must not leave the user with two counted likes. The stale creation is outside its
    user's lane, so the aggregator merges it and puts the pointer; the own-lane creation's
    examination reads no swept lane."""
    stale = Likes(table, retry=FAST, mode_ttl_ms=FOREVER)
    stale.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    assert stale.posts.info("p1").spread == FIRST_SPREAD  # cached for good
    grower = Likes(table, retry=FAST)
    grower.posts.grow("p1", grower.posts.info("p1"), 16)
    sweep = Merges(table, retry=FAST)
    failing_at(sweep, 4, LANE_ROUNDS)
    with pytest.raises(ContentionError):
        sweep.settle("p1", 16)
    user = movers_by_lane()[2]
    assert stale.toggling.like("p1", user).changed  # in lane 2, after the sweep read it
    read: list[Any] = []
    store = agg_fn.function.service.merges.store
    original = store.read
    store.read = lambda keys, retry: read.append(keys) or original(keys, retry)
    drain(poller)
    assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): 2}
    fresh = Likes(table, retry=FAST)
    assert fresh.posts.info("p1").swept == 4
    again = fresh.toggling.like("p1", user)
    assert not again.changed  # found through the pointer: already liked
    newcomer = next(f"n{n}" for n in range(5000) if lane_of(f"n{n}", FIRST_SPREAD) == 1 and lane_of(f"n{n}", 16) == 9)
    read.clear()
    assert fresh.toggling.like("p1", newcomer).changed  # created in its own lane 9; its older lane 1 is swept
    drain(poller)
    assert all(not any(key["PK"] == "POST#p1#S1" for key in keys) for keys in read)  # lane 1 not read by the examination
    assert list(items_of(ddb, table, "p1", user, 16)) == [2] and list(items_of(ddb, table, "p1", newcomer, 16)) == [9]
    assert tally(ddb, table, "p1") == 2


def test_the_sweeps_mark_never_moves_back_and_a_growth_removes_it(table: str, layer_client: Any, ddb: Any) -> None:
    likes = liked_then_grown(table, [], 16)
    store = Merges(table, retry=FAST).store
    assert store.advance("p1", 16, 5, FAST) is Outcome.APPLIED
    assert store.advance("p1", 16, 3, FAST) is Outcome.REJECTED  # a slower sweep of the same spread
    assert store.advance("p1", 8, 6, FAST) is Outcome.REJECTED  # a sweep of a spread the post no longer has
    assert meta(ddb, table)["swept"] == {"N": "5"}
    likes.posts.grow("p1", likes.posts.fresh("p1"), 32)
    assert "swept" not in meta(ddb, table)  # lanes swept for 16 are not swept for 32: the pointers are in 16's lanes
    assert Likes(table, retry=FAST).posts.info("p1").swept == 0


def test_a_process_trusts_an_unsettled_posts_layout_for_a_second_and_a_settled_ones_for_longer(
    table: str, layer_client: Any, ddb: Any
) -> None:
    """A like skips what the sweep has done only once its process knows: a grown post not settled
    is read again after ``UNSETTLED_TTL_MS`` (a settled one after ``mode_ttl_ms``). The clock is
    the view's own ``read_at``, moved back, not the machine's speed."""
    liked_then_grown(table, list(movers_by_lane().values()), 16)
    fresh = Likes(table, retry=FAST)
    assert fresh.posts.info("p1").swept == 0
    sweep = Merges(table, retry=FAST)
    failing_at(sweep, 3, LANE_ROUNDS)
    with pytest.raises(ContentionError):
        sweep.settle("p1", 16)
    known = fresh.posts.known["p1"]
    fresh.posts.known["p1"] = known._replace(read_at=now_ms() - UNSETTLED_TTL_MS)
    assert fresh.posts.info("p1").swept == 3  # read again
    Merges(table, retry=FAST).settle("p1", 16)
    fresh.posts.known["p1"] = fresh.posts.known["p1"]._replace(read_at=now_ms() - UNSETTLED_TTL_MS)
    settled = fresh.posts.info("p1")
    assert settled.settled and settled.swept == 8
    fresh.posts.known["p1"] = aged = settled._replace(read_at=now_ms() - UNSETTLED_TTL_MS)
    assert fresh.posts.info("p1") is aged  # settled: trusted for mode_ttl_ms


def test_a_pair_made_by_a_creation_in_the_users_own_lane_is_merged_by_the_sweep(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    """The aggregator never examines a creation in its user's own lane: the sweep, which reads every
    lane of the old spread after the growth, merges the pair it makes. Here the like's eventually
    consistent read of the older lane misses the user's item (``Posts.locate`` returns nothing, as
    a read a moment after the item's write may), so the user has two liked items, counted twice
    until the sweep."""
    user = movers_by_lane()[3]
    likes = liked_then_grown(table, [user], FIRST_SPREAD)
    drain(poller)  # the first item's creation is examined at spread 8: in its user's lane then
    likes.posts.grow("p1", likes.posts.info("p1"), 16)
    likes.posts.store.first_existing = lambda keys, retry: None  # type: ignore[method-assign]
    assert likes.toggling.like("p1", user, request_id="req-late").changed  # a second item, in lane 11
    assert sorted(items_of(ddb, table, "p1", user, 16)) == [3, lane_of(user, 16)]
    drain(poller)
    assert tally(ddb, table, "p1") == 2  # not examined: counted twice until the sweep
    verdict = Merges(table, retry=FAST).settle("p1", 16)
    assert (verdict.status, verdict.result["merged"]) == ("APPLIED", 1)
    (item,) = items_of(ddb, table, "p1", user, 16).values()
    assert list(items_of(ddb, table, "p1", user, 16)) == [3] and item["changedBy"] == {"S": "req-late"}  # the latest request's state
    assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): 3}
    drain(poller)
    assert tally(ddb, table, "p1") == 1


def test_the_sweep_reads_no_chain_of_a_user_whose_lane_holds_nothing(table: str, layer_client: Any, ddb: Any) -> None:
    """Under a step the sweep's own reads of the busy first lanes kept it from finishing: a user
    whose lane at the new spread holds nothing gets the pointer by one conditional PutItem, with
    nothing read; only a user whose lane holds something (here a pair) has their chain read."""
    users = movers_by_lane()
    likes = liked_then_grown(table, list(users.values()), 16)
    paired = users[2]
    likes.posts.store.first_existing = lambda keys, retry: None  # type: ignore[method-assign]
    assert likes.toggling.like("p1", paired).changed  # a second item, in the user's lane at 16
    merges_ = Merges(table, retry=FAST)
    read: list[list[dict[str, str]]] = []
    original = merges_.store.read
    merges_.store.read = lambda keys, retry: read.append(keys) or original(keys, retry)  # type: ignore[method-assign]
    verdict = merges_.settle("p1", 16)
    assert (verdict.status, verdict.result["merged"]) == ("APPLIED", FIRST_SPREAD)
    assert {key["SK"] for keys in read for key in keys} == {f"LIKE#USER#{paired}"}  # the pair's chain only
    for lane, user in users.items():
        assert list(items_of(ddb, table, "p1", user, 16)) == [lane]
        assert pointers_of(ddb, table, "p1", user, 16) == {lane_of(user, 16): lane}


def test_a_sweep_asked_to_stop_between_groups_keeps_its_lanes_and_hands_on_the_rest(table: str, layer_client: Any, ddb: Any) -> None:
    """The worker's timeout near (``should_stop``): the sweep ends its group, answers CONTINUED with
    itself as the rest, and the rest resumes at ``swept`` (lanes 0..7 not read again)."""
    users = movers_by_lane(32)
    liked_then_grown(table, list(users.values()), 32)  # 16 old lanes: two groups
    first = Merges(table, retry=FAST)
    asked = failing_at(first, 99, 0)  # no lane fails: the lanes it queries
    # go on through the first group (asked before every call of it too), stop once it is recorded
    verdict = first.settle("p1", 32, should_stop=lambda: "swept" in meta(ddb, table))
    assert verdict.status == "CONTINUED" and verdict.then is not None
    assert (verdict.then.op, verdict.then.payload) == ("settle-likes", {"postId": "p1", "spread": 32})
    assert sorted(asked) == sorted(f"POST#p1#S{lane}" for lane in range(8))
    assert meta(ddb, table)["swept"] == {"N": "8"} and "settled" not in meta(ddb, table)
    rest = Merges(table, retry=FAST)
    asked_again = failing_at(rest, 99, 0)
    assert rest.settle("p1", 32).status == "APPLIED"
    assert sorted(asked_again) == sorted(f"POST#p1#S{lane}" for lane in range(8, 16))
    assert meta(ddb, table)["settled"] == {"N": "32"}
    for lane, user in users.items():
        assert pointers_of(ddb, table, "p1", user, 32) == {lane_of(user, 32): lane}


def test_a_sweep_told_to_stop_inside_a_group_hands_on_at_the_lanes_done_and_the_rest_resumes_there(
    table: str, layer_client: Any, ddb: Any
) -> None:
    """Under a step a group of 8 lanes can take longer than the worker's margin (throttled calls
    backed off from 250 ms, each lane swept again when contended): ``make bench`` on a loaded
    machine saw the worker killed at its timeout 5 times and the sweep in RetryDLQ. So the sweep
    asks ``should_stop`` before every call, in every lane, and a lane told to stop is not done:
    the sweep answers CONTINUED with ``swept`` at the lanes done, whichever lane was stopped."""
    import itertools

    users = movers_by_lane(32)
    liked_then_grown(table, list(users.values()), 32)
    asked = itertools.count()
    verdict = Merges(table, retry=FAST).settle("p1", 32, should_stop=lambda: next(asked) >= 3)
    assert verdict.status == "CONTINUED" and verdict.then is not None
    done = int(str(verdict.result["swept"]))
    assert done < FIRST_SPREAD  # stopped inside the first group: 3 answers cannot let 8 lanes finish
    stored = meta(ddb, table)
    assert stored.get("swept", {"N": "0"}) == {"N": str(done)} and "settled" not in stored
    for lane, user in users.items():
        if lane < done:  # every lane below swept is done: its movers pointed
            assert pointers_of(ddb, table, "p1", user, 32) == {lane_of(user, 32): lane}
    assert Merges(table, retry=FAST).settle("p1", 32).status == "APPLIED"
    assert meta(ddb, table)["settled"] == {"N": "32"}
    for lane, user in users.items():
        assert pointers_of(ddb, table, "p1", user, 32) == {lane_of(user, 32): lane}


def test_the_worker_queues_the_rest_of_a_sweep_when_its_timeout_is_near_and_acknowledges_the_message(
    load_function: Any, table: str, queues: Any, layer_client: Any, ddb: Any
) -> None:
    """RetryWorkerFunction's handler: with less than STOP_BEFORE_TIMEOUT_MS left the sweep starts no
    group; the rest goes on RetryQueue at once (not after the visibility timeout) and the message
    is acknowledged. With time left, the message queued settles the post."""
    from counters.core.commands import Command
    from devstack.runtime import LambdaContext

    users = movers_by_lane()
    liked_then_grown(table, list(users.values()), 16)
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    short = LambdaContext.for_function("RetryWorkerFunction", 512, worker.STOP_BEFORE_TIMEOUT_MS // 1000 - 1)
    sweep = Command("settle-likes", {"postId": "p1", "spread": 16})
    event = {"Records": [sqs_record(sweep.to_message())]}
    assert worker.lambda_handler(event, short) == {"batchItemFailures": []}  # acknowledged
    assert "swept" not in meta(ddb, table) and "settled" not in meta(ddb, table)  # no group started
    [message] = queues.sqs.receive_message(QueueUrl=queues.urls["RetryQueue"], MaxNumberOfMessages=10)["Messages"]
    rest = Command.from_message(message["Body"])
    assert (rest.op, rest.payload) == ("settle-likes", {"postId": "p1", "spread": 16})
    roomy = LambdaContext.for_function("RetryWorkerFunction", 512, 600)
    assert worker.lambda_handler({"Records": [sqs_record(message["Body"])]}, roomy) == {"batchItemFailures": []}
    assert meta(ddb, table)["settled"] == {"N": "16"}
    assert queues.depth("RetryQueue") == 1  # the first message, received above and not deleted; nothing new


def test_a_sweep_that_must_stop_with_no_queue_to_go_on_is_redelivered(table: str, layer_client: Any) -> None:
    from counters.core.commands import Command
    from counters.deferral.queue import Replayer

    liked_then_grown(table, list(movers_by_lane().values()), 16)
    replayer = Replayer(table, "http://sqs.local/123456789012/dlq", executors=Merges(table, retry=FAST).replayables(), retry=FAST)
    with pytest.raises(ContentionError, match="no retry queue"):
        replayer.replay(Command("settle-likes", {"postId": "p1", "spread": 16}).to_message(), should_stop=lambda: True)


def sqs_record(body: str) -> dict[str, Any]:
    """One SQS record as Lambda's event source mapping hands it to the worker."""
    return {
        "messageId": "m-1",
        "receiptHandle": "r-1",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "0", "SenderId": "s", "ApproximateFirstReceiveTimestamp": "0"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:RetryQueue",
        "awsRegion": "us-east-1",
    }
