"""Failures handled once: the glue around the counters, driven as a client would drive it.

Each test injects a fault between a function and DynamoDB (or SQS) and checks the answer AND
the stored items. Every one of them failed before the retry engine took every call
(issue "Failures handled once", defects 1-5).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.primitives.approaches import NAMES
from counters.services.likes import Likes
from counters.store.items import from_item
from devstack.runtime import LambdaContext
from tests.conftest import Queues, api_event, invoke, likes_count

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def items(ddb: Any, table: str, prefix: str) -> list[dict[str, Any]]:
    """Every stored item whose PK starts with ``prefix`` (a consistent scan)."""
    found, kwargs = [], {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**kwargs)
        found += [from_item(i) for i in page["Items"] if i["PK"]["S"].startswith(prefix)]
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def resend_on_5xx(module: Any, event: dict[str, Any], tries: int = 5) -> tuple[int, Any]:
    """A client that re-sends the same request while it gets a 5xx."""
    for _ in range(tries):
        status, body = invoke(module, event)
        if status < 500:
            return status, body
    return status, body


# ------------------------------------------------------------------ defect 1: calls with no retry
def test_one_throttle_on_post_creation_is_retried_not_a_500(load_function: Any, table: str, faults: Any, ddb: Any) -> None:
    likes = load_function("LikesFunction", table)
    faults.add("throttle", operations={"PutItem"}, limit=1)
    status, body = invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "alice", "body": "hi"}))
    assert (status, body["postId"]) == (201, "p1")
    assert len(items(ddb, table, "POST#")) == 1


def test_one_throttle_on_order_reads_is_retried_not_a_500(load_function: Any, table: str, faults: Any) -> None:
    orders = load_function("OrdersFunction", table)
    faults.add("throttle", operations={"GetItem"}, limit=1)
    assert invoke(orders, api_event("GET", "/orders/1"))[0] == 404
    faults.add("throttle", operations={"GetItem"}, limit=1)
    assert invoke(orders, api_event("GET", "/orders/latest")) == (200, {"orderId": None})


# ------------------------------------------------------------------ defect 2: POST /posts re-sent
@pytest.mark.parametrize("how", ["idempotency_key", "client_post_id"])
def test_post_creation_resent_after_an_error_after_commit_is_the_same_post(
    load_function: Any, table: str, faults: Any, ddb: Any, how: str
) -> None:
    likes = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))

    def request(n: int, text: str = "once") -> dict[str, Any]:
        body: dict[str, Any] = {"authorId": "alice", "body": text}
        if how == "idempotency_key":
            return api_event("POST", "/posts", body, {"Idempotency-Key": f"k-{n}"})
        return api_event("POST", "/posts", {**body, "postId": f"mine-{n}"})

    # The answer is lost after the Put committed; the engine's re-send finds this request's post: 201.
    faults.add("after_commit", operations={"PutItem"}, limit=1)
    status, first = invoke(likes, request(1))
    assert status == 201 and len(items(ddb, table, "POST#")) == 1
    # Lost, then the in-line budget runs out: 503. The client re-sends and gets that post: 200, not a 409 or a twin.
    faults.add("after_commit", operations={"PutItem"}, limit=1)
    faults.add("throttle", operations={"PutItem"}, limit=FAST.max_attempts - 1)
    status, _ = invoke(likes, request(2))
    assert status == 503
    status, again = resend_on_5xx(likes, request(2))
    assert status == 200 and again["body"] == "once" and again["authorId"] == "alice"
    stored = items(ddb, table, "POST#")
    assert len(stored) == 2 and again["postId"] in {p["postId"] for p in stored}
    # a different post under the same key or id is refused, and writes nothing
    status, err = invoke(likes, request(2, "other"))
    assert (status, err["error"]) in ((409, "already_exists"), (422, "idempotency_key_reused"))
    assert len(items(ddb, table, "POST#")) == 2


# ------------------------------------------------------------------ defect 3: operation records


def deliver(worker: Any, queues: Queues) -> dict[str, Any]:
    """Receive what is visible on the retry queue and hand it to the worker once (no delete)."""
    from devstack.sqs import sqs_event

    messages = queues.sqs.receive_message(QueueUrl=queues.urls["RetryQueue"], AttributeNames=["All"], MaxNumberOfMessages=10)
    assert messages.get("Messages"), "nothing on the retry queue"
    return worker.lambda_handler(sqs_event(messages["Messages"], queues.attrs["RetryQueue.Arn"]), LambdaContext.for_function("w", 512, 15))


@pytest.mark.parametrize("op", ["like", "unlike"])
def test_a_deferred_request_ends_applied_when_recording_its_outcome_failed_once(
    deferring_likes: Any, faults: Any, queues: Queues, ddb: Any, table: str, op: str
) -> None:
    likes, worker, operations = deferring_likes
    assert invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    if op == "unlike":
        assert invoke(likes, api_event("PUT", "/posts/p1/likes/u1"))[0] == 200
    faults.add("conflict", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes, api_event("PUT" if op == "like" else "DELETE", "/posts/p1/likes/u1"))
    assert (status, body["status"]) == (202, "PENDING")
    operation_id = body["operationId"]

    # First delivery: the command applies, then recording its outcome fails past the budget.
    worker_budget = 6
    if op == "like":
        faults.add("throttle", operations={"UpdateItem"}, limit=worker_budget)
    else:  # the unlike's transaction commits but its answer is lost, then the in-line retries contend
        faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
        faults.add("conflict", operations={"TransactWriteItems"}, limit=worker_budget - 1)
    first = deliver(worker, queues)
    faults.clear()
    expected_tally = 1 if op == "like" else 0
    item = ddb.get_item(TableName=table, Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
    assert int(item["likeTally"]["N"]) == expected_tally  # the change is made...
    record = invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]
    if record["status"] == "PENDING":
        assert first["batchItemFailures"], "an unrecorded outcome must be redelivered"
        # Second delivery (after the visibility timeout): it finds the change made by this request.
        import time

        time.sleep(1.2)
        deliver(worker, queues)
    record = invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]
    assert record["status"] == "APPLIED", record
    assert record["result"]["changed"] is True
    assert likes_count(ddb, table, "p1") == expected_tally


# ------------------------------------------------------------------ defect 4: one key, many quantities
@pytest.mark.parametrize("strategy", ["atomic", "occ"])
def test_one_key_with_different_quantities_concurrently_takes_one_quantity_at_most(
    load_function: Any, table: str, ddb: Any, layer_client: Any, strategy: str
) -> None:
    reservations = load_function("ReservationsFunction", table)
    body = {"resourceId": "r1", "capacity": 1000, "strategy": strategy}
    assert invoke(reservations, api_event("POST", "/resources", body))[0] == 201
    barrier = threading.Barrier(20)

    def reserve(quantity: int) -> tuple[int, Any]:
        barrier.wait()
        event = api_event("POST", "/resources/r1/reservations", {"quantity": quantity}, {"Idempotency-Key": "same-key"})
        return invoke(reservations, event)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(reserve, range(1, 21)))
    statuses = sorted(status for status, _ in answers)
    created = [body for status, body in answers if status == 201]
    assert len(created) <= 1 and all(s in (201, 422, 503) for s in statuses), statuses
    resource = invoke(reservations, api_event("GET", "/resources/r1"))[1]
    records = [r for r in items(ddb, table, "RSV#") if r["status"] == "CONFIRMED"]
    assert resource["reserved"] == sum(int(r["quantity"]) for r in records)  # nothing taken that no record can give back
    assert len(records) == len(created)
    if created:  # and the one record releases all of it
        rid = created[0]["reservationId"]
        assert invoke(reservations, api_event("DELETE", f"/resources/r1/reservations/{rid}"))[0] == 200
        assert invoke(reservations, api_event("GET", "/resources/r1"))[1]["reserved"] == 0


# ------------------------------------------------------------------ defect 5: stranded holds
@pytest.mark.parametrize("strategy", NAMES)
def test_a_confirmed_hold_never_expires_and_a_release_starts_its_ttl(load_function: Any, table: str, ddb: Any, strategy: str) -> None:
    reservations = load_function("ReservationsFunction", table)
    assert invoke(reservations, api_event("POST", "/resources", {"resourceId": "r1", "capacity": 5, "strategy": strategy}))[0] == 201
    status, held = invoke(reservations, api_event("POST", "/resources/r1/reservations", {"quantity": 2}, {"Idempotency-Key": "k1"}))
    assert status == 201
    (record,) = items(ddb, table, "RSV#")
    assert record["status"] == "CONFIRMED" and "expiresAt" not in record  # TTL would strand the quantity
    rid = held["reservationId"]
    assert invoke(reservations, api_event("DELETE", f"/resources/r1/reservations/{rid}"))[0] == 200
    (record,) = items(ddb, table, "RSV#")
    assert record["status"] == "RELEASED" and int(record["expiresAt"]) > int(record["releasedAt"])
