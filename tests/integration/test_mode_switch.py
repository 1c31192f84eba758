"""Switching a post between ``standard`` and ``hot`` while likes flow (issue "Hot posts", step 3).

A user's like state item is the same item in both modes (its key depends on the post's fixed
``spread``), and each flip is counted once by the write that made it: a standard flip in its
transaction (``delta`` 0), a hot flip by the stream aggregator. The fence (the standard
transaction's condition on META's mode) routes a process whose cached mode is stale. Against
DynamoDB Local and its stream, with the real LikeAggregatorFunction handler.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.services.likes import Likes
from devstack.streams import StreamPoller
from tests.conftest import api_event, invoke, like_item
from tests.integration.test_hot_likes import FN, deliver, liked_items, tally

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
FOREVER = 10**12  # a process that never re-reads the mode on its own


@pytest.fixture
def agg_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    from counters.streams import like_aggregator

    return load_function(FN, table, build=lambda s: like_aggregator(table, retry=FAST))


@pytest.fixture
def poller(agg_fn: Any, table: str, dynamodb_endpoint: str) -> StreamPoller:
    return StreamPoller(table, dynamodb_endpoint, {FN: lambda event: ("ok", deliver(agg_fn, event["Records"]))})


def meta(ddb: Any, table: str, post: str = "p1") -> dict[str, Any]:
    return ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]


def test_switch_is_one_conditional_write_and_a_resend_is_a_no_op(table: str, layer_client: Any, ddb: Any) -> None:
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    post, switched = likes.posts.switch_mode("p1", "hot")
    assert (post["mode"], switched, meta(ddb, table)["modeEpoch"]["N"]) == ("hot", True, "1")
    post, switched = likes.posts.switch_mode("p1", "hot")  # a re-send: nothing moves
    assert (post["mode"], switched, meta(ddb, table)["modeEpoch"]["N"]) == ("hot", False, "1")
    assert likes.posts.switch_mode("p1", "standard")[1] is True and meta(ddb, table)["modeEpoch"]["N"] == "2"


def test_a_process_with_a_stale_standard_mode_is_fenced_and_likes_hot(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    """Process B read ``standard``; A switches the post to hot; B's like must not transact on META
    (the hot post's hot spot): the fence refuses it, B re-reads the mode and writes the like alone."""
    a, b = Likes(table, retry=FAST), Likes(table, retry=FAST, mode_ttl_ms=FOREVER)
    a.posts.create_post(author_id="a", body="b", post_id="p1")
    assert b.toggling.like("p1", "u0").result.outcome is Outcome.APPLIED  # B now remembers "standard"
    a.posts.switch_mode("p1", "hot")
    revision = meta(ddb, table)["tallyRev"]["N"]
    change = b.toggling.like("p1", "u1")
    assert change.changed and change.result.outcome is Outcome.APPLIED
    assert like_item(ddb, table, "p1", "u1")["delta"]["N"] == "1"  # written hot: the aggregator counts it
    assert meta(ddb, table)["tallyRev"]["N"] == revision and tally(ddb, table, "p1") == 1  # META untouched by the like
    poller.poll_once()
    assert tally(ddb, table, "p1") == 2 == len(liked_items(ddb, table, "p1"))


def test_an_unlike_in_standard_of_a_hot_like_not_yet_counted_waits_for_the_aggregator(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    likes.toggling.like("p1", "u1")  # counted from the stream: not yet
    likes.posts.switch_mode("p1", "standard")
    with pytest.raises(ContentionError) as raised:  # tally 0, but the post was hot: the API's 202
        likes.toggling.unlike("p1", "u1")
    assert raised.value.command is not None and tally(ddb, table, "p1") == 0
    poller.poll_once()
    assert tally(ddb, table, "p1") == 1
    assert likes.toggling.unlike("p1", "u1").changed is True
    assert tally(ddb, table, "p1") == 0 == len(liked_items(ddb, table, "p1"))
    assert like_item(ddb, table, "p1", "u1")["delta"]["N"] == "0"  # counted in the transaction, not again from the stream
    poller.poll_once()
    assert tally(ddb, table, "p1") == 0


def test_switching_back_and_forth_mid_storm_counts_every_like_once(table: str, layer_client: Any, ddb: Any, poller: StreamPoller) -> None:
    """Six processes (mode caches from 0 to 'forever') like, unlike and re-like while a seventh
    switches the post five times and the aggregator drains the stream throughout; a 503 is re-sent
    as a client would. Afterwards the tally is the liked items, and every flip was counted once."""
    Likes(table, retry=FAST).posts.create_post(author_id="a", body="b", post_id="p1")
    counts = {"resent": 0, "switches": 0, "hot": 0, "standard": 0, "fenced": 0}
    lock = threading.Lock()

    def counting(likes: Likes) -> Likes:  # which path each write took, and how often the fence re-routed one
        write = likes.toggling._write  # the like/unlike part (counters.services.likes.toggling)

        def counted(post_id: str, user_id: str, liked: bool, stamp: Any, info: Any) -> Any:
            result = write(post_id, user_id, liked, stamp, info)
            with lock:
                counts[info.mode] += 1
                counts["fenced"] += result.reason == "guard"
            return result

        likes.toggling._write = counted  # type: ignore[method-assign]
        return likes

    processes = [counting(Likes(table, retry=FAST, mode_ttl_ms=ttl)) for ttl in (0, 5, 20, 100, 1000, FOREVER)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def drain() -> None:
        while not stop.is_set():
            poller.poll_once()
            stop.wait(0.05)

    def client(n: int) -> None:
        rng, likes = random.Random(n), processes[n]
        try:
            for i in range(60):
                user = f"u{rng.randrange(25)}"
                for _ in range(200):
                    try:
                        (likes.toggling.like if rng.random() < 0.6 else likes.toggling.unlike)("p1", user)
                        break
                    except ContentionError:
                        with lock:
                            counts["resent"] += 1
                        stop.wait(0.02)
                else:
                    raise AssertionError(f"{user}: never answered")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def switcher() -> None:
        admin = Likes(table, retry=FAST)
        for k, mode in enumerate(("hot", "standard", "hot", "standard", "hot"), start=1):
            while counts["hot"] + counts["standard"] < 55 * k and not errors:  # mid-storm by progress, not by a clock
                stop.wait(0.005)
            if admin.posts.switch_mode("p1", mode)[1]:
                counts["switches"] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(processes))] + [threading.Thread(target=switcher)]
    aggregator = threading.Thread(target=drain)
    aggregator.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    aggregator.join()
    assert not errors, errors
    while poller.poll_once():
        pass
    stored = meta(ddb, table)
    assert counts["switches"] == 5 and stored["mode"]["S"] == "hot" and stored["modeEpoch"]["N"] == "5"
    assert counts["hot"] >= 30 and counts["standard"] >= 30 and counts["fenced"] >= 1, counts  # both paths, and the fence, ran
    assert tally(ddb, table, "p1") == len(liked_items(ddb, table, "p1"))
    audit = Likes(table).audits.audit("p1")  # was hot: the quick look concludes no drift, the numbers still agree once drained
    assert (audit.stored, audit.drift, audit.reason) == (audit.counted, None, "aggregated")
    print(f"\n{counts}")


def test_the_mode_route_is_admin_only_and_idempotent(load_function: Any, table: str, layer_client: Any) -> None:
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    status, body = invoke(app, api_event("PUT", "/posts/p1/mode", {"mode": "hot"}))
    assert (status, body["mode"], body["switched"], body["modeEpoch"]) == (200, "hot", True, 1)
    status, body = invoke(app, api_event("PUT", "/posts/p1/mode", {"mode": "hot"}))
    assert (status, body["switched"], body["modeEpoch"]) == (200, False, 1)
    assert invoke(app, api_event("PUT", "/posts/p1/mode", {"mode": "warm"}))[0] == 400
    assert invoke(app, api_event("PUT", "/posts/nope/mode", {"mode": "hot"}))[0] == 404


def test_a_standard_post_under_pressure_promotes_itself_and_stays_exact(
    table: str, layer_client: Any, ddb: Any, poller: StreamPoller
) -> None:
    """Eight clients like one standard post under the limit model (its META's partition: 50 WCU/s,
    transactions conflicting); retries pass ``hot_after_retries`` and the post goes hot by itself,
    mid-storm; every like is counted once (a 503 is re-sent, as a client would)."""
    from testkit.limits import LimitModel

    Likes(table, retry=FAST).posts.create_post(author_id="a", body="b", post_id="p1")
    processes = [Likes(table, retry=RetryPolicy(max_attempts=4, base_delay=0.005, max_delay=0.05), hot_after_retries=8) for _ in range(8)]
    limits = LimitModel(layer_client, scale=20, transaction_ms=5)
    promoted, errors = [], []

    def client(n: int) -> None:
        try:
            for i in range(25):
                for _ in range(100):
                    try:
                        change = processes[n].toggling.like("p1", f"c{n}-u{i}")
                        promoted.append(change.promoted)
                        break
                    except ContentionError:
                        threading.Event().wait(0.02)
                else:
                    raise AssertionError("never answered")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limits.detach()
    assert not errors, errors
    assert sum(promoted) == 1 and meta(ddb, table)["mode"]["S"] == "hot"  # one switch, by the first under pressure
    while poller.poll_once():
        pass
    assert tally(ddb, table, "p1") == len(liked_items(ddb, table, "p1")) == 200
    assert sum(limits.conflicts.values()) + sum(limits.throttles.values()) >= 8


@pytest.mark.parametrize(
    ("method", "user", "times"),
    [("PUT", "u1", 3), ("DELETE", "u2", 2)],  # like, like, like; unlike, unlike of a like never made
)
def test_a_users_own_resends_are_no_pressure_and_never_promote(
    method: str, user: str, times: int, load_function: Any, table: str, layer_client: Any, ddb: Any
) -> None:
    """A re-sent like is refused as a flip and then written as a stamp-only write: two writes,
    no conflict, no throttle. With ``hot_after_retries`` 2 the post stays standard."""
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST, hot_after_retries=2))
    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    answers = [invoke(app, api_event(method, f"/posts/p1/likes/{user}")) for _ in range(times)]
    assert [status for status, _ in answers] == [200] * times
    assert [body["changed"] for _, body in answers] == [method == "PUT"] + [False] * (times - 1)
    stored = meta(ddb, table)
    assert (stored["mode"]["S"], stored["modeEpoch"]["N"], stored["likeTally"]["N"]) == ("standard", "0", "1" if method == "PUT" else "0")


def test_conflicts_and_throttles_on_a_standard_like_still_promote(load_function: Any, table: str, layer_client: Any, ddb: Any) -> None:
    """The pressure that does count: a like's transaction refused by a conflict, then a throttle."""
    from testkit.faults import FaultInjector

    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST, hot_after_retries=2))
    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    faults = FaultInjector(layer_client, seed=1)
    try:
        faults.add("conflict", operations={"TransactWriteItems"}, limit=1).add("throttle", operations={"TransactWriteItems"}, limit=1)
        status, body = invoke(app, api_event("PUT", "/posts/p1/likes/u1"))
    finally:
        faults.detach()
    assert (status, body["changed"], faults.injected["conflict"], faults.injected["throttle"]) == (200, True, 1, 1)
    stored = meta(ddb, table)
    assert (stored["mode"]["S"], stored["modeEpoch"]["N"], stored["likeTally"]["N"]) == ("hot", "1", "1")
