"""Likes against DynamoDB Local: exact tallies under duplicates, concurrency and injected faults."""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from counters.services.likes.model import post_id_for
from tests.conftest import api_event, invoke, item_count, likes_count

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)


@pytest.fixture
def likes_app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))


def create(app: Any, post_id: str = "p1") -> None:
    status, body = invoke(app, api_event("POST", "/posts", {"postId": post_id, "authorId": "alice", "body": "hello"}))
    assert status == 201, body


def tally(ddb: Any, table: str, post_id: str = "p1") -> int:
    item = ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post_id}"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
    return int(item["likeTally"]["N"])


def likes_stored(ddb: Any, table: str, post_id: str = "p1") -> int:
    """The post's likes (tombstones are LIKE# items too, but not likes)."""
    return likes_count(ddb, table, post_id)


# ---------------------------------------------------------------------------- behaviour
def test_like_twice_counts_once_and_unlike_mirrors(likes_app: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1")) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": True, "changed": True},
    )
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1")) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": True, "changed": False},
    )
    assert tally(ddb, table) == 1
    assert invoke(likes_app, api_event("DELETE", "/posts/p1/likes/u1")) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": False, "changed": True},
    )
    assert invoke(likes_app, api_event("DELETE", "/posts/p1/likes/u1")) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": False, "changed": False},
    )
    assert tally(ddb, table) == 0
    assert likes_stored(ddb, table) == 0


def test_post_lifecycle_and_errors(likes_app: Any, ddb: Any, table: str) -> None:
    status, body = invoke(likes_app, api_event("POST", "/posts", {"authorId": "bob", "body": "generated id"}))
    assert status == 201 and body["likeTally"] == 0 and len(body["postId"]) == 32
    create(likes_app, "p1")
    status, body = invoke(likes_app, api_event("POST", "/posts", {"postId": "p1", "authorId": "eve", "body": "again"}))
    assert (status, body["error"]) == (409, "already_exists")
    status, body = invoke(likes_app, api_event("GET", "/posts/p1"))
    assert status == 200 and body["authorId"] == "alice" and body["likeTally"] == 0
    assert invoke(likes_app, api_event("GET", "/posts/nope"))[0] == 404
    assert invoke(likes_app, api_event("PUT", "/posts/nope/likes/u1"))[0] == 404
    assert invoke(likes_app, api_event("DELETE", "/posts/nope/likes/u1"))[0] == 404
    assert invoke(likes_app, api_event("GET", "/posts/nope/audit"))[0] == 404
    # nothing but the two posts was written
    assert item_count(ddb, table) == 2


def test_likers_are_paginated_with_an_opaque_cursor(likes_app: Any) -> None:
    create(likes_app)
    users = [f"u{i:02d}" for i in range(7)]
    for user in users:
        invoke(likes_app, api_event("PUT", f"/posts/p1/likes/{user}"))
    seen, cursor, pages = [], None, 0
    while True:
        path = "/posts/p1/likes?limit=3" + (f"&cursor={cursor}" if cursor else "")
        status, body = invoke(likes_app, api_event("GET", path))
        assert status == 200
        seen += [liker["userId"] for liker in body["likers"]]
        pages += 1
        cursor = body["cursor"]
        if not cursor:
            break
    assert sorted(seen) == users and len(seen) == len(set(seen)) and pages >= 3  # spread keys one after the other
    status, body = invoke(likes_app, api_event("GET", "/posts/p1/likes?cursor=bm90LWEtY3Vyc29y"))
    assert (status, body["error"]) == (400, "invalid_cursor")


def test_audit_reports_drift(likes_app: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    for user in ("a", "b", "c"):
        invoke(likes_app, api_event("PUT", f"/posts/p1/likes/{user}"))
    quick = {"postId": "p1", "stored": 3, "counted": 3, "drift": 0, "reason": None}
    assert invoke(likes_app, api_event("GET", "/posts/p1/audit")) == (200, quick)
    # Corrupt the tally behind the layer's back: the audit must show it, not hide it.
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :n",
        ExpressionAttributeValues={":n": {"N": "5"}},
    )
    assert invoke(likes_app, api_event("GET", "/posts/p1/audit"))[1]["drift"] == 2


def test_unlike_never_drives_the_tally_negative(likes_app: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :z",
        ExpressionAttributeValues={":z": {"N": "0"}},
    )
    status, body = invoke(likes_app, api_event("DELETE", "/posts/p1/likes/u1"))
    assert (status, body["error"]) == (409, "integrity_error")
    assert tally(ddb, table) == 0 and likes_stored(ddb, table) == 1  # nothing changed


@pytest.mark.parametrize("named_by", ["key", "postId"])
def test_a_create_resent_after_the_mode_changed_is_the_same_post(named_by: str, likes_app: Any, ddb: Any, table: str) -> None:
    """The re-send is compared with what the request created (author, body, the mode it asked
    for), not with what the post became: an admin switching it to hot changes nothing."""
    request = {"authorId": "alice", "body": "hello"} | ({"postId": "p1"} if named_by == "postId" else {})
    headers = {"Idempotency-Key": "k1"} if named_by == "key" else None
    status, created = invoke(likes_app, api_event("POST", "/posts", request, headers))
    assert (status, created["mode"]) == (201, "standard")
    post = created["postId"]
    assert invoke(likes_app, api_event("PUT", f"/posts/{post}/mode", {"mode": "hot"}))[1]["switched"] is True
    status, again = invoke(likes_app, api_event("POST", "/posts", request, headers))
    assert (status, again["postId"], again["mode"], again["modeEpoch"]) == (200, post, "hot", 1)
    # A post stored before createdMode: its creation mode is told by modeEpoch's parity.
    ddb.update_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, UpdateExpression="REMOVE createdMode")
    assert invoke(likes_app, api_event("POST", "/posts", request, headers))[:1] == (200,)
    assert invoke(likes_app, api_event("POST", "/posts", request | {"mode": "hot"}, headers))[0] in (409, 422)
    status, body = invoke(likes_app, api_event("POST", "/posts", request | {"body": "other"}, headers))
    assert (status, body["error"]) == ((422, "idempotency_key_reused") if named_by == "key" else (409, "already_exists"))
    assert item_count(ddb, table) == 1


def test_the_id_an_idempotency_key_stands_for_cannot_be_taken_first(likes_app: Any, ddb: Any, table: str) -> None:
    """Bob sends as his own postId the id Alice's key will derive: refused (the derived form is
    not a client's), so Alice's create with the key is hers. A client's other ids are fine."""
    squatted = post_id_for("alice", "k1")
    status, body = invoke(likes_app, api_event("POST", "/posts", {"postId": squatted, "authorId": "bob", "body": "mine"}))
    assert (status, body["error"]) == (400, "invalid_request") and "Idempotency-Key" in body["message"]
    assert item_count(ddb, table) == 0
    status, body = invoke(likes_app, api_event("POST", "/posts", {"authorId": "alice", "body": "hello"}, {"Idempotency-Key": "k1"}))
    assert (status, body["postId"], body["authorId"]) == (201, squatted, "alice")
    # Alice may name her own derived id along with its key; a random (version-4) hex id is a client's to choose.
    request = {"postId": squatted, "authorId": "alice", "body": "hello"}
    assert invoke(likes_app, api_event("POST", "/posts", request, {"Idempotency-Key": "k1"}))[0] == 200
    assert invoke(likes_app, api_event("POST", "/posts", {"postId": uuid.uuid4().hex, "authorId": "bob", "body": "b"}))[0] == 201


def test_the_mode_cache_and_the_pressure_map_keep_only_the_posts_used_last(load_function: Any, table: str, faults: Any) -> None:
    """Every post a process reads (a public GET too) enters its mode cache, every contended like
    its pressure map: both are LRUs of ``cache_size`` posts, so a warm instance's memory is bounded."""
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST, hot_after_retries=100, cache_size=3))
    posts = [f"p{i}" for i in range(5)]
    for post in posts:
        create(app, post)
        assert invoke(app, api_event("GET", f"/posts/{post}"))[0] == 200
    likes = app.function.service
    assert len(likes.posts.known) == 3 and [p in likes.posts.known for p in posts] == [False, False, True, True, True]
    for post in posts:
        faults.add("conflict", operations={"TransactWriteItems"}, limit=1)  # one retried attempt: pressure on this post
        assert invoke(app, api_event("PUT", f"/posts/{post}/likes/u1"))[1]["changed"] is True
    assert faults.injected["conflict"] == 5
    assert len(likes.toggling.pressure) == 3 and [p in likes.toggling.pressure for p in posts] == [False, False, True, True, True]
    assert len(likes.posts.known) == 3
    assert invoke(app, api_event("GET", "/posts/p0"))[0] == 200  # evicted: read again, and used last now
    assert "p0" in likes.posts.known and "p2" not in likes.posts.known


# ---------------------------------------------------------------------------- concurrency
def test_concurrent_likes_and_unlikes_with_duplicates_stay_exact(ddb: Any, table: str, layer_client: Any) -> None:
    """64 threads, 40 users, every request sent twice: likeTally == number of LIKE# items. (300
    requests, was 600: 40 users on one post still collide constantly; the refusals that prove
    it, a like of a liked user and an unlike of a user not liked, are counted below.)"""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="alice", body="viral", post_id="p1")
    rng = random.Random(11)
    ops = [(rng.choice(["like", "like", "unlike"]), f"u{rng.randrange(40)}") for _ in range(300)]
    ops = [op for op in ops for _ in range(2)]  # duplicate every request
    rng.shuffle(ops)
    changed = {"like": 0, "unlike": 0}
    refused = {"like": 0, "unlike": 0}  # answered changed=False: the child's condition said no
    resent = [0]
    lock = threading.Lock()

    def run(op: tuple[str, str]) -> None:
        kind, user = op
        for _ in range(20):  # a 503 (timeouts on a loaded machine outlasting the budget) is re-sent, as a client would
            try:
                change = likes.toggling.like("p1", user) if kind == "like" else likes.toggling.unlike("p1", user)
                break
            except ContentionError:
                with lock:
                    resent[0] += 1  # the 503'd attempt may have committed: "changed" is then the first send's secret
        else:
            raise AssertionError(f"{kind} {user} never got a definite answer")
        with lock:
            (changed if change.changed else refused)[kind] += 1

    with ThreadPoolExecutor(max_workers=64) as pool:
        list(pool.map(run, ops))
    assert refused["like"] >= 100 and refused["unlike"] >= 50, refused  # the duplicates met the guards, many times
    stored = likes_stored(ddb, table)
    assert tally(ddb, table) == stored  # exact: the tally is its LIKE# items, whatever was re-sent
    if not resent[0]:
        assert stored == changed["like"] - changed["unlike"]
    assert likes.audits.audit("p1").drift == 0


# ---------------------------------------------------------------------------- faults
def test_error_after_commit_then_retry_replays_not_reapplies(likes_app: Any, faults: Any, ddb: Any, table: str) -> None:
    """The transaction commits, the caller gets a 500; the in-line retry re-sends the same
    ClientRequestToken, DynamoDB replays success: changed=True, tally 1, not 2."""
    create(likes_app)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1")) == (
        200,
        {"postId": "p1", "userId": "u1", "liked": True, "changed": True},
    )
    assert faults.injected["after_commit"] == 1
    assert faults.calls["TransactWriteItems"] == 2
    assert tally(ddb, table) == 1 and likes_stored(ddb, table) == 1


def test_error_after_commit_then_client_resends_whole_request(likes_app: Any, faults: Any, ddb: Any, table: str) -> None:
    """Every in-line attempt fails after committing (the first commits; replays change
    nothing). The client gives up (503), then re-sends the whole request with a new token:
    the attribute_not_exists guard is all that stands between it and a tally of 2."""
    create(likes_app)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))
    assert (status, body["error"]) == (503, "contention")
    assert tally(ddb, table) == 1  # it did apply, exactly once
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[0] == 200
    assert tally(ddb, table) == 1 and likes_stored(ddb, table) == 1
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    assert invoke(likes_app, api_event("DELETE", "/posts/p1/likes/u1"))[0] == 503
    assert invoke(likes_app, api_event("DELETE", "/posts/p1/likes/u1"))[1]["changed"] is False
    assert tally(ddb, table) == 0 and likes_stored(ddb, table) == 0


def test_forced_resend_of_a_committed_transaction_counts_once(likes_app: Any, faults: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    faults.add("resend", operations={"TransactWriteItems"})
    for user in ("u1", "u2", "u3"):
        assert invoke(likes_app, api_event("PUT", f"/posts/p1/likes/{user}"))[1]["changed"] is True
    assert faults.injected["resend"] == 3
    assert tally(ddb, table) == 3 and likes_stored(ddb, table) == 3


@pytest.mark.parametrize("kind", ["conflict", "throttle", "unavailable"])
def test_transient_cancellations_are_retried_then_apply_once(kind: str, likes_app: Any, faults: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    faults.add(kind, operations={"TransactWriteItems"}, limit=3)
    assert invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))[1]["changed"] is True
    assert faults.injected[kind] == 3 and faults.calls["TransactWriteItems"] == 4
    assert tally(ddb, table) == 1


@pytest.mark.parametrize("kind", ["conflict", "throttle"])
def test_contention_past_the_budget_is_a_503_and_writes_nothing(kind: str, likes_app: Any, faults: Any, ddb: Any, table: str) -> None:
    create(likes_app)
    faults.add(kind, operations={"TransactWriteItems"})
    status, body = invoke(likes_app, api_event("PUT", "/posts/p1/likes/u1"))
    assert (status, body["error"]) == (503, "contention")
    assert "Traceback" not in body["message"]
    assert faults.calls["TransactWriteItems"] == FAST.max_attempts
    assert tally(ddb, table) == 0 and likes_stored(ddb, table) == 0


def test_concurrent_likes_under_random_faults_stay_exact(ddb: Any, table: str, faults: Any) -> None:
    """32 threads, duplicates, 20% of transactions hit by a fault of every kind."""
    likes = Likes(table, retry=RetryPolicy(max_attempts=8, base_delay=0.001, max_delay=0.01))
    likes.posts.create_post(author_id="alice", body="hot", post_id="p1")
    for kind in ("after_commit", "resend", "conflict", "throttle", "unavailable"):
        faults.add(kind, operations={"TransactWriteItems"}, rate=0.04)
    rng = random.Random(5)
    ops = [(rng.choice(["like", "unlike"]), f"u{rng.randrange(25)}") for _ in range(300)]
    ops = [op for op in ops for _ in range(2)]
    rng.shuffle(ops)

    def run(op: tuple[str, str]) -> str:
        kind, user = op
        try:
            likes.toggling.like("p1", user) if kind == "like" else likes.toggling.unlike("p1", user)
            return "ok"
        except Exception as exc:  # contention is an allowed answer; the counts must still be exact
            return type(exc).__name__

    with ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(run, ops))
    assert set(answers) <= {"ok", "ContentionError"}
    assert sum(faults.injected.values()) > 20
    assert tally(ddb, table) == likes_stored(ddb, table)
    assert likes.audits.audit("p1").drift == 0
