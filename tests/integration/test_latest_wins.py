"""The latest request wins (issue "Hot posts", step 4), against DynamoDB Local.

A like or unlike carries the time the API received it; the like item keeps the stamp (time,
request id) of the latest request and stays, after an unlike, as a tombstone; a replay older
than the stored stamp that would change the state is rejected as ``stale``.
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.errors import NotSwitchable
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.primitives.toggle import HORIZON_MS, now_ms
from counters.services.likes import Likes
from tests.conftest import Queues, api_event, invoke, like_item, likes_count
from tests.integration.test_retries import drain

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def at(event: dict[str, Any], ms: int) -> dict[str, Any]:
    """The event as API Gateway would stamp a request received at ``ms``."""
    event["requestContext"]["requestTimeEpoch"] = ms
    return event


def tally(ddb: Any, table: str, post: str = "p1") -> int:
    item = ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
    return int(item["likeTally"]["N"])


def state(ddb: Any, table: str, user: str, post: str = "p1") -> dict[str, Any]:
    item = like_item(ddb, table, post, user)
    assert item is not None, (post, user)
    return item


def operation(operations: Any, operation_id: str) -> dict[str, Any]:
    return invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]


# ---------------------------------------------------------------------- (a) the scenario
def test_a_like_deferred_then_unliked_is_not_reapplied_by_its_replay(
    deferring_likes: Any, faults: Any, queues: Queues, ddb: Any, table: str
) -> None:
    """The like meets contention (202), the same user unlikes (200), then the worker replays
    the like: REJECTED stale, the like is not re-applied, the tally counts the other user only."""
    likes, worker, operations = deferring_likes
    assert invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    t0 = now_ms()
    assert invoke(likes, at(api_event("PUT", "/posts/p1/likes/u0"), t0))[1]["changed"] is True  # someone else's like
    faults.add("conflict", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes, at(api_event("PUT", "/posts/p1/likes/u1"), t0 + 1))
    assert (status, body["status"]) == (202, "PENDING")
    like_operation = body["operationId"]

    # the user changes their mind before the worker runs: the unlike is newer and answers at once
    assert invoke(likes, at(api_event("DELETE", "/posts/p1/likes/u1"), t0 + 2)) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": False, "changed": False},  # nothing was liked yet
    )
    drain(queues, worker, deliveries=2)

    record = operation(operations, like_operation)
    assert record["status"] == "REJECTED", record
    assert (record["result"]["error"], record["result"]["liked"], record["result"]["changed"]) == ("stale", False, False)
    assert tally(ddb, table) == 1 and likes_count(ddb, table, "p1") == 1  # u0 only: the like was not re-applied
    tombstone = state(ddb, table, "u1")
    assert tombstone["liked"] == {"BOOL": False} and int(tombstone["changedAt"]["N"]) == t0 + 2
    assert "expiresAt" in tombstone
    assert [liker["userId"] for liker in invoke(likes, api_event("GET", "/posts/p1/likes"))[1]["likers"]] == ["u0"]
    assert queues.depth("RetryDLQ") == 0


# ---------------------------------------------------------------------- (b) an unlike replayed late
def test_an_unlike_replayed_after_a_later_like_is_stale(deferring_likes: Any, faults: Any, queues: Queues, ddb: Any, table: str) -> None:
    """like (t0), unlike deferred (t1), like again (t2: already liked, but its stamp is kept),
    then the unlike replays: stale, the like stands."""
    likes, worker, operations = deferring_likes
    invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    t0 = now_ms()
    assert invoke(likes, at(api_event("PUT", "/posts/p1/likes/u1"), t0))[1]["changed"] is True
    faults.add("throttle", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes, at(api_event("DELETE", "/posts/p1/likes/u1"), t0 + 1))
    assert (status, body["status"]) == (202, "PENDING")
    unlike_operation = body["operationId"]
    assert invoke(likes, at(api_event("PUT", "/posts/p1/likes/u1"), t0 + 2))[1] == {
        "postId": "p1",
        "userId": "u1",
        "liked": True,
        "changed": False,
    }
    assert int(state(ddb, table, "u1")["changedAt"]["N"]) == t0 + 2  # the newer request is on record

    drain(queues, worker)
    record = operation(operations, unlike_operation)
    assert (record["status"], record["result"]["error"], record["result"]["liked"]) == ("REJECTED", "stale", True)
    assert tally(ddb, table) == 1 and likes_count(ddb, table, "p1") == 1
    assert state(ddb, table, "u1")["liked"] == {"BOOL": True}


def test_a_deferred_unlike_replayed_with_no_later_request_applies(
    deferring_likes: Any, faults: Any, queues: Queues, ddb: Any, table: str
) -> None:
    likes, worker, operations = deferring_likes
    invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    assert invoke(likes, api_event("PUT", "/posts/p1/likes/u1"))[1]["changed"] is True
    faults.add("conflict", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes, api_event("DELETE", "/posts/p1/likes/u1"))
    assert status == 202
    drain(queues, worker, deliveries=2)
    record = operation(operations, body["operationId"])
    assert (record["status"], record["result"]["changed"], record["result"]["liked"]) == ("APPLIED", True, False)
    assert tally(ddb, table) == 0 and likes_count(ddb, table, "p1") == 0
    assert state(ddb, table, "u1")["requestId"] == {"S": body["operationId"]}  # provenance: this request made the state


# ---------------------------------------------------------------------- (c) the same millisecond
def test_requests_in_the_same_millisecond_are_ordered_by_request_id(ddb: Any, table: str, layer_client: Any) -> None:
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    t = now_ms()
    assert likes.toggling.like("p1", "u1", request_id="b" * 32, at=t).changed is True
    older = likes.toggling.unlike("p1", "u1", request_id="a" * 32, at=t)  # same ms, smaller id: it came "first"
    assert (older.liked, older.changed, older.result.outcome, older.result.reason) == (True, False, Outcome.REJECTED, "stale")
    assert tally(ddb, table) == 1
    newer = likes.toggling.unlike("p1", "u1", request_id="c" * 32, at=t)  # same ms, larger id: it came after
    assert (newer.liked, newer.changed) == (False, True)
    assert likes.toggling.like("p1", "u1", request_id="b" * 32, at=t).result.reason == "stale"  # the first like, re-sent
    assert tally(ddb, table) == 0 and likes_count(ddb, table, "p1") == 0
    # the same request again is its own: a re-sent unlike "c" finds its own flip
    again = likes.toggling.unlike("p1", "u1", request_id="c" * 32, at=t)
    assert (again.changed, again.result.outcome, again.result.reason) == (True, Outcome.DUPLICATE, "own_request")


def test_requests_that_share_the_apis_time_follow_the_order_they_were_sent(likes_app: Any, ddb: Any, table: str) -> None:
    """`sam local start-api` 1.170.0 gives every request the time it started (aws/aws-sam-cli#9279),
    and API Gateway's time has ms precision: requests sent one after another with the same
    ``requestTimeEpoch`` are still ordered as sent (the request id begins with the function's
    receive time), not by a random id. Seven toggles: a random order passes 1 time in 5,040."""
    invoke(likes_app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    frozen = now_ms()
    for i, method in enumerate(["PUT", "DELETE", "PUT", "DELETE", "PUT", "DELETE", "PUT"]):
        status, body = invoke(likes_app, at(api_event(method, "/posts/p1/likes/u1"), frozen))
        assert (status, body["liked"], body["changed"]) == (200, method == "PUT", True), (i, body)
    assert tally(ddb, table) == 1 and state(ddb, table, "u1")["liked"] == {"BOOL": True}
    assert int(state(ddb, table, "u1")["changedAt"]["N"]) == frozen


# ---------------------------------------------------------------------- (d) tombstones do not count
def test_a_newer_like_after_an_unlike_counts_once_and_tombstones_are_not_listed_or_audited(
    likes_app: Any, ddb: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke(likes_app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    users = ["u1", "u2", "u3", "u4", "u5"]
    for user in users:
        assert invoke(likes_app, api_event("PUT", f"/posts/p1/likes/{user}"))[1]["changed"] is True
    for user in ("u1", "u2", "u3"):
        assert invoke(likes_app, api_event("DELETE", f"/posts/p1/likes/{user}"))[1]["changed"] is True
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[1] == {"postId": "p1", "userId": "u1", "liked": True, "changed": True}
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[1]["changed"] is False
    assert tally(ddb, table) == 3 and likes_count(ddb, table, "p1") == 3
    assert "expiresAt" not in state(ddb, table, "u1")  # a like again: no longer expires
    assert "expiresAt" in state(ddb, table, "u2")
    quick = {"postId": "p1", "stored": 3, "counted": 3, "drift": 0, "reason": None}
    assert invoke(likes_app, api_event("GET", "/posts/p1/audit"))[1] == quick

    def pages(limit: int) -> list[list[str]]:
        out, cursor = [], None
        while True:
            path = f"/posts/p1/likes?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
            status, body = invoke(likes_app, api_event("GET", path))
            assert status == 200
            out.append([liker["userId"] for liker in body["likers"]])
            cursor = body["cursor"]
            if not cursor:
                return out

    # spread keys in order: u5 (S0), u1 (S2), tombstone u3 (S4), u4 (S5), tombstone u2 (S7): the page reads on past them
    assert pages(2) == [["u5", "u1"], ["u4"]]
    # with one query per page, a page comes back short (even empty), and the cursor still walks every liker once
    import counters.services.likes.posts as likes_module  # the likers page lives there

    monkeypatch.setattr(likes_module, "LIKERS_QUERIES", 1)
    walked = pages(2)
    assert [u for page in walked for u in page] == ["u5", "u1", "u4"] and len(walked) > 2


@pytest.fixture
def likes_app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))


# ---------------------------------------------------------------------- the horizon, old items
def test_a_request_older_than_the_horizon_is_stale_and_writes_nothing(ddb: Any, table: str, layer_client: Any) -> None:
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    change = likes.toggling.like("p1", "u1", at=now_ms() - HORIZON_MS - 1000)  # tombstones that could order it may be gone
    assert (change.changed, change.result.reason) == (False, "stale")
    assert tally(ddb, table) == 0 and like_item(ddb, table, "p1", "u1") is None


def test_a_like_stored_before_tombstones_is_a_like(ddb: Any, table: str, layer_client: Any) -> None:
    """Items written before this change have no ``liked`` and no stamp: they count, and unlike them.
    Their post was stored before ``spread`` too: its likes live in seed 01's item collection."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}},
        UpdateExpression="REMOVE spread, aggSeq, aggAt, tallyRev, modeEpoch",
    )
    ddb.put_item(
        TableName=table, Item={"PK": {"S": "POST#p1"}, "SK": {"S": "LIKE#USER#old"}, "userId": {"S": "old"}, "likedAt": {"N": "1"}}
    )
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    assert likes.audits.audit("p1").counted == 1
    assert likes.posts.likers("p1", limit=10).user_ids == [{"userId": "old", "likedAt": 1}]
    assert likes.toggling.like("p1", "old").changed is False  # already liked
    assert likes.toggling.unlike("p1", "old").changed is True
    assert tally(ddb, table) == 0 and likes.audits.audit("p1").drift == 0
    assert "Item" in ddb.get_item(TableName=table, Key={"PK": {"S": "POST#p1"}, "SK": {"S": "LIKE#USER#old"}}, ConsistentRead=True)
    with pytest.raises(NotSwitchable):  # its likes are where only the standard mode counts them
        likes.posts.switch_mode("p1", "hot")


def test_the_toggle_writes_no_tombstone_or_like_under_a_missing_parent(ddb: Any, table: str, layer_client: Any) -> None:
    """The primitive on its own (the service reads the post first): switching a key on or off under
    a parent that does not exist writes nothing and answers ``parent_missing``."""
    from counters.primitives.toggle import Reason, Stamp, Tally, Toggle
    from counters.store.post_items import Post, like_key, post_key
    from counters.store.posts import like_toggles
    from counters.store.toggles import Owner, StateWrite, ToggleWrite

    toggle, parent = Toggle(like_toggles(table), retry=FAST), Tally[Post](post_key("nope"))
    for on in (False, True):
        result = toggle.set(like_key("nope", "u1"), on, Stamp(now_ms(), f"r{on}"), tally=parent)
        assert (result.outcome, result.reason) == (Outcome.REJECTED, Reason.PARENT_MISSING)
    assert like_item(ddb, table, "nope", "u1") is None
    # the tombstone's own check (the parent gone between a refused flip and the tombstone): nothing written
    store, stamp = like_toggles(table), Stamp(now_ms(), "r-tombstone")
    tombstone = ToggleWrite(StateWrite.TOMBSTONE, False, stamp, Owner.ANY, {}, {}, 0)
    written = store.write(like_key("nope", "u1"), tombstone, tally=parent, policy=FAST, capacity=Capacity())
    assert (written.report.outcome, written.parent_refused, written.parent) == (Outcome.REJECTED, True, None)
    assert like_item(ddb, table, "nope", "u1") is None
