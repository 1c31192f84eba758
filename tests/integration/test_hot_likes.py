"""Hot posts (issue "Hot posts", step 2), against DynamoDB Local and its stream.

A hot post's like/unlike writes the like's state item alone, under one of the post's spread keys;
the LikeAggregatorFunction applies the stream's deltas per post in one conditional write that
moves a per-spread-key sequence checkpoint. Batches are read from DynamoDB Local's stream with the
local stack's poller (the template's subscription and filter), captured, and fed to the handler
as Lambda would: once, twice, restarted from a record, half-processed, windows out of order.
"""

from __future__ import annotations

import base64
import json
import random
import time
from typing import Any

import pytest

from counters.core.errors import InvalidCursor, InvalidRequest
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.primitives import aggregator as aggregator_module
from counters.primitives.aggregator import Aggregator, Change, padded
from counters.primitives.toggle import now_ms
from counters.services.likes import Likes
from counters.services.likes.model import SPREAD
from counters.store import aggregates
from counters.store.expr import Cond, Path
from counters.store.post_items import hot_like_key, lane_of, post_key
from counters.streams import hot_change, like_aggregator
from devstack.runtime import LambdaContext
from devstack.streams import StreamPoller, subscriptions

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
FN = "LikeAggregatorFunction"


@pytest.fixture
def likes(table: str, layer_client: Any) -> Likes:
    return Likes(table, retry=FAST)


@pytest.fixture
def agg_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function(FN, table, build=lambda s: like_aggregator(table, retry=FAST))


def context() -> Any:
    return LambdaContext.for_function(FN, 512, 30)


def captured_batches(table: str, endpoint: str, batch_size: int | None = None) -> list[list[dict[str, Any]]]:
    """Every batch the template's subscription would deliver now (filter applied), not yet processed."""
    batches: list[list[dict[str, Any]]] = []

    def capture(event: dict[str, Any]) -> tuple[str, Any]:
        batches.append(list(event["Records"]))
        return "ok", {"batchItemFailures": []}

    subs = [s for s in subscriptions() if s.function == FN]
    if batch_size:
        subs[0].batch_size = batch_size
    StreamPoller(table, endpoint, {FN: capture}, subs).poll_once()
    return batches


def deliver(agg_fn: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    return agg_fn.lambda_handler({"Records": records}, context())


def tally(ddb: Any, table: str, post: str) -> int:
    item = ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
    return int(item["likeTally"]["N"])


def liked_items(ddb: Any, table: str, post: str) -> set[str]:
    """The users whose state item under the post's spread keys says liked (the truth)."""
    users = set()
    for lane in range(SPREAD):
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"POST#{post}#S{lane}"}},
            "ConsistentRead": True,
        }
        while True:
            page = ddb.query(**kwargs)
            users |= {i["userId"]["S"] for i in page["Items"] if i.get("liked", {}).get("BOOL", True)}
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return users


def traffic(likes: Likes, posts: list[str], users: int, seed: int) -> None:
    """Likes, unlikes, re-likes and repeated requests of many users on ``posts``."""
    rng = random.Random(seed)
    for post in posts:
        for u in range(users):
            likes.toggling.like(post, f"u{u}")
        for u in rng.sample(range(users), users // 3):
            likes.toggling.unlike(post, f"u{u}")
        for u in rng.sample(range(users), users // 4):
            (likes.toggling.like if rng.random() < 0.5 else likes.toggling.unlike)(post, f"u{u}")
        for u in rng.sample(range(users), 5):
            likes.toggling.unlike(post, f"never{u}")  # a tombstone: counts nothing


# ---------------------------------------------------------------------------- the write path
def test_hot_like_is_one_write_under_a_spread_key_and_the_own_state_is_exact_at_once(likes: Likes, ddb: Any, table: str) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    assert likes.toggling.like("h1", "u1").changed is True
    change = likes.toggling.like("h1", "u1")
    assert (change.changed, change.liked) == (False, True)
    assert likes.toggling.like("h1", "u2").result.capacity.write_units <= 1  # one item, no transaction
    key = hot_like_key("h1", "u1", SPREAD)
    item = ddb.get_item(TableName=table, Key={k: {"S": v} for k, v in key.items()})["Item"]
    assert key["PK"].startswith("POST#h1#S") and item["delta"] == {"N": "0"}  # the second like only restamped
    assert likes.posts.like_state("h1", "u1")["liked"] is True  # before any aggregation
    assert likes.posts.get_post("h1")["likeTally"] == 0 and likes.posts.get_post("h1")["asOf"] is None
    likes.toggling.unlike("h1", "u1")
    assert likes.posts.like_state("h1", "u1")["liked"] is False and likes.posts.like_state("h1", "nobody")["liked"] is False
    assert likes.posts.get_post("h1")["mode"] == "hot"


def test_hot_latest_request_wins(likes: Likes) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    t = now_ms()
    assert likes.toggling.unlike("h1", "u1", request_id="r2", at=t).liked is False  # a tombstone (never liked: nothing changed)
    stale = likes.toggling.like("h1", "u1", request_id="r1", at=t - 1000)  # older: replayed after the unlike
    assert stale.result.reason == "stale" and stale.liked is False
    assert likes.posts.like_state("h1", "u1")["liked"] is False


def test_hot_like_of_a_missing_post_is_404(likes: Likes) -> None:
    from counters.core.errors import NotFound

    with pytest.raises(NotFound):
        likes.toggling.like("nope", "u1")


# ---------------------------------------------------------------------------- the aggregator
def test_stream_tally_equals_liked_items(likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str) -> None:
    """Many users on two hot posts; the local stack's poller runs the aggregator from the stream."""
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    likes.posts.create_post(author_id="a", body="b", post_id="h2", mode="hot")
    traffic(likes, ["h1", "h2"], users=60, seed=1)
    poller = StreamPoller(table, dynamodb_endpoint, {FN: lambda event: ("ok", deliver(agg_fn, event["Records"]))})
    assert poller.poll_once() > 0
    for post in ("h1", "h2"):
        assert tally(ddb, table, post) == len(liked_items(ddb, table, post)) > 0
        audit = likes.audits.audit(post)  # hot: no drift concluded from a quick look, the numbers agree once drained
        assert (audit.stored, audit.drift, audit.reason) == (audit.counted, None, "aggregated")
        shown = likes.posts.get_post(post)
        assert shown["asOf"] is not None and shown["lagMs"] >= 0


def test_the_same_batches_delivered_twice_count_once(likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str) -> None:
    """The guard of the checkpoint: without its condition this test fails (see the mutant below)."""
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    traffic(likes, ["h1"], users=40, seed=2)
    batches = captured_batches(table, dynamodb_endpoint, batch_size=25)
    assert len(batches) > 1
    for batch in batches:
        assert deliver(agg_fn, batch) == {"batchItemFailures": []}
        assert deliver(agg_fn, batch) == {"batchItemFailures": []}  # redelivered whole
    for batch in batches:
        deliver(agg_fn, batch)  # and all of it again, late
    assert tally(ddb, table, "h1") == len(liked_items(ddb, table, "h1"))


def without_the_checkpoint_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The aggregator's mutant: its write no longer refuses records at or below a lane's checkpoint."""

    def unguarded(seq: Path, first: str) -> Cond:
        return seq.missing() | seq.exists()  # always true: the write keeps only "the post and its map exist"

    monkeypatch.setattr(aggregates, "lane_not_applied", unguarded)


def test_without_the_checkpoint_condition_a_redelivery_counts_twice(
    likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant: the same delivery as above with the checkpoint's condition removed over-counts,
    so the test above is what guards it."""
    without_the_checkpoint_condition(monkeypatch)
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    traffic(likes, ["h1"], users=40, seed=2)
    for batch in captured_batches(table, dynamodb_endpoint, batch_size=25):
        deliver(agg_fn, batch)
        deliver(agg_fn, batch)
    assert tally(ddb, table, "h1") != len(liked_items(ddb, table, "h1"))


def test_a_batch_that_crashed_after_the_first_posts_write_is_exact_when_redelivered(
    likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for post in ("h1", "h2", "h3"):
        likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot")
    traffic(likes, ["h1", "h2", "h3"], users=20, seed=3)
    batches = captured_batches(table, dynamodb_endpoint)
    assert len(batches) == 1
    calls = {"n": 0}
    original = Aggregator.apply_parent

    def crash_after_first(self: Aggregator, parent: str, changes: list[Change], **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the function died mid-batch")
        return original(self, parent, changes, **kwargs)

    monkeypatch.setattr(Aggregator, "apply_parent", crash_after_first)
    with pytest.raises(RuntimeError):
        deliver(agg_fn, batches[0])
    monkeypatch.setattr(Aggregator, "apply_parent", original)
    assert tally(ddb, table, "h1") == len(liked_items(ddb, table, "h1"))  # the first post's write committed
    assert deliver(agg_fn, batches[0]) == {"batchItemFailures": []}  # the whole batch again
    for post in ("h1", "h2", "h3"):
        assert tally(ddb, table, post) == len(liked_items(ddb, table, post))


def test_restarts_from_any_record_and_duplicate_windows_stay_exact(
    likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str
) -> None:
    """Lambda restarts a shard from a failed record (ReportBatchItemFailures), bisects batches and
    redelivers them: seen as windows of the record sequence that start at or before the first
    record not yet delivered, in any mix, with late copies of earlier windows in between."""
    for post in ("h1", "h2"):
        likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot")
    traffic(likes, ["h1", "h2"], users=50, seed=4)
    records = [r for batch in captured_batches(table, dynamodb_endpoint) for r in batch]
    assert len(records) > 50
    rng = random.Random(4)
    delivered, windows = 0, []
    while delivered < len(records):
        start = rng.randint(max(0, delivered - 30), delivered)
        end = min(len(records), start + rng.randint(1, 40))
        windows.append((start, end))
        if rng.random() < 0.3 and windows:
            windows.append(rng.choice(windows))  # a late duplicate of an earlier window
        delivered = max(delivered, end)
    for start, end in windows:
        assert deliver(agg_fn, records[start:end]) == {"batchItemFailures": []}
        for post in ("h1", "h2"):
            assert tally(ddb, table, post) >= 0
    for post in ("h1", "h2"):
        assert tally(ddb, table, post) == len(liked_items(ddb, table, post))


def test_a_contended_post_is_reported_by_its_first_record_and_the_restart_is_exact(
    likes: Likes, agg_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str, faults: Any
) -> None:
    for post in ("h1", "h2"):
        likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot")
    traffic(likes, ["h1", "h2"], users=20, seed=5)
    records = captured_batches(table, dynamodb_endpoint)[0]
    faults.add("throttle", operations={"UpdateItem"}, limit=FAST.max_attempts)  # the first post's write gives up, the second applies
    response = deliver(agg_fn, records)
    faults.clear()
    failed = response["batchItemFailures"]
    assert len(failed) == 1
    restart = next(i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] == failed[0]["itemIdentifier"])
    assert deliver(agg_fn, records[restart:]) == {"batchItemFailures": []}
    for post in ("h1", "h2"):
        assert tally(ddb, table, post) == len(liked_items(ddb, table, post))


def test_sequence_numbers_beyond_38_digits(likes: Likes, table: str, ddb: Any) -> None:
    """Stored as 40-wide strings: a 40-digit number orders after a 21-digit one, and is never a Number."""
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    agg = like_aggregator(table, retry=FAST)
    short, long_ = "1" * 21, "9" * 40
    assert padded(short) < padded(long_)
    assert agg.apply([Change("h1", "S0", short, 1, 1000)])[0].result.outcome is Outcome.APPLIED
    assert agg.apply([Change("h1", "S0", long_, 1, 2000)])[0].result.outcome is Outcome.APPLIED
    assert agg.apply([Change("h1", "S0", long_, 1, 2000)])[0].result.outcome is Outcome.DUPLICATE
    item = ddb.get_item(TableName=table, Key={"PK": {"S": "POST#h1"}, "SK": {"S": "META"}})["Item"]
    assert item["aggSeq"]["M"]["S0"] == {"S": long_} and item["likeTally"] == {"N": "2"}
    with pytest.raises(ValueError):
        padded("1" * 41)


def test_changes_for_a_post_stored_before_spread_or_missing_are_not_counted(likes: Likes, ddb: Any, table: str) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    ddb.update_item(TableName=table, Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}}, UpdateExpression="REMOVE spread, aggSeq, aggAt")
    agg = like_aggregator(table, retry=FAST)
    for post in ("p1", "missing"):  # no checkpoint map: no hot like can exist for it
        assert agg.apply([Change(post, "S0", "100000000000000000001", 1)])[0].result.reason == "parent_missing"
    assert likes.posts.get_post("p1")["likeTally"] == 0 and "asOf" not in likes.posts.get_post("p1")


def test_a_hot_write_on_a_post_now_standard_is_still_counted_once(likes: Likes, table: str) -> None:
    """Every flip is counted by the write that made it: a hot one by the aggregator, whatever the
    post's mode when its record arrives (a hot write in flight at a switch back to standard)."""
    likes.posts.create_post(author_id="a", body="b", post_id="p1")  # standard, with spread and checkpoints
    agg = like_aggregator(table, retry=FAST)
    change = Change("p1", "S0", "100000000000000000001", 1)
    assert agg.apply([change])[0].result.outcome is Outcome.APPLIED
    assert agg.apply([change])[0].result.outcome is Outcome.DUPLICATE
    assert likes.posts.get_post("p1")["likeTally"] == 1


# ---------------------------------------------------------------------------- listing likers
@pytest.mark.parametrize("mode", ["hot", "standard"])
def test_likers_paginate_across_spread_keys(likes: Likes, mode: str) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode=mode)
    for u in range(30):
        likes.toggling.like("h1", f"u{u}")
    for u in range(0, 30, 4):
        likes.toggling.unlike("h1", f"u{u}")
    expected = {f"u{u}" for u in range(30) if u % 4}
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        page = likes.posts.likers("h1", limit=4, cursor=cursor)
        assert len(page.user_ids) <= 4
        seen += [liker["userId"] for liker in page.user_ids]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        assert pages < 100
    assert sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
    if mode == "hot":
        with pytest.raises(InvalidRequest):  # InvalidCursor is a 400 InvalidRequest
            likes.posts.likers("h1", limit=4, cursor=likes.posts.likers("h1", limit=1).cursor[:-2] + "xx")


def cursor_text(cursor: str) -> str:
    """Everything a client can read out of a cursor: its parts, base64-decoded where they decode."""
    parts = []
    for part in cursor.split("."):
        try:
            parts.append(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode(errors="replace"))
        except ValueError:
            parts.append(part)
    return cursor + " " + " ".join(parts)


def users_in_lane(lane: int, n: int, prefix: str) -> list[str]:
    users = (f"{prefix}{i}" for i in range(10_000))
    return [u for u in users if lane_of(u, SPREAD) == lane][:n]


def test_a_cursor_never_names_a_user_who_unliked(likes: Likes) -> None:
    """The first spread key holds only tombstones: a page must not hand out DynamoDB's last
    evaluated key (an unliked user); every cursor names only likers the listing showed."""
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    gone = users_in_lane(0, 30, "gone")  # S0: likes, then unlikes -> tombstones only
    for user in gone:
        likes.toggling.like("h1", user)
        likes.toggling.unlike("h1", user)
    likers = users_in_lane(0, 2, "in0") + users_in_lane(1, 3, "in1") + users_in_lane(5, 3, "in5")  # "in0" sorts after "gone"
    for user in likers:
        likes.toggling.like("h1", user)
    seen: list[str] = []
    cursor, pages = None, 0
    while True:
        page = likes.posts.likers("h1", limit=1, cursor=cursor)
        seen += [liker["userId"] for liker in page.user_ids]
        pages += 1
        cursor = page.cursor
        if cursor is None:
            break
        text = cursor_text(cursor)
        assert not [u for u in gone if u in text], text  # no tombstone's user, in clear or encoded
        assert "LIKE#" not in text and "POST#" not in text  # no DynamoDB key at all
        assert page.user_ids, "a page with a cursor lists a liker (progress without naming a tombstone)"
        assert pages < 50
    assert sorted(seen) == sorted(likers) and len(seen) == len(set(seen))


@pytest.mark.parametrize("mode", ["hot", "standard"])
def test_a_forged_or_tampered_cursor_is_refused_and_reveals_nothing(likes: Likes, table: str, mode: str) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode=mode)
    likes.posts.create_post(author_id="a", body="b", post_id="p2", mode=mode)
    for u in range(12):
        likes.toggling.like("p1", f"u{u:02d}")
        likes.toggling.like("p2", f"u{u:02d}")
    genuine = likes.posts.likers("p1", limit=2).cursor
    assert genuine is not None
    body, tag = genuine.split(".")
    lane, after = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    old_style = {"lane": 0, "key": {"PK": "POST#p1#S0", "SK": "LIKE#USER#u07"}}  # DynamoDB's key, as cursors used to be
    forged = [
        b64(json.dumps(old_style).encode()),
        b64(json.dumps([lane, "u07"]).encode()) + "." + tag,  # another user, the genuine tag
        b64(json.dumps([min(lane + 1, SPREAD - 1) if mode == "hot" else 0, after]).encode()) + "." + tag,
        b64(json.dumps([lane, "u07"]).encode()) + "." + b64(b"\0" * 16),
        body + "." + tag[:-2] + ("AA" if not tag.endswith("AA") else "BB"),
        body,
        "%%%." + tag,
    ]
    forged += [likes.posts.likers("p2", limit=2).cursor]  # another post's genuine cursor
    forged += [Likes(table, retry=FAST, cursor_secret="another-deployment").posts.likers("p1", limit=2).cursor]
    messages = set()
    for cursor in forged:
        if cursor == genuine:
            continue
        with pytest.raises(InvalidCursor) as refused:
            likes.posts.likers("p1", limit=2, cursor=cursor)
        assert refused.value.code == "invalid_cursor" and refused.value.status == 400
        messages.add(refused.value.message)
    assert messages == {"cursor is not valid"}  # the same answer whatever was wrong: nothing to learn from it
    assert likes.posts.likers("p1", limit=2, cursor=genuine).user_ids  # the genuine one still works


def test_lag_of_an_idle_hot_post_is_zero_and_does_not_grow(likes: Likes, table: str) -> None:
    """lagMs is the lag of what was pending when the aggregator last counted: an idle post whose
    likes are all aggregated shows 0, however long it stays idle."""
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    created = now_ms()
    agg = like_aggregator(table, retry=FAST, clock=lambda: created)  # applied as soon as written
    assert agg.apply([Change("h1", "S0", "100000000000000000001", 1, created)])[0].result.outcome is Outcome.APPLIED
    time.sleep(1.1)  # idle
    shown = likes.posts.get_post("h1")
    assert (shown["likeTally"], shown["asOf"], shown["lagMs"]) == (1, created, 0)


def test_lag_of_a_hot_post_is_how_long_its_pending_likes_waited(likes: Likes, table: str, ddb: Any) -> None:
    likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    key = {"PK": {"S": "POST#h1"}, "SK": {"S": "META"}}  # 60 s old: lagMs is bounded by the post's age (test below)
    ddb.update_item(
        TableName=table, Key=key, UpdateExpression="SET createdAt = createdAt - :m", ExpressionAttributeValues={":m": {"N": "60"}}
    )
    written = now_ms()
    clock = [written + 5_000]  # the aggregator gets the records 5 s after they were written
    agg = like_aggregator(table, retry=FAST, clock=lambda: clock[0])
    changes = [Change("h1", "S0", "100000000000000000001", 1, written), Change("h1", "S1", "100000000000000000002", 1, written + 2_000)]
    agg.apply(changes)
    assert likes.posts.get_post("h1")["lagMs"] == 5_000  # the oldest pending like waited 5 s
    clock[0] = written + 6_000
    agg.apply([Change("h1", "S2", "100000000000000000003", 1, written + 5_900)])
    assert likes.posts.get_post("h1")["lagMs"] == 100  # caught up: only what was pending at the last write counts


def test_as_of_and_lag_are_bounded_by_the_post_s_life_whatever_the_stream_s_rounding(likes: Likes, table: str) -> None:
    """DynamoDB Local rounds the stream's creation times down to the minute: a like written now may
    carry a time up to 60 s ago, so a fresh post showed an asOf before its own creation and lagMs
    near a minute. The answer keeps to what the post's life proves: asOf >= createdAt, lagMs <= its age."""
    post, _ = likes.posts.create_post(author_id="a", body="b", post_id="h1", mode="hot")
    born = post["createdAt"] * 1000
    written = now_ms()
    rounded = written - written % 60_000 - 60_000  # as DynamoDB Local would report it, and a minute more
    agg = like_aggregator(table, retry=FAST, clock=lambda: written + 100)
    agg.apply([Change("h1", "S0", "100000000000000000001", 1, rounded)])
    shown = likes.posts.get_post("h1")
    assert shown["likeTally"] == 1 and shown["asOf"] == born  # not `rounded`, a time before the post existed
    assert shown["lagMs"] is not None and 0 <= shown["lagMs"] <= now_ms() - born  # not the 60 s+ the rounding made


def test_the_local_stack_subscribes_the_aggregator_with_its_filter() -> None:
    sub = next(s for s in subscriptions() if s.function == FN)
    assert sub.report_failures and sub.filters
    assert aggregator_module.SEQ_WIDTH == 40
    assert post_key("x") == {"PK": "POST#x", "SK": "META"}


def test_the_filter_passes_hot_like_writes_that_counted_and_audit_probes_only() -> None:
    from devstack.streams import matches

    patterns = next(s for s in subscriptions() if s.function == FN).filters

    def passes(name: str, pk: str, sk: str, delta: str | None) -> bool:
        image = {} if delta is None else {"delta": {"N": delta}}
        event = {"eventName": name, "dynamodb": {"Keys": {"PK": {"S": pk}, "SK": {"S": sk}}, "NewImage": image}}
        return any(matches(pattern, event) for pattern in patterns)  # Lambda ORs a mapping's filters

    assert passes("INSERT", "POST#h1#S3", "LIKE#USER#u1", "1")
    assert passes("MODIFY", "POST#h1#S3", "LIKE#USER#u1", "-1")
    assert not passes("MODIFY", "POST#h1#S3", "LIKE#USER#u1", "0")  # a restamp, a tombstone, a standard write
    # every creation under a spread key, delta 0 too (a new tombstone, a standard like): examined for a
    # user's second item on a grown post (docs/DESIGN.md "A spread that grows")
    assert passes("INSERT", "POST#h1#S3", "LIKE#USER#u1", "0")
    assert not passes("INSERT", "POST#p1", "LIKE#USER#u1", None)  # a like stored before spread (no delta)
    assert not passes("MODIFY", "POST#h1", "META", None)  # the aggregator's own write
    assert not passes("REMOVE", "POST#h1#S3", "LIKE#USER#u1", None)  # a tombstone's TTL
    assert passes("MODIFY", "POST#h1#S3", "PROBE", None)  # an audit's probe: a point in the lane's order
    assert hot_change(
        {
            "eventName": "MODIFY",
            "dynamodb": {
                "Keys": {"PK": {"S": "POST#h1#S3"}, "SK": {"S": "PROBE"}},
                "NewImage": {"probe": {"S": "t1"}},
                "SequenceNumber": "7",
            },
        }
    ) == Change("h1", "S3", "7", 0, 0, probe="t1")  # written before probeSeq
    assert hot_change(
        {
            "eventName": "MODIFY",
            "dynamodb": {
                "Keys": {"PK": {"S": "POST#h1#S3"}, "SK": {"S": "PROBE"}},
                "NewImage": {"probe": {"S": "t1"}, "probeSeq": {"N": "12"}},
                "SequenceNumber": "8",
            },
        }
    ) == Change("h1", "S3", "8", 0, 0, probe="12")  # the probe's number in its lane's order


def test_hot_post_over_the_api(load_function: Any, table: str, layer_client: Any, agg_fn: Any, dynamodb_endpoint: str) -> None:
    from tests.conftest import api_event, invoke

    api = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    status, post = invoke(api, api_event("POST", "/posts", {"postId": "h1", "authorId": "a", "body": "b", "mode": "hot"}))
    assert status == 201 and post["mode"] == "hot" and post["asOf"] is None
    assert invoke(api, api_event("POST", "/posts", {"postId": "x", "authorId": "a", "body": "b", "mode": "warm"}))[0] == 400
    for u in range(5):
        assert invoke(api, api_event("PUT", f"/posts/h1/likes/u{u}"))[1]["changed"] is True
    assert invoke(api, api_event("DELETE", "/posts/h1/likes/u0"))[1]["liked"] is False
    assert invoke(api, api_event("GET", "/posts/h1/likes/u1"))[1] == {"postId": "h1", "userId": "u1", "liked": True}
    assert invoke(api, api_event("GET", "/posts/h1/likes/u0"))[1]["liked"] is False
    assert invoke(api, api_event("GET", "/posts/h1"))[1]["likeTally"] == 0  # not aggregated yet
    StreamPoller(table, dynamodb_endpoint, {FN: lambda event: ("ok", deliver(agg_fn, event["Records"]))}).poll_once()
    status, shown = invoke(api, api_event("GET", "/posts/h1"))
    assert status == 200 and shown["likeTally"] == 4 and shown["asOf"] is not None and shown["lagMs"] >= 0
    status, page = invoke(api, api_event("GET", "/posts/h1/likes?limit=2"))
    assert status == 200 and len(page["likers"]) <= 2 and page["cursor"]
