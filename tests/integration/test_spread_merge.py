"""A user's second like item on a grown post, made by a writer with a stale view of the spread, is
detected and merged by the like aggregator, once (issue 26 part 1; docs/DESIGN.md "A spread that grows").

A stale writer (a process whose cached post says spread 8) creates user u in ``H mod 8``; a current
writer that read that lane empty creates u in ``H mod 16`` (or ``H mod 32``). Both orders of commit
are forced: the current writer's read of the lower lane is made before the stale write commits.
After the stream is drained into the real LikeAggregatorFunction handler: one item for u, in the
oldest lane, holding the latest request's state; the tally equals the liked items; a replay of the
latest request changes nothing. Against DynamoDB Local and its stream, the template's filter applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from counters.core.outcome import Outcome
from counters.primitives.toggle import Reason, Stamp, now_ms
from counters.services.likes import Likes
from counters.store.post_items import DELTA, FIRST_SPREAD, MAX_SPREAD, USER_ID, lane_of
from devstack.streams import StreamPoller
from tests.integration.test_hot_likes import FN, deliver, tally
from tests.integration.test_mode_switch import FAST, FOREVER, agg_fn, meta  # noqa: F401 (the fixture)
from tests.integration.test_spread_growth import items_of, pointers_of

Op = str  # "like" / "unlike"


@pytest.fixture
def batches(agg_fn: Any) -> list[dict[str, Any]]:  # noqa: F811
    return []


@pytest.fixture
def poller(agg_fn: Any, table: str, dynamodb_endpoint: str, batches: list[dict[str, Any]]) -> StreamPoller:  # noqa: F811
    """The template's mapping of LikeAggregatorFunction; every batch delivered is kept (to redeliver it)."""

    def invoke(event: dict[str, Any]) -> tuple[str, Any]:
        batches.append(event)
        return "ok", deliver(agg_fn, event["Records"])

    return StreamPoller(table, dynamodb_endpoint, {FN: invoke})


DRAIN_POLLS = 200
"""Polls ``drain`` makes at most: a hang guard (a merge feeding the stream for ever), not a speed
bound. Each poll delivers every record available; a merge's own records come in the next one."""


def drain(poller: StreamPoller) -> None:
    """Deliver until a poll brings nothing new (no record delivered, no batch given up on): the
    stream is quiet, so every merge the records caused has run and been delivered in turn."""
    for _ in range(DRAIN_POLLS):
        failed = len(poller.failed_batches)
        if poller.poll_once() == 0 and len(poller.failed_batches) == failed:
            return
    raise AssertionError(f"the stream was still bringing records after {DRAIN_POLLS} polls")


def mover(spread: int) -> str:
    """A user whose lane at ``spread`` is not its lane at ``FIRST_SPREAD`` (the chain has two lanes or more)."""
    return next(f"m{n}" for n in range(1000) if lane_of(f"m{n}", spread) != lane_of(f"m{n}", FIRST_SPREAD))


def grown(ddb: Any, table: str, spread: int) -> tuple[Likes, Likes]:
    """(a stale process that read the post at spread 8 and keeps it, a current one after growth to ``spread``)."""
    stale, current = Likes(table, retry=FAST, mode_ttl_ms=FOREVER), Likes(table, retry=FAST, max_spread=MAX_SPREAD)
    current.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    assert stale.posts.info("p1").spread == FIRST_SPREAD  # cached for good
    size = FIRST_SPREAD
    while size < spread:
        current.posts.grow("p1", current.posts.info("p1"), 2 * size)
        size *= 2
    assert int(meta(ddb, table)["spread"]["N"]) == spread
    return stale, current


def act(likes: Likes, op: Op, user: str, request_id: str, at: int) -> None:
    change = (likes.toggling.like if op == "like" else likes.toggling.unlike)("p1", user, request_id=request_id, at=at)
    # each writer creates its own item: a like, or an unlike's tombstone (nothing to switch off: already_set)
    assert change.result.outcome is Outcome.APPLIED or change.result.reason is Reason.ALREADY_SET, change


def after_its_read(current: Likes, run: Callable[[], None]) -> None:
    """Run ``run`` (the stale write) right after the current writer has read the user's older lanes
    and found nothing: the current writer then creates in the new lane, committing second."""
    store = current.posts.store
    original = store.first_existing

    def first_existing(keys: Any, retry: Any) -> Any:
        found = original(keys, retry)
        store.first_existing = original  # type: ignore[method-assign]
        run()
        return found

    store.first_existing = first_existing  # type: ignore[method-assign]


def duplicate(
    ddb: Any, table: str, spread: int, stale_first: bool, ops: tuple[Op, Op], latest_first: bool
) -> tuple[Likes, Likes, str, tuple[str, int, Op]]:
    """u created twice: by the stale writer in ``H mod 8`` and the current one in ``H mod spread``,
    committed in the order asked, ``ops`` in commit order; ``latest_first``: the request committed
    first is the later one (a request that waited). Returns the writers, u and the latest request."""
    stale, current = grown(ddb, table, spread)
    user, base = mover(spread), now_ms() - 60_000
    stamps = [base + 2000, base + 1000] if latest_first else [base + 1000, base + 2000]
    writers = [stale, current] if stale_first else [current, stale]
    requests = [(f"req-{n}", stamps[n], ops[n]) for n in range(2)]
    if stale_first:  # the current writer reads u's old lane empty, then the stale write commits, then its own
        after_its_read(current, lambda: act(stale, ops[0], user, requests[0][0], stamps[0]))
        act(current, ops[1], user, requests[1][0], stamps[1])
    else:
        for writer, (rid, at, op) in zip(writers, requests, strict=True):
            act(writer, op, user, rid, at)
    found = items_of(ddb, table, "p1", user, spread)
    assert sorted(found) == sorted({lane_of(user, FIRST_SPREAD), lane_of(user, spread)})  # the duplicate is there
    return stale, current, user, max(requests, key=lambda r: r[1])


def assert_merged(
    ddb: Any, table: str, likes: Likes, user: str, spread: int, latest: tuple[str, int, Op], others: int = 0, flip: bool | None = None
) -> None:
    """One item for ``user``, in the oldest lane, with the latest request's state; the tally counts it
    (and ``others`` liked users); the latest request replayed writes nothing. ``flip``: the latest
    request flipped an item, so it is recorded as the state's ``requestId`` (default: a like; an
    unlike that created a tombstone records none)."""
    flip = op_of(latest) == "like" if flip is None else flip
    found = items_of(ddb, table, "p1", user, spread)
    assert list(found) == [lane_of(user, FIRST_SPREAD)]  # one item, in the oldest lane
    # and a pointer to it in the user's lane of the spread (where a settled post's like writes)
    assert pointers_of(ddb, table, "p1", user, spread) == {lane_of(user, spread): lane_of(user, FIRST_SPREAD)}
    (item,) = found.values()
    rid, at, op = latest
    assert item["liked"]["BOOL"] is (op == "like") and item["changedBy"]["S"] == rid and int(item["changedAt"]["N"]) == at
    # a replay of the latest request finds its own id (an unlike that made a tombstone records none)
    assert item.get("requestId") == ({"S": rid} if flip else None)
    assert tally(ddb, table, "p1") == (1 if op == "like" else 0) + others
    assert likes.posts.like_state("p1", user)["liked"] is (op == "like")
    replay = (likes.toggling.like if op == "like" else likes.toggling.unlike)("p1", user, request_id=rid, at=at)
    expected = (Outcome.DUPLICATE, Reason.OWN_REQUEST) if flip else (Outcome.REJECTED, Reason.ALREADY_SET)
    assert (replay.result.outcome, replay.result.reason) == expected and not replay.result.capacity.write_units  # nothing written


def op_of(request: tuple[str, int, Op]) -> Op:
    return request[2]


COMBOS = [("like", "like"), ("like", "unlike"), ("unlike", "like")]


@pytest.mark.parametrize("latest_first", [False, True], ids=["latest-commits-last", "latest-commits-first"])
@pytest.mark.parametrize("ops", COMBOS, ids=["/".join(c) for c in COMBOS])
@pytest.mark.parametrize("stale_first", [False, True], ids=["current-commits-first", "stale-commits-first"])
def test_a_stale_writers_second_item_is_merged_into_the_oldest_lane_and_the_latest_request_wins(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,
    stale_first: bool,
    ops: tuple[Op, Op],
    latest_first: bool,
) -> None:
    stale, current, user, latest = duplicate(ddb, table, 16, stale_first, ops, latest_first)
    drain(poller)
    assert_merged(ddb, table, current, user, 16, latest)
    assert_merged(ddb, table, stale, user, 16, latest)  # the stale process writes the kept item too


@pytest.mark.parametrize("ops", [("like", "unlike"), ("unlike", "like")], ids=["like/unlike", "unlike/like"])
@pytest.mark.parametrize("stale_first", [False, True], ids=["current-commits-first", "stale-commits-first"])
def test_at_spread_32_the_pair_is_found_across_two_doublings(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller, stale_first: bool, ops: tuple[Op, Op]
) -> None:
    stale, current, user, latest = duplicate(ddb, table, 32, stale_first, ops, False)
    drain(poller)
    assert_merged(ddb, table, current, user, 32, latest)


def test_a_redelivered_batch_merges_once(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,
    agg_fn: Any,  # noqa: F811
    batches: list[dict[str, Any]],
) -> None:
    _, current, user, latest = duplicate(ddb, table, 16, False, ("like", "like"), False)
    assert current.toggling.like("p1", "other").changed
    drain(poller)
    assert tally(ddb, table, "p1") == 2
    for event in list(batches):  # every batch again, whole, as after a lost checkpoint
        assert deliver(agg_fn, event["Records"]) == {"batchItemFailures": []}
    drain(poller)
    assert tally(ddb, table, "p1") == 2
    assert_merged(ddb, table, current, user, 16, latest, others=1)


@pytest.mark.parametrize("target", ["kept", "retired"])
def test_a_write_landing_between_the_detection_and_the_merge_makes_it_read_again_and_stay_exact(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,
    agg_fn: Any,  # noqa: F811
    target: str,
) -> None:
    """The user's next request lands after the merge read the items: on the kept item (a writer that
    finds the oldest lane), or on the item the merge retires (a writer that located the new lane
    before the stale creation, and paused)."""
    _, current, user, _ = duplicate(ddb, table, 16, True, ("like", "like"), False)
    store = agg_fn.function.service.merges.store
    original, sent = store.merge, []
    late = ("req-late", now_ms(), "unlike")

    def merge(*args: Any, **kwargs: Any) -> Outcome:
        if not sent and target == "kept":
            act(current, "unlike", user, late[0], late[1])
        elif not sent:
            key = {"PK": f"POST#p1#S{lane_of(user, 16)}", "SK": f"LIKE#USER#{user}"}
            written = current.toggling.toggle.set(key, False, Stamp(late[1], late[0]), attributes={USER_ID: user}, delta_attribute=DELTA)
            assert written.outcome is Outcome.APPLIED
        sent.append(original(*args, **kwargs))
        return sent[-1]

    store.merge = merge
    try:
        drain(poller)
    finally:
        store.merge = original
    assert sent[:2] == [Outcome.REJECTED, Outcome.APPLIED]  # refused on the stamp it read, then merged again
    assert_merged(ddb, table, current, user, 16, late, flip=True)  # it switched a like off: its id is recorded


def test_a_stale_unlike_created_after_the_newer_like_was_examined_is_still_merged(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    """The current writer's like (16 lanes) is examined before the stale writer's unlike exists; the
    unlike, the later request, creates a tombstone (``delta`` 0) in the old lane. Only its own
    examination can find the pair: the filter must pass a creation that counted nothing."""
    stale, current = grown(ddb, table, 16)
    user, at = mover(16), now_ms() - 60_000
    act(current, "like", user, "req-like", at)
    drain(poller)  # examined: nothing in the other lanes yet
    assert tally(ddb, table, "p1") == 1
    act(stale, "unlike", user, "req-unlike", at + 1000)
    assert len(items_of(ddb, table, "p1", user, 16)) == 2
    drain(poller)
    assert_merged(ddb, table, current, user, 16, ("req-unlike", at + 1000, "unlike"))


def test_a_merge_still_contended_reports_its_record_and_the_redelivery_merges(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,
    agg_fn: Any,  # noqa: F811
    dynamodb_endpoint: str,
) -> None:
    _, current, user, latest = duplicate(ddb, table, 16, False, ("like", "like"), False)
    captured: list[dict[str, Any]] = []
    StreamPoller(table, dynamodb_endpoint, {FN: lambda event: (captured.append(event), ("ok", None))[1]}).poll_once()
    records = [r for event in captured for r in event["Records"]]
    creations = [r["dynamodb"]["SequenceNumber"] for r in records if r["eventName"] == "INSERT"]
    store = agg_fn.function.service.merges.store
    original = store.merge
    store.merge = lambda *args, **kwargs: Outcome.REJECTED  # every round refused: an item keeps moving
    deferring = agg_fn.defer
    agg_fn.defer = lambda command: False  # no retry queue took the examination
    try:
        answer = deliver(agg_fn, records)
    finally:
        store.merge = original
        agg_fn.defer = deferring
    (failure,) = answer["batchItemFailures"]
    assert failure["itemIdentifier"] in creations  # the batch is redelivered from a creation
    assert tally(ddb, table, "p1") == 2  # the tally part applied (checkpointed); the pair is not merged yet
    assert len(items_of(ddb, table, "p1", user, 16)) == 2
    assert deliver(agg_fn, records) == {"batchItemFailures": []}  # the redelivery merges
    drain(poller)
    assert_merged(ddb, table, current, user, 16, latest)


def test_a_merge_still_contended_is_deferred_to_the_retry_queue_and_the_worker_merges(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller, load_function: Any, queues: Any, dynamodb_endpoint: str
) -> None:
    """Offered more than a grown post's first lanes can be read for, an examination stays
    contended; the aggregator then queues it (merge-likes) and acknowledges the batch, instead of
    failing it until the event source drops it with likes in it uncounted. The retry worker merges."""
    from counters.core.commands import Command
    from counters.streams import like_aggregator

    agg = load_function(FN, table, queues.urls, build=lambda s: like_aggregator(table, retry=FAST))
    _, current, user, latest = duplicate(ddb, table, 16, False, ("like", "like"), False)
    captured: list[dict[str, Any]] = []
    StreamPoller(table, dynamodb_endpoint, {FN: lambda event: (captured.append(event), ("ok", None))[1]}).poll_once()
    records = [r for event in captured for r in event["Records"]]
    store = agg.function.service.merges.store
    original = store.merge
    store.merge = lambda *args, **kwargs: Outcome.REJECTED  # every round refused
    try:
        assert deliver(agg, records) == {"batchItemFailures": []}  # acknowledged: the examination is queued
    finally:
        store.merge = original
    assert tally(ddb, table, "p1") == 2 and len(items_of(ddb, table, "p1", user, 16)) == 2  # counted, not merged yet
    messages = queues.sqs.receive_message(QueueUrl=queues.urls["RetryQueue"], MaxNumberOfMessages=10)["Messages"]
    commands = {Command.from_message(m["Body"]).op: m for m in messages}
    assert sorted(commands) == ["merge-likes", "settle-likes"]  # and the grown post's sweep, once
    message = commands["merge-likes"]
    command = Command.from_message(message["Body"])
    assert (command.op, command.payload) == ("merge-likes", {"postId": "p1", "userIds": [user]})
    assert Command.from_message(commands["settle-likes"]["Body"]).payload == {"postId": "p1", "spread": 16}
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    assert worker.function.service.replay(message["Body"]) == "applied"
    assert worker.function.service.replay(message["Body"]) in ("redelivered", "duplicate")  # again: one item, nothing to do
    drain(poller)
    assert_merged(ddb, table, current, user, 16, latest)
