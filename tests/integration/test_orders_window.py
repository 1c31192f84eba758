"""An order key is honoured for the key window (``IdempotencyWindowDays``, default 31 days), over
real HTTP on the local stack, in every Region mode, with a clock the test moves (testkit.clock:
the functions' processes read it; nothing sleeps).

Expiry is emulated on the moved clock as each mode has it: DynamoDB TTL (one Region, MREC) by
:func:`testkit.clock.ttl_pass`, the expiry sweeper on MRSC (no TTL). With the key record's old
24-hour lifetime, the re-send 25 hours later found its record deleted and placed a second order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from counters.core import clock as layer_clock
from counters.primitives.expiry import ExpirySweeper
from counters.store.sequences import idempotency_key, order_key
from devstack.api import LocalApi
from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from testkit.clock import MovableClock, ttl_pass
from tests.conftest import HTTP_TIMEOUT

pytestmark = pytest.mark.xdist_group("orders-window")

HOUR, DAY = 3600, 24 * 3600
MODES: dict[str, dict[str, str]] = {
    "none": {},
    "mrec": {"GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "us-east-1"},
    "mrsc": {"GlobalTableMode": "mrsc", "ReplicaRegions": "eu-west-1,us-east-1,us-west-2", "HomeRegion": "us-east-1"},
}


@dataclass
class Stack:
    mode: str
    url: str
    table: str
    clock: MovableClock
    ddb: Any

    def expire(self) -> int:
        """What deletes expired items in this mode, run at the moved clock's time."""
        if self.mode == "mrsc":
            sweeper = ExpirySweeper(self.table, clock=self.clock.now)
            return sweeper.sweep().deleted
        return ttl_pass(self.ddb, self.table, self.clock.now())

    def stored(self, key: dict[str, str]) -> bool:
        return "Item" in self.ddb.get_item(TableName=self.table, Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True)

    def order(self, key: str, body: dict[str, Any]) -> requests.Response:
        return requests.post(f"{self.url}/orders", json=body, headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT)


@pytest.fixture(scope="module", params=sorted(MODES))
def stack(request: pytest.FixtureRequest, ddb: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """This Region's local API (us-east-1) on a table of its own, in the mode, reading a movable clock."""
    mode = request.param
    table = f"tally-window-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(table))
    params = {**MODES[mode], "GlobalTableName": table} if MODES[mode] else {}
    clock = MovableClock(Path(tmp_path_factory.mktemp("clock")) / "offset")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in clock.environment().items():
            mp.setenv(name, value)  # the API's worker processes inherit it
        api = LocalApi(read_stack(table, params=params), "127.0.0.1", 0, concurrency=1)
        api.start()
        try:
            yield Stack(mode, api.url, table, clock, ddb)
        finally:
            api.stop()
            layer_clock.use(None)
            ddb.delete_table(TableName=table)


def body(customer: str = "c1", quantity: int = 1) -> dict[str, Any]:
    return {"customerId": customer, "items": [{"sku": "s1", "quantity": quantity}]}


def test_an_order_key_resent_after_25_hours_answers_the_first_order(stack: Stack) -> None:
    key = f"late-{uuid.uuid4().hex[:8]}"
    first = stack.order(key, body())
    assert first.status_code == 201, first.text
    stack.clock.advance(25 * HOUR)
    stack.expire()
    again = stack.order(key, body())
    assert (again.status_code, again.json()) == (200, first.json()), f"{stack.mode}: {again.text}"


def test_past_the_window_the_key_is_refused_until_expiry_deletes_it_and_the_order_stays(stack: Stack) -> None:
    key = f"old-{uuid.uuid4().hex[:8]}"
    first = stack.order(key, body(customer="c2"))
    assert first.status_code == 201, first.text
    order_id = first.json()["orderId"]
    stack.clock.advance(30 * DAY)
    stack.expire()
    assert stack.stored(idempotency_key(key))  # day 30: the record stays, and answers
    assert stack.order(key, body(customer="c2")).json() == first.json()
    stack.clock.advance(DAY + HOUR)  # day 31 + 1 h: past the window, the record not yet deleted
    late = stack.order(key, body(customer="c2"))
    assert (late.status_code, late.json()["error"]) == (422, "idempotency_key_expired"), late.text
    assert "31 days" in late.json()["message"]
    assert stack.stored(idempotency_key(key))
    assert stack.expire() >= 1
    assert not stack.stored(idempotency_key(key))
    assert stack.stored(order_key(order_id))  # the order itself is never deleted
    assert requests.get(f"{stack.url}/orders/{order_id}", timeout=HTTP_TIMEOUT).json() == first.json()
    fresh = stack.order(key, body(customer="c2"))  # a key nobody remembers: a new order (keys carry no time)
    assert fresh.status_code == 201 and fresh.json()["orderId"] != order_id, fresh.text
