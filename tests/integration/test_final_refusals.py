"""A deferred request that meets a definite refusal ends REJECTED at its first delivery, for every
deferred operation (reserve, release, like, place_order, ledger_append): not redelivered until
the DLQ with its operation PENDING (issue 25, "a bug from hand-written replay lists").

Each test defers a request through its function (faults past a short in-line budget: 202), then
changes what the retry worker meets, as a deployment would between the request and its replay:
the table has become a global table (the worker's settings name this Region and the others), or
the ledger's key has aged past the retry window (a DLQ redrive). The replay is refused
(``UnsupportedInMode``, ``IdempotencyKeyExpired``), and the worker receives the message once:
no batch item failure, the message gone, nothing in the DLQ, the operation REJECTED with the
error's code, and nothing written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode
from counters.services.likes import Likes
from counters.services.orders import Orders
from counters.services.reservations import Reservations
from devstack.runtime import LambdaContext
from devstack.sqs import sqs_event
from tests.conftest import Queues, api_event, invoke, likes_count

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
A, B, C = "eu-west-1", "us-east-1", "us-west-2"


def now_global(worker: Any, mode: GlobalTableMode, regions: tuple[str, ...], home: str = A) -> None:
    """The worker as it runs in Region A once the table is a global table (its settings only)."""
    settings = replace(worker.function.settings, global_table_mode=mode, region=A, table_regions=",".join(regions), home_region=home)
    worker.function.configure(settings, worker.replayer(settings))


def replay_once(worker: Any, operations: Any, queues: Queues, operation_id: str) -> dict[str, Any]:
    """Deliver the queued command to the worker once, as Lambda's SQS poller would (a message
    the batch does not report as failed is deleted); returns the operation record."""
    received = queues.sqs.receive_message(QueueUrl=queues.urls["RetryQueue"], AttributeNames=["All"], MaxNumberOfMessages=10)
    messages = received.get("Messages", [])
    assert len(messages) == 1, messages
    response = worker.lambda_handler(sqs_event(messages, queues.attrs["RetryQueue.Arn"]), LambdaContext.for_function("w", 512, 15))
    assert response == {"batchItemFailures": []}, "a definite refusal must not be redelivered"
    queues.sqs.delete_message(QueueUrl=queues.urls["RetryQueue"], ReceiptHandle=messages[0]["ReceiptHandle"])
    assert (queues.depth("RetryQueue"), queues.depth("RetryDLQ")) == (0, 0)
    status, record = invoke(operations, api_event("GET", f"/operations/{operation_id}"))
    assert status == 200, record
    return dict(record)


def deferred(app: Any, event: dict[str, Any]) -> str:
    status, body = invoke(app, event)
    assert (status, body["status"]) == (202, "PENDING"), body
    return str(body["operationId"])


@pytest.fixture
def worker(load_function: Callable[..., Any], table: str, queues: Queues) -> tuple[Any, Any]:
    return load_function("RetryWorkerFunction", table, queues.urls), load_function("OperationsFunction", table, queues.urls)


def test_a_deferred_reserve_refused_in_the_tables_new_mode_is_rejected(
    load_function: Callable[..., Any], table: str, queues: Queues, faults: Any, worker: tuple[Any, Any]
) -> None:
    app = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    assert invoke(app, api_event("POST", "/resources", {"resourceId": "r", "capacity": 10, "strategy": "crt"}))[0] == 201
    faults.add("throttle", operations={"TransactWriteItems", "UpdateItem"})
    operation_id = deferred(app, api_event("POST", "/resources/r/reservations", {"quantity": 3}, headers={"Idempotency-Key": "k1"}))
    faults.clear()
    # MREC: a resource with one counter for every Region would oversell; the worker is refused
    now_global(worker[0], GlobalTableMode.MREC, (A, B))
    record = replay_once(*worker, queues, operation_id)
    assert (record["status"], record["result"]["error"]) == ("REJECTED", "unsupported_in_region_mode"), record
    assert invoke(app, api_event("GET", "/resources/r"))[1]["available"] == 10


def test_a_deferred_release_refused_in_the_tables_new_mode_is_rejected(
    load_function: Callable[..., Any], table: str, queues: Queues, faults: Any, worker: tuple[Any, Any]
) -> None:
    app = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    assert invoke(app, api_event("POST", "/resources", {"resourceId": "r", "capacity": 10, "strategy": "crt"}))[0] == 201
    status, taken = invoke(app, api_event("POST", "/resources/r/reservations", {"quantity": 3}, headers={"Idempotency-Key": "k1"}))
    assert status == 201, taken
    rid = taken["reservationId"]
    faults.add("throttle", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    operation_id = deferred(app, api_event("DELETE", f"/resources/r/reservations/{rid}"))
    faults.clear()
    now_global(worker[0], GlobalTableMode.MREC, (A, B))
    record = replay_once(*worker, queues, operation_id)
    assert (record["status"], record["result"]["error"]) == ("REJECTED", "unsupported_in_region_mode"), record
    assert invoke(app, api_event("GET", f"/resources/r/reservations/{rid}"))[1]["status"] == "CONFIRMED"
    assert invoke(app, api_event("GET", "/resources/r"))[1]["available"] == 7


def test_a_deferred_like_refused_in_the_tables_new_mode_is_rejected(
    load_function: Callable[..., Any], table: str, queues: Queues, faults: Any, ddb: Any, worker: tuple[Any, Any]
) -> None:
    app = load_function("LikesFunction", table, queues.urls, build=lambda s: Likes(s.table_name, retry=FAST))
    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    faults.add("conflict", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    operation_id = deferred(app, api_event("PUT", "/posts/p1/likes/u1"))
    # MRSC: a standard post counts its likes in a transaction, which MRSC does not offer
    now_global(worker[0], GlobalTableMode.MRSC, (A, B, C))
    record = replay_once(*worker, queues, operation_id)
    assert (record["status"], record["result"]["error"]) == ("REJECTED", "unsupported_in_region_mode"), record
    assert likes_count(ddb, table, "p1") == 0


def test_a_deferred_gapless_order_refused_outside_the_home_region_is_rejected(
    load_function: Callable[..., Any], table: str, queues: Queues, faults: Any, worker: tuple[Any, Any]
) -> None:
    gapless = {"SequenceMode": "gapless"}
    app = load_function(
        "OrdersFunction", table, queues.urls, build=lambda s: Orders(s.table_name, mode=s.sequence_mode, retry=FAST), params=gapless
    )
    worker = (load_function("RetryWorkerFunction", table, queues.urls, params=gapless), worker[1])
    order = {"customerId": "c1", "items": [{"sku": "s1", "quantity": 2}]}
    faults.add("throttle", operations={"UpdateItem", "TransactWriteItems"}, limit=FAST.max_attempts)
    operation_id = deferred(app, api_event("POST", "/orders", order, headers={"Idempotency-Key": "order-key-1"}))
    faults.clear()
    # MREC with home Region B: gapless ids are taken in B only; this worker runs in A
    now_global(worker[0], GlobalTableMode.MREC, (A, B), home=B)
    record = replay_once(*worker, queues, operation_id)
    assert (record["status"], record["result"]["error"]) == ("REJECTED", "unsupported_in_region_mode"), record
    assert invoke(app, api_event("GET", "/orders/latest"))[1] == {"orderId": None}


def test_a_deferred_ledger_append_whose_key_expired_before_its_replay_is_rejected(
    load_function: Callable[..., Any], table: str, queues: Queues, faults: Any, worker: tuple[Any, Any]
) -> None:
    from counters.services.ledgers import Ledgers
    from counters.store.ledger_items import new_key

    app = load_function("LedgerFunction", table, queues.urls, build=lambda s: Ledgers(s.table_name, retry=FAST))
    key = new_key(time.time() - 120)  # fresh for the API (its window is 600 s)
    faults.add("throttle", operations={"PutItem"}, limit=FAST.max_attempts)
    operation_id = deferred(app, api_event("POST", "/ledgers/l1/entries", {"amount": 7}, headers={"Idempotency-Key": key}))
    # replayed with a 60 s window: the key is older than it (as after a DLQ redrive past the window)
    settings = replace(worker[0].function.settings, retry_window=60.0)
    worker[0].function.configure(settings, worker[0].replayer(settings))
    record = replay_once(*worker, queues, operation_id)
    assert (record["status"], record["result"]["error"]) == ("REJECTED", "idempotency_key_expired"), record
    assert invoke(app, api_event("GET", "/ledgers/l1"))[1]["balance"] == 0
