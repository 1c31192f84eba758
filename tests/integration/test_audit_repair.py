"""Audit across many posts, repair surgically (issue "Hot posts", step 5).

``Likes.audit_posts`` compares a count with the tally only at settled points (a hot post's: once
the stream's aggregator has applied the audit's probes), and repairs a drift by one write
conditioned on ``tallyRev``/``modeEpoch`` being what they were at the second point: a like
counted since then refuses it. Against DynamoDB Local and its stream, the real aggregator handler.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from devstack.streams import StreamPoller
from tests.conftest import api_event, invoke, likes_count
from tests.integration.test_hot_likes import FN, deliver, tally

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


@pytest.fixture
def agg_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    from counters.services.likes import like_aggregator

    return load_function(FN, table, build=lambda s: like_aggregator(table, retry=FAST))


@pytest.fixture
def aggregator(agg_fn: Any, table: str, dynamodb_endpoint: str) -> Iterator[StreamPoller]:
    """The aggregator running from the stream in the background, as deployed."""
    poller = StreamPoller(table, dynamodb_endpoint, {FN: lambda event: ("ok", deliver(agg_fn, event["Records"]))})
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            poller.poll_once()
            stop.wait(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield poller
    stop.set()
    thread.join()


def corrupt(ddb: Any, table: str, post: str, value: int) -> None:
    """Set the tally behind the layer's back (tallyRev untouched: a real drift, not a like)."""
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :n",
        ExpressionAttributeValues={":n": {"N": str(value)}},
    )


def wait_for_tally(ddb: Any, table: str, post: str, value: int) -> None:
    """Until the tally is ``value`` (a hot post's: once the aggregator has applied its likes)."""
    while tally(ddb, table, post) != value:
        threading.Event().wait(0.02)


def posts(likes: Likes, n_standard: int = 2, n_hot: int = 2, users: int = 6) -> list[str]:
    ids = [f"s{i}" for i in range(n_standard)] + [f"h{i}" for i in range(n_hot)]
    for post in ids:
        likes.create_post(author_id="a", body="b", post_id=post, mode="hot" if post.startswith("h") else "standard")
        for u in range(users):
            likes.like(post, f"u{u}")
        likes.unlike(post, "u0")
    return ids


def test_many_posts_are_audited_at_settled_points_and_drift_is_repaired(table: str, layer_client: Any, ddb: Any, aggregator: Any) -> None:
    likes = Likes(table, retry=FAST)
    ids = posts(likes)
    for post in ids:
        wait_for_tally(ddb, table, post, 5)
    likes.switch_mode("s1", "hot")
    likes.switch_mode("s1", "standard")  # was hot: audited through probes too
    clean = likes.audit_posts(ids + ["missing"])
    assert [(r.post_id, r.settled, r.drift) for r in clean] == [(p, True, 0) for p in ids] + [("missing", False, None)]
    assert clean[-1].reason == "not_found"
    for post in ids:
        corrupt(ddb, table, post, 42)
    found = likes.audit_posts(ids)
    assert all(r.settled and r.drift == 42 - 5 and not r.repaired for r in found)  # reported, not touched
    assert all(tally(ddb, table, p) == 42 for p in ids)
    repaired = likes.audit_posts(ids, repair=True)
    assert all(r.repaired for r in repaired), [r.public() for r in repaired]
    assert all(tally(ddb, table, p) == likes_count(ddb, table, p) == 5 for p in ids)
    likes.like("h0", "late")  # the hot tally keeps counting from the repaired value
    assert [r.drift for r in likes.audit_posts(["h0"])] == [0] and likes_count(ddb, table, "h0") == 6


def test_a_hot_post_whose_aggregator_is_behind_is_not_settled(table: str, layer_client: Any) -> None:
    likes = Likes(table, retry=FAST)
    likes.create_post(author_id="a", body="b", post_id="h0", mode="hot")
    likes.like("h0", "u1")  # no aggregator runs: the tally is 0, the likes 1 -- lag, not drift
    [result] = likes.audit_posts(["h0"], repair=True, wait_s=0.3)
    assert (result.settled, result.reason, result.drift, result.repaired) == (False, "aggregator_behind", None, False)


class LikesDuring(Likes):
    """Runs ``during()`` at a chosen moment of an audit: in the count, or just before the repair."""

    def __init__(self, *args: Any, moment: str, during: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.moment, self.during, self.done = moment, during, False
        count = self.refcount.count

        def counting(*a: Any, **k: Any) -> int:
            if self.moment == "count" and not self.done:
                self.done = True
                self.during()
            return count(*a, **k)

        self.refcount.count = counting  # type: ignore[method-assign]

    def _repair(self, *args: Any, **kwargs: Any) -> bool:
        if self.moment == "repair" and not self.done:
            self.done = True
            self.during()
        return super()._repair(*args, **kwargs)


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_and_an_unlike_during_the_count_leave_the_tally_as_it_was_but_settle_nothing(
    mode: str, table: str, layer_client: Any, ddb: Any, aggregator: Any
) -> None:
    """The tally comes back to its value (ABA); tallyRev does not: the count is not trusted."""
    other = Likes(table, retry=FAST)
    other.create_post(author_id="a", body="b", post_id="p1", mode=mode)
    for u in ("u1", "u2", "u3"):
        other.like("p1", u)
    wait_for_tally(ddb, table, "p1", 3)
    corrupt(ddb, table, "p1", 9)  # a real drift, to be repaired only on a trusted count

    def like_and_unlike() -> None:
        other.like("p1", "zz-new")  # sorts last in its spread key: the count may or may not see it
        other.unlike("p1", "u1")

    likes = LikesDuring(table, retry=FAST, moment="count", during=like_and_unlike)
    [result] = likes.audit_posts(["p1"], repair=True)
    assert (result.settled, result.reason, result.repaired) == (False, "moving", False)
    assert tally(ddb, table, "p1") == 9 if mode == "standard" else True  # untouched (hot: the aggregator adds its net 0)
    [again] = Likes(table, retry=FAST).audit_posts(["p1"], repair=True)
    assert again.repaired and tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 3


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_counted_after_the_count_refuses_the_repair(mode: str, table: str, layer_client: Any, ddb: Any, aggregator: Any) -> None:
    """Never overwrite concurrent likes: the repair's condition sees the like that came in."""
    other = Likes(table, retry=FAST)
    other.create_post(author_id="a", body="b", post_id="p1", mode=mode)
    other.like("p1", "u1")
    wait_for_tally(ddb, table, "p1", 1)
    corrupt(ddb, table, "p1", 7)

    def like_counted() -> None:
        other.like("p1", "u2")
        wait_for_tally(ddb, table, "p1", 8)  # hot: counted once the aggregator applies it

    likes = LikesDuring(table, retry=FAST, moment="repair", during=like_counted)
    [result] = likes.audit_posts(["p1"], repair=True)
    assert (result.settled, result.drift, result.repaired, result.reason) == (True, 6, False, "moving")
    assert tally(ddb, table, "p1") == 8  # 7 + the new like: nothing overwritten
    [again] = Likes(table, retry=FAST).audit_posts(["p1"], repair=True)
    assert again.repaired and tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 2


def test_the_audits_route(load_function: Any, table: str, layer_client: Any, ddb: Any) -> None:
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    invoke(app, api_event("PUT", "/posts/p1/likes/u1"))
    corrupt(ddb, table, "p1", 3)
    status, body = invoke(app, api_event("POST", "/audits", {"postIds": ["p1", "nope"], "repair": True}))
    assert status == 200
    assert body["audits"] == [
        {"postId": "p1", "stored": 3, "counted": 1, "drift": 2, "settled": True, "repaired": True, "reason": None},
        {"postId": "nope", "stored": None, "counted": None, "drift": None, "settled": False, "repaired": False, "reason": "not_found"},
    ]
    assert tally(ddb, table, "p1") == 1
    assert invoke(app, api_event("POST", "/audits", {"postIds": []}))[0] == 400
    assert invoke(app, api_event("POST", "/audits", {"postIds": ["a b"]}))[0] == 400
