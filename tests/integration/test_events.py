"""Every sample event in events/ is valid for its handler (as `sam local invoke -e` would use it)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tests.conftest import invoke, load_event
from tests.tooling.test_events import gen_events

LIKES_SEQUENCE = [
    ("likes/create_post.json", 201),
    ("likes/get_post.json", 200),
    ("likes/like.json", 200),
    ("likes/list_likers.json", 200),
    ("likes/audit.json", 200),
    ("likes/unlike.json", 200),
]


def test_likes_events_run_in_order(load_function: Any, table: str, layer_client: Any) -> None:
    app = load_function("LikesFunction", table)
    answers = {}
    for name, expected in LIKES_SEQUENCE:
        status, body = invoke(app, load_event(name))
        assert status == expected, (name, body)
        answers[name] = body
    assert answers["likes/like.json"]["changed"] is True
    assert answers["likes/list_likers.json"]["likers"][0]["userId"] == "u1"
    assert answers["likes/audit.json"]["drift"] == 0
    assert answers["likes/unlike.json"]["changed"] is True


def test_retry_worker_and_operations_events(load_function: Any, table: str, queues: Any, layer_client: Any, lambda_context: Any) -> None:
    from counters.core.commands import Command
    from counters.deferral.operations import Operations

    likes = load_function("LikesFunction", table, queues.urls)
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    assert invoke(likes, load_event("likes/create_post.json"))[0] == 201
    # A like is ordered by when the API received it, and its operation record expires: the sample
    # is stamped now, as `make invoke-events` stamps it (scripts/gen_events.py: stamped).
    replay = gen_events.stamped("retry_worker/replay_like.json", load_event("retry_worker/replay_like.json"), time.time_ns() // 1_000_000)
    Operations(table).record_pending(Command.from_message(replay["Records"][0]["body"]))  # as the API would have

    assert worker.lambda_handler(replay, lambda_context) == {"batchItemFailures": []}
    status, body = invoke(operations, load_event("operations/get_operation.json"))
    assert (status, body["status"], body["result"]["changed"]) == (200, "APPLIED", True)
    assert worker.lambda_handler(replay, lambda_context) == {"batchItemFailures": []}  # redelivery: no change
    assert invoke(likes, load_event("likes/get_post.json"))[1]["likeTally"] == 1

    assert worker.lambda_handler(load_event("retry_worker/poison.json"), lambda_context) == {"batchItemFailures": []}
    assert queues.depth("RetryDLQ") == 1


def test_cognito_events_act_only_as_their_sub(load_function: Any, table: str, layer_client: Any, monkeypatch: Any) -> None:
    """events/likes/like_as_u*.json: what the function gets behind the Cognito authorizer."""
    app = load_function("LikesFunction", table)
    assert invoke(app, load_event("likes/create_post.json"))[0] == 201  # AuthMode NONE: anyone may
    app.function.configure(replace(app.function.settings, auth_mode="COGNITO"), app.function.service)
    status, body = invoke(app, load_event("likes/like_as_u2.json"))
    assert (status, body["error"]) == (403, "forbidden")
    assert invoke(app, load_event("likes/get_post.json"))[0] == 401  # no claims at all
    status, body = invoke(app, load_event("likes/like_as_u1.json"))
    assert (status, body["changed"]) == (200, True)


def test_like_aggregator_event_counts_a_hot_post_once(load_function: Any, table: str, layer_client: Any, lambda_context: Any) -> None:
    """events/like_aggregator/hot_likes.json: h1's likes as the stream delivers them (u1, u2 like,
    u1 unlikes); the tally nets +1, a redelivery changes nothing, the watermark is the records' time."""
    from counters.core.failures import RetryPolicy
    from counters.streams import like_aggregator

    likes = load_function("LikesFunction", table)
    aggregator = load_function(
        "LikeAggregatorFunction", table, build=lambda s: like_aggregator(table, retry=RetryPolicy(max_attempts=3, base_delay=0.001))
    )
    assert invoke(likes, load_event("likes/create_hot_post.json"))[0] == 201
    event = load_event("like_aggregator/hot_likes.json")
    assert aggregator.lambda_handler(event, lambda_context) == {"batchItemFailures": []}
    status, post = invoke(likes, load_event("likes/get_hot_post.json"))
    assert (status, post["mode"], post["likeTally"]) == (200, "hot", 1)
    lanes: dict[str, int] = {}  # spread key -> the creation time (ms) of its last record: its watermark
    for record in event["Records"]:
        lanes[record["dynamodb"]["Keys"]["PK"]["S"]] = record["dynamodb"]["ApproximateCreationDateTime"] * 1000
    # exact as of the least watermark, which the answer never puts before the post's own creation
    # (the sample's records are dated before this post was created: asOf is then createdAt)
    assert len(lanes) == 2 and post["asOf"] == max(min(lanes.values()), post["createdAt"] * 1000)
    assert aggregator.lambda_handler(event, lambda_context) == {"batchItemFailures": []}
    assert invoke(likes, load_event("likes/get_hot_post.json"))[1]["likeTally"] == 1
