"""A re-send after an unknown outcome answers the first request's final outcome, never a 5xx.

Each test lets the first request's writes commit and lose their answers (testkit's ``after_commit``
fault) until its in-line budget runs out, so the client only learns 202 (deferred) and cannot tell
whether anything happened; then it re-sends the same key, before and after the retry worker
settles the deferred command. The answer is the effect the first request made (the same order, the
same reservation, counted once), and the operation record ends final with that same result.
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.services.orders import Orders
from counters.services.reservations import Reservations
from counters.store.sequences import order_id_from_pk
from tests.conftest import Queues, api_event, invoke
from tests.integration.test_retries import drain

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


def orders_stored(ddb: Any, table: str) -> list[int]:
    """The ids of every ORDER#<n> item in the table (its key records are ORDERKEY#, not orders)."""
    ids = []
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True, ProjectionExpression="PK"):
        ids += [n for n in (order_id_from_pk(i["PK"]["S"]) for i in page["Items"]) if n is not None]
    return ids


ORDER = {"customerId": "c1", "items": [{"sku": "s1", "quantity": 2}]}


def test_an_order_whose_commit_lost_its_answer_is_answered_on_resend_and_by_its_operation(
    load_function: Any, table: str, queues: Queues, faults: Any, ddb: Any
) -> None:
    orders = load_function("OrdersFunction", table, queues.urls, build=lambda s: Orders(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, deferred = invoke(orders, api_event("POST", "/orders", ORDER, headers={"Idempotency-Key": "lost-1"}))
    assert (status, deferred["status"]) == (202, "PENDING"), deferred
    assert faults.injected["after_commit"] == FAST.max_attempts  # every attempt committed (or replayed) and lost its answer
    status, again = invoke(orders, api_event("POST", "/orders", ORDER, headers={"Idempotency-Key": "lost-1"}))
    assert status == 200, again  # the first request's order, not a 5xx and not a second order
    assert (again["customerId"], again["items"]) == (ORDER["customerId"], ORDER["items"])
    drain(queues, worker)
    record = invoke(operations, api_event("GET", f"/operations/{deferred['operationId']}"))
    assert record[0] == 200 and record[1]["status"] == "APPLIED", record  # the deferred request's own order
    assert record[1]["result"]["orderId"] == again["orderId"]
    status, last = invoke(orders, api_event("POST", "/orders", ORDER, headers={"Idempotency-Key": "lost-1"}))
    assert (status, last) == (200, again)
    assert orders_stored(ddb, table) == [again["orderId"]]


def test_an_operation_whose_outcome_write_lost_its_answer_ends_final(
    load_function: Any, table: str, queues: Queues, faults: Any, ddb: Any
) -> None:
    """The deferred path: the worker's own writes (the order's, then the outcome's) commit and lose
    their answers; the operation still ends APPLIED with the order the key answers."""
    orders = load_function("OrdersFunction", table, queues.urls, build=lambda s: Orders(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    faults.add("throttle", operations={"UpdateItem", "TransactWriteItems"}, limit=FAST.max_attempts)
    status, deferred = invoke(orders, api_event("POST", "/orders", ORDER, headers={"Idempotency-Key": "lost-2"}))
    assert (status, deferred["status"]) == (202, "PENDING"), deferred
    faults.add("after_commit", operations={"UpdateItem", "TransactWriteItems"}, rate=0.5, limit=6)
    drain(queues, worker, deliveries=2)
    record = invoke(operations, api_event("GET", f"/operations/{deferred['operationId']}"))[1]
    assert record["status"] == "APPLIED", record
    status, again = invoke(orders, api_event("POST", "/orders", ORDER, headers={"Idempotency-Key": "lost-2"}))
    assert (status, again["orderId"]) == (200, record["result"]["orderId"])
    assert orders_stored(ddb, table) == [again["orderId"]]


@pytest.mark.parametrize("strategy", ["marker", "crt", "set", "occ_history"])
def test_a_reservation_whose_commit_lost_its_answer_is_answered_on_resend_and_counted_once(
    strategy: str, load_function: Any, table: str, queues: Queues, faults: Any
) -> None:
    reservations = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    created = invoke(reservations, api_event("POST", "/resources", {"resourceId": "r1", "capacity": 10, "strategy": strategy}))
    assert created[0] == 201, created
    faults.add("after_commit", operations={"TransactWriteItems", "UpdateItem", "PutItem"}, limit=FAST.max_attempts)
    path, headers = "/resources/r1/reservations", {"Idempotency-Key": "lost-3"}
    status, first = invoke(reservations, api_event("POST", path, {"quantity": 3}, headers=headers))
    assert status in (201, 202), first
    status, again = invoke(reservations, api_event("POST", path, {"quantity": 3}, headers=headers))
    assert status in (200, 201), again  # the first request's reservation, never a 5xx
    drain(queues, worker)
    if first.get("status") == "PENDING":
        record = invoke(operations, api_event("GET", f"/operations/{first['operationId']}"))[1]
        assert record["status"] in ("APPLIED", "DUPLICATE"), record
        assert record["result"]["reservationId"] == again["reservationId"]
    assert invoke(reservations, api_event("GET", "/resources/r1"))[1]["reserved"] == 3
    assert invoke(reservations, api_event("POST", path, {"quantity": 3}, headers=headers))[1] == again
