"""Every sample event answers as it should on a fresh table, in any order, once what it needs
(events/needs.toml) is seeded first: what `make local-invoke` does before `sam local invoke`
(scripts/event_needs.py), run here through the handlers with the template's environment (no Docker)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scripts import event_needs

NEEDS = event_needs.load()
CREATES = {spec["create"]: seed for seed, spec in NEEDS["seeds"].items() if "create" in spec}
OK_BATCH = {"batchItemFailures": []}

# What each event answers whatever ran before it: a status (for a create event: when it makes its
# seed, and when the seed was there already) and fields its body must hold; or the whole answer of
# a non-API invocation (None: checked below).
EXPECTED: dict[str, Any] = {
    "likes/create_post.json": ((201, 200), {"postId": "p1", "mode": "standard"}),  # the same post again: 200
    "likes/get_post.json": (200, {"postId": "p1"}),
    "likes/like.json": (200, {"userId": "u1", "liked": True}),
    "likes/list_likers.json": (200, {"postId": "p1"}),
    "likes/audit.json": (200, {"postId": "p1", "drift": 0}),
    "likes/unlike.json": (200, {"userId": "u1", "liked": False}),
    "likes/like_as_u1.json": (200, {"userId": "u1", "liked": True}),
    "likes/like_as_u2.json": (403, {"error": "forbidden"}),
    "likes/create_hot_post.json": ((201, 200), {"postId": "h1", "mode": "hot"}),
    "likes/get_hot_post.json": (200, {"postId": "h1", "mode": "hot"}),
    "like_aggregator/hot_likes.json": OK_BATCH,
    "reservations/create_resource.json": ((201, 409), {}),  # a second create of a resource: already_exists
    "reservations/get_resource.json": (200, {"resourceId": "tickets", "capacity": 100}),
    "reservations/reserve.json": ((201, 200), {"quantity": 2}),  # the same Idempotency-Key again: 200
    "reservations/get_reservation.json": (200, {"quantity": 2, "resourceId": "tickets"}),
    "reservations/release.json": (200, {"status": "RELEASED"}),
    "ledger/append.json": ((201, 201), {"ledgerId": "l1"}),  # a key minted when invoked: a new entry each time
    "ledger/get.json": (200, {"ledgerId": "l1"}),
    "ledger/compact.json": (200, {"ledgerId": "l1", "complete": True}),
    "ledger/schedule.json": None,
    "orders/create_order.json": ((201, 200), {"orderId": 1, "customerId": "c1"}),  # the same Idempotency-Key: 200
    "orders/get_order.json": (200, {"orderId": 1, "customerId": "c1"}),
    "order_pointer/order_inserts.json": OK_BATCH,
    "orders/latest_order.json": (200, {"orderId": 2}),  # the pointer the stream records set
    "retry_worker/replay_like.json": OK_BATCH,
    "operations/get_operation.json": (200, {"status": "APPLIED"}),
    "retry_worker/poison.json": OK_BATCH,
}


def check(name: str, answer: event_needs.Answer, made: set[str]) -> None:
    status, body = answer
    expected = EXPECTED[name]
    if expected is None:  # the nightly compaction: it ran to the end
        assert status is None and body["incomplete"] == [] and body["stoppedEarly"] is False, (name, body)
    elif isinstance(expected, dict):
        assert (status, body) == (None, expected), name
    else:
        want, fields = expected
        if isinstance(want, tuple):
            want = want[CREATES[name] in made]
        assert status == want and {k: body.get(k) for k in fields} == fields, (name, sorted(made), answer)


def test_every_event_has_an_expected_answer() -> None:
    assert set(EXPECTED) == set(NEEDS["events"])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_event_answers_on_a_fresh_table_in_any_order(seed: int, table: str, queues: Any, layer_client: Any) -> None:
    runner = event_needs.HandlerRunner(table, refs=queues.urls)
    order = sorted(NEEDS["events"])
    random.Random(seed).shuffle(order)
    made: set[str] = set()
    poisoned = 0
    for name in order:
        made |= set(event_needs.ensure(name, runner, NEEDS))
        spec = NEEDS["events"][name]
        check(name, runner.invoke(spec["function"], event_needs.event_of(name), spec.get("params", {})), made)
        if name in CREATES:
            made.add(CREATES[name])
        poisoned += name == "retry_worker/poison.json"
    assert queues.depth("RetryDLQ") == poisoned == 1


@pytest.mark.parametrize("name", sorted(NEEDS["events"]))
def test_each_event_first_on_a_fresh_table(name: str, table: str, queues: Any, layer_client: Any) -> None:
    """The order a shuffle rarely draws: this event before any other (its needs seeded only by ensure)."""
    runner = event_needs.HandlerRunner(table, refs=queues.urls)
    made = set(event_needs.ensure(name, runner, NEEDS))
    spec = NEEDS["events"][name]
    check(name, runner.invoke(spec["function"], event_needs.event_of(name), spec.get("params", {})), made)


def test_a_second_ensure_seeds_nothing(table: str, queues: Any, layer_client: Any) -> None:
    runner = event_needs.HandlerRunner(table, refs=queues.urls)
    assert event_needs.ensure("operations/get_operation.json", runner, NEEDS) == ["post_p1", "like_u2_pending", "like_u2_replayed"]
    assert event_needs.ensure("operations/get_operation.json", runner, NEEDS) == []
    assert event_needs.ensure("likes/like.json", runner, NEEDS) == []  # p1 is there already


def test_without_its_seeds_an_event_does_not_answer_as_it_should(table: str, queues: Any, layer_client: Any) -> None:
    """What `make local-invoke` met before: the like of a post nobody created, the operation never recorded."""
    runner = event_needs.HandlerRunner(table, refs=queues.urls)
    assert runner.invoke("LikesFunction", event_needs.event_of("likes/like.json"), {})[0] == 404
    assert runner.invoke("RetryWorkerFunction", event_needs.event_of("retry_worker/replay_like.json"), {}) == (None, OK_BATCH)
    assert runner.invoke("OperationsFunction", event_needs.event_of("operations/get_operation.json"), {})[0] == 404


def test_a_seed_that_cannot_be_made_names_the_event_and_its_answer(table: str, queues: Any, layer_client: Any) -> None:
    def needs_with(post_p1: dict[str, str]) -> dict[str, Any]:
        return {**NEEDS, "seeds": {**NEEDS["seeds"], "post_p1": post_p1}}

    runner = event_needs.HandlerRunner(table, refs=queues.urls)
    wrong = needs_with({"probe": "likes/get_post.json", "create": "likes/create_hot_post.json"})  # makes h1, not p1
    pattern = r"seeding post_p1 for likes/like.json: likes/create_hot_post.json answered \(201, .*then likes/get_post.json answered \(404"
    with pytest.raises(event_needs.SeedError, match=pattern):
        event_needs.ensure("likes/like.json", runner, wrong)
    circular = needs_with({"probe": "likes/get_post.json", "create": "likes/list_likers.json"})  # which needs p1 itself
    with pytest.raises(event_needs.SeedError, match="the seed post_p1 needs itself"):
        event_needs.ensure("likes/like.json", runner, circular)


def test_make_local_invoke_seeds_the_table_env_local_names(tmp_path: Any, table: str, dynamodb_endpoint: str, layer_client: Any) -> None:
    """scripts/sam_local.py's step before `sam local invoke`: against the table and endpoint of an
    --env-vars file (events/env.local.json's shape), p1 is there afterwards; nothing answering
    at the endpoint is one line naming the fix."""
    import json

    from scripts import sam_local

    env_vars = tmp_path / "env.json"
    local = json.loads((event_needs.EVENTS / "env.local.json").read_text())
    local["Parameters"].update({"TABLE_NAME": table, "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint})
    env_vars.write_text(json.dumps(local))
    assert sam_local.seed_needs("likes/like.json", env_vars) is None
    assert sam_local.seed_needs(str(event_needs.EVENTS / "likes" / "like.json"), env_vars) is None  # a path works too
    runner = event_needs.HandlerRunner(table)
    assert runner.invoke("LikesFunction", event_needs.event_of("likes/get_post.json"), {})[0] == 200
    assert sam_local.seed_needs(str(tmp_path / "my_own_event.json"), env_vars) is None  # not a sample: nothing to seed

    local["Parameters"]["AWS_ENDPOINT_URL_DYNAMODB"] = "http://127.0.0.1:9"  # nothing listens on the discard port
    env_vars.write_text(json.dumps(local))
    problem = sam_local.seed_needs("likes/like.json", env_vars)
    assert problem is not None and "\n" not in problem
    assert "http://127.0.0.1:9" in problem and 'make dev ARGS="--backend-host 172.17.0.1"' in problem and "--no-seed" in problem
