"""AuthMode COGNITO through the handlers, in-process on moto: another user's object answers
exactly as a missing one, order keys are per caller, a ledger append is the owner's own act."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from counters.core.commands import Command
from counters.core.errors import ContentionError
from counters.core.outcome import Outcome, Result
from counters.deferral.operations import Operations
from counters.primitives.ledger import new_key
from counters.services.orders import Orders
from tests.conftest import api_event, invoke, item_count, moto_table

TABLE = "tally-auth-unit"
ALICE, BOB, ROOT = "alice-sub", "bob-sub", "root-sub"
ORDER = {"items": [{"sku": "book", "quantity": 1}]}


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AUTH_MODE", "COGNITO")
    with moto_table(monkeypatch, TABLE) as client:
        yield client


@pytest.fixture
def fn(ddb: Any, load_function: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    def load(name: str) -> Any:
        return load_function(name, TABLE, params={"AuthMode": "COGNITO"})  # the template's default is NONE

    return load


def call(module: Any, user: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    event = api_event(method, path, body, headers=headers)
    claims = {"sub": user, **({"cognito:groups": "admin"} if user == ROOT else {})}
    event["requestContext"]["authorizer"] = {"claims": claims}
    return invoke(module, event)


def assert_hidden(answer: tuple[int, Any], missing: tuple[int, Any], real_id: str, missing_id: str) -> None:
    """Someone else's object: the same status and body as a missing one (ids aside)."""
    assert answer[0] == missing[0] == 404, (answer, missing)
    assert answer[1] == {**missing[1], "message": missing[1]["message"].replace(missing_id, real_id)}


# --------------------------------------------------------------------------------------- 8b
def test_another_users_reservation_answers_as_a_missing_one(fn: Any, ddb: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = fn("ReservationsFunction")
    assert call(app, ROOT, "POST", "/resources", {"resourceId": "seats", "capacity": 10, "strategy": "marker"})[0] == 201
    status, mine = call(app, ALICE, "POST", "/resources/seats/reservations", {"quantity": 3}, {"Idempotency-Key": "k1"})
    assert status == 201, mine
    rid, other = mine["reservationId"], "00000000-0000-0000-0000-000000000000"
    before = item_count(ddb, TABLE)
    caplog.clear()
    for method in ("GET", "DELETE"):
        missing = call(app, BOB, method, f"/resources/seats/reservations/{other}")
        assert_hidden(call(app, BOB, method, f"/resources/seats/reservations/{rid}"), missing, rid, other)
    # still logged as a refusal (caplog, not stdout: Powertools binds its stream once per process)
    assert any(r.getMessage() == "refused" for r in caplog.records)
    assert item_count(ddb, TABLE) == before
    assert call(app, ALICE, "GET", "/resources/seats")[1]["reserved"] == 3
    assert call(app, ROOT, "GET", f"/resources/seats/reservations/{rid}")[0] == 200  # admins may read
    assert call(app, ALICE, "POST", "/resources", {"resourceId": "s2", "capacity": 1, "strategy": "marker"})[0] == 403  # admin route


def test_another_users_order_answers_as_a_missing_one(fn: Any) -> None:
    app = fn("OrdersFunction")
    status, order = call(app, ALICE, "POST", "/orders", {"customerId": ALICE, **ORDER}, {"Idempotency-Key": "o1"})
    assert status == 201, order
    real, missing = str(order["orderId"]), "999"
    assert_hidden(call(app, BOB, "GET", f"/orders/{real}"), call(app, BOB, "GET", f"/orders/{missing}"), real, missing)
    assert call(app, ROOT, "GET", f"/orders/{real}")[0] == 200


def test_another_users_operation_answers_as_a_missing_one(fn: Any) -> None:
    app = fn("OperationsFunction")
    command = Command(op="place_order", payload={})
    Operations(TABLE).record_pending(command, owner=ALICE)
    real, missing = command.operation_id, "0" * 32
    assert_hidden(call(app, BOB, "GET", f"/operations/{real}"), call(app, BOB, "GET", f"/operations/{missing}"), real, missing)
    assert call(app, ALICE, "GET", f"/operations/{real}")[0] == 200
    assert call(app, ROOT, "GET", f"/operations/{real}")[0] == 200


# --------------------------------------------------------------------------------------- 8a
def test_order_idempotency_keys_are_per_caller(fn: Any) -> None:
    app = fn("OrdersFunction")
    status, alices = call(app, ALICE, "POST", "/orders", {"customerId": ALICE, **ORDER}, {"Idempotency-Key": "shared"})
    assert status == 201
    # bob's request with alice's key is bob's own order: no 422 telling him the key is taken
    status, bobs = call(
        app, BOB, "POST", "/orders", {"customerId": BOB, "items": [{"sku": "pen", "quantity": 2}]}, {"Idempotency-Key": "shared"}
    )
    assert status == 201, bobs
    assert bobs["orderId"] != alices["orderId"]
    # and each replay still answers its own caller's order
    assert call(app, ALICE, "POST", "/orders", {"customerId": ALICE, **ORDER}, {"Idempotency-Key": "shared"}) == (200, alices)
    status, again = call(
        app, BOB, "POST", "/orders", {"customerId": BOB, "items": [{"sku": "pen", "quantity": 2}]}, {"Idempotency-Key": "shared"}
    )
    assert (status, again["orderId"]) == (200, bobs["orderId"])


def test_a_deferred_order_replays_under_its_callers_key(fn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    app = fn("OrdersFunction")
    assert call(app, ALICE, "POST", "/orders", {"customerId": ALICE, **ORDER}, {"Idempotency-Key": "shared"})[0] == 201
    orders = Orders(TABLE)
    with monkeypatch.context() as mp:  # the id claim is contended past its budget: the request is deferred
        mp.setattr(
            orders.sequence,
            "claim",
            lambda _items: SimpleNamespace(result=Result(Outcome.CONTENTION, attempts=3), value=None, conflicts={}),
        )
        with pytest.raises(ContentionError) as contended:
            orders.place(key="shared", customer_id=BOB, items=[{"sku": "pen", "quantity": 2}], owner=BOB)
    command = contended.value.command
    assert command.payload["owner"] == BOB
    replay = orders.replayables()[command.op]
    verdict = replay.run(command)
    assert (verdict.status, verdict.result["customerId"]) == ("APPLIED", BOB)  # bob's own order, not a 422 on alice's key
    assert replay.run(command) == verdict  # a redelivery of the same request: still its own order (APPLIED)
    other = Command(command.op, command.payload)  # another request with the same key: the order already held
    assert replay.run(other).status == "DUPLICATE"


# --------------------------------------------------------------------------------------- 8c
def test_admins_read_but_never_append_to_another_users_ledger(fn: Any, ddb: Any) -> None:
    app = fn("LedgerFunction")
    assert call(app, ALICE, "POST", f"/ledgers/{ALICE}/entries", {"amount": 5}, {"Idempotency-Key": new_key()})[0] == 201
    before = item_count(ddb, TABLE)
    for ledger in (ALICE, f"{ALICE}.savings"):
        status, body = call(app, ROOT, "POST", f"/ledgers/{ledger}/entries", {"amount": -5}, {"Idempotency-Key": new_key()})
        assert (status, body["error"]) == (403, "forbidden")
    assert item_count(ddb, TABLE) == before
    assert call(app, ROOT, "GET", f"/ledgers/{ALICE}")[1]["balance"] == 5
    assert call(app, ROOT, "POST", f"/ledgers/{ROOT}/entries", {"amount": 1}, {"Idempotency-Key": new_key()})[0] == 201  # their own
