"""AuthMode COGNITO through the handlers, in-process on moto: another user's object answers
exactly as a missing one, order keys are per caller, a ledger append is the owner's own act."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from counters.commands import Command, Operations
from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from tests.conftest import api_event, invoke, item_count

TABLE = "tally-auth-unit"
ALICE, BOB, ROOT = "alice-sub", "bob-sub", "root-sub"
ORDER = {"items": [{"sku": "book", "quantity": 1}]}


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AUTH_MODE", "COGNITO")
    from counters import dynamo

    with mock_aws():
        dynamo.reset_client()
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, read_stack(TABLE))
        yield client
        dynamo.reset_client()


@pytest.fixture
def fn(ddb: Any, load_function: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    def load(name: str) -> Any:
        module = load_function(name, TABLE)
        monkeypatch.setenv("AUTH_MODE", "COGNITO")  # the template's default is NONE
        return module

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
def test_another_users_reservation_answers_as_a_missing_one(fn: Any, ddb: Any, capsys: pytest.CaptureFixture[str]) -> None:
    app = fn("ReservationsFunction")
    assert call(app, ROOT, "POST", "/resources", {"resourceId": "seats", "capacity": 10, "strategy": "marker"})[0] == 201
    status, mine = call(app, ALICE, "POST", "/resources/seats/reservations", {"quantity": 3}, {"Idempotency-Key": "k1"})
    assert status == 201, mine
    rid, other = mine["reservationId"], "00000000-0000-0000-0000-000000000000"
    before = item_count(ddb, TABLE)
    capsys.readouterr()
    for method in ("GET", "DELETE"):
        missing = call(app, BOB, method, f"/resources/seats/reservations/{other}")
        assert_hidden(call(app, BOB, method, f"/resources/seats/reservations/{rid}"), missing, rid, other)
    assert '"refused"' in capsys.readouterr().out  # still logged as a refusal
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
    command = Command(op="place_order", payload={}, token="t")
    Operations(TABLE).record_pending(command, owner=ALICE)
    real, missing = command.operation_id, "0" * 32
    assert_hidden(call(app, BOB, "GET", f"/operations/{real}"), call(app, BOB, "GET", f"/operations/{missing}"), real, missing)
    assert call(app, ALICE, "GET", f"/operations/{real}")[0] == 200
    assert call(app, ROOT, "GET", f"/operations/{real}")[0] == 200
