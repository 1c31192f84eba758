"""Reservations API through the handler, against DynamoDB Local: every route, every strategy."""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.primitives.approaches import NAMES, names
from counters.services.reservations import Reservations
from tests.conftest import api_event, invoke, item_count

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
STRATEGIES = list(NAMES)
KEYED = set(names(keyed=True))


@pytest.fixture
def res_app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("ReservationsFunction", table, build=lambda s: Reservations(table, retry=FAST))


def post(app: Any, path: str, body: Any, key: str | None = None) -> tuple[int, Any]:
    return invoke(app, api_event("POST", path, body, headers={"Idempotency-Key": key} if key else None))


def resource(app: Any, rid: str = "r1") -> dict[str, Any]:
    status, body = invoke(app, api_event("GET", f"/resources/{rid}"))
    assert status == 200, body
    return body


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_route_on_every_strategy(strategy: str, res_app: Any, ddb: Any, table: str) -> None:
    status, body = post(res_app, "/resources", {"resourceId": "r1", "capacity": 5, "strategy": strategy})
    assert (status, body) == (201, {"resourceId": "r1", "capacity": 5, "reserved": 0, "available": 5, "strategy": strategy, "shards": 1})
    assert post(res_app, "/resources", {"resourceId": "r1", "capacity": 9, "strategy": "crt"})[1]["error"] == "already_exists"

    status, body = post(res_app, "/resources/r1/reservations", {"quantity": 1})
    if strategy in KEYED:
        assert (status, body["error"]) == (400, "idempotency_key_missing")  # was invalid_request (docs/retries.md#idempotency-keys)
        assert "Idempotency-Key" in body["message"]
    else:
        assert status == 201 and body["status"] == "CONFIRMED"
        assert invoke(res_app, api_event("DELETE", f"/resources/r1/reservations/{body['reservationId']}"))[0] == 200

    status, first = post(res_app, "/resources/r1/reservations", {"quantity": 3}, key="order-1")
    assert status == 201 and first["quantity"] == 3 and first["status"] == "CONFIRMED"
    assert post(res_app, "/resources/r1/reservations", {"quantity": 3}, key="order-1") == (200, first)
    status, body = post(res_app, "/resources/r1/reservations", {"quantity": 2}, key="order-1")
    assert (status, body["error"]) == (422, "idempotency_key_reused")
    status, body = post(res_app, "/resources/r1/reservations", {"quantity": 3}, key="order-2")
    assert (status, body["error"]) == (409, "insufficient_capacity")
    assert resource(res_app) == {"resourceId": "r1", "capacity": 5, "reserved": 3, "available": 2, "strategy": strategy, "shards": 1}

    rid = first["reservationId"]
    status, body = invoke(res_app, api_event("GET", f"/resources/r1/reservations/{rid}"))
    assert status == 200 and body["quantity"] == 3 and body["status"] == "CONFIRMED" and body["resourceId"] == "r1"
    assert invoke(res_app, api_event("DELETE", f"/resources/r1/reservations/{rid}")) == (
        200,
        {"reservationId": rid, "quantity": 3, "status": "RELEASED", "changed": True},
    )
    assert invoke(res_app, api_event("DELETE", f"/resources/r1/reservations/{rid}"))[1]["changed"] is False
    assert resource(res_app)["reserved"] == 0 and resource(res_app)["available"] == 5
    assert invoke(res_app, api_event("GET", f"/resources/r1/reservations/{rid}"))[1]["status"] == "RELEASED"
    assert invoke(res_app, api_event("GET", "/resources/r1/reservations/nope"))[0] == 404
    assert invoke(res_app, api_event("DELETE", "/resources/r1/reservations/nope"))[0] == 404
    assert invoke(res_app, api_event("GET", "/resources/nope"))[0] == 404
    assert post(res_app, "/resources/nope/reservations", {"quantity": 1}, key="k")[0] == 404


def test_bad_input_is_400_and_writes_nothing(res_app: Any, ddb: Any, table: str) -> None:
    cases = [
        {"resourceId": "r1", "capacity": -1, "strategy": "crt"},
        {"resourceId": "r1", "capacity": 1, "strategy": "ledger"},
        {"resourceId": "r#1", "capacity": 1, "strategy": "crt"},
        {"resourceId": "r1", "capacity": "5", "strategy": "crt"},
        {"resourceId": "r1", "capacity": 5, "strategy": "crt", "shards": 0},
        {"resourceId": "r1", "capacity": 5, "strategy": "occ", "shards": 2},  # occ is not shardable
        {"resourceId": "r1", "capacity": 5, "strategy": "set", "shards": 2},
    ]
    for body in cases:
        status, answer = post(res_app, "/resources", body)
        assert status == 400, (body, answer)
    assert item_count(ddb, table) == 0
    post(res_app, "/resources", {"resourceId": "r1", "capacity": 5, "strategy": "crt"})
    for body in ({"quantity": 0}, {"quantity": "1"}, {"quantity": 1, "x": 1}, {}):
        assert post(res_app, "/resources/r1/reservations", body, key="k")[0] == 400
    assert post(res_app, "/resources/r1/reservations", {"quantity": 1}, key="has space")[0] == 400
    assert item_count(ddb, table) == 1


@pytest.mark.parametrize("strategy", names(shardable=True))
def test_sharded_resource_falls_back_and_splits_in_one_transaction(strategy: str, res_app: Any, ddb: Any, table: str) -> None:
    status, body = post(res_app, "/resources", {"resourceId": "r1", "capacity": 10, "strategy": strategy, "shards": 3})
    assert status == 201 and body["shards"] == 3
    shards = [ddb.get_item(TableName=table, Key={"PK": {"S": f"RES#r1#{n}"}, "SK": {"S": "SHARD"}})["Item"] for n in range(3)]
    assert [int(s["available"]["N"]) for s in shards] == [4, 3, 3]
    assert post(res_app, "/resources/r1/reservations", {"quantity": 3}, key="a")[0] == 201
    assert post(res_app, "/resources/r1/reservations", {"quantity": 3}, key="b")[0] == 201
    # 4 left, at most 4 / 1 or 3 / 1 per shard... whatever the layout, 4 fits only as a whole:
    status, body = post(res_app, "/resources/r1/reservations", {"quantity": 4}, key="c")
    assert status == 201, body
    rec = ddb.get_item(TableName=table, Key={"PK": {"S": f"RSV#{body['reservationId']}"}, "SK": {"S": "RSV"}})["Item"]
    assert sum(int(v["N"]) for v in rec["allocation"]["M"].values()) == 4
    assert resource(res_app) == {"resourceId": "r1", "capacity": 10, "reserved": 10, "available": 0, "strategy": strategy, "shards": 3}
    assert post(res_app, "/resources/r1/reservations", {"quantity": 1}, key="d")[1]["error"] == "insufficient_capacity"
    # release the split one: every shard gets its part back
    assert invoke(res_app, api_event("DELETE", f"/resources/r1/reservations/{body['reservationId']}"))[1]["changed"] is True
    assert resource(res_app)["available"] == 4
    assert post(res_app, "/resources/r1/reservations", {"quantity": 4}, key="e")[0] == 201
    assert post(res_app, "/resources/r1/reservations", {"quantity": 4}, key="e")[0] == 200
    assert resource(res_app)["reserved"] == 10


@pytest.mark.parametrize("strategy", ["atomic", "occ_history", "crt", "marker", "set"])
def test_concurrent_same_key_creates_one_reservation_and_concurrent_releases_give_back_once(
    strategy: str, layer_client: Any, ddb: Any, table: str
) -> None:
    """16 clients send the same Idempotency-Key at once: exactly one 201, the rest replay it
    (the record's attribute_not_exists decides); then 16 clients release it at once: the
    quantity comes back exactly once (the record's CONFIRMED -> RELEASED condition decides)."""
    from concurrent.futures import ThreadPoolExecutor

    from counters.services.reservations import Reservations

    service = Reservations(table, retry=RetryPolicy(max_attempts=12, base_delay=0.001, max_delay=0.01))
    service.create_resource("r1", capacity=10, strategy=strategy)
    if strategy == "atomic":  # atomic does not recognise concurrent twins (documented): one reservation only
        answers = [service.reserve("r1", 3, "same-key")]
    else:
        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(lambda _: service.reserve("r1", 3, "same-key"), range(16)))
    assert sum(a.created for a in answers) == 1
    assert len({a.body["reservationId"] for a in answers}) == 1
    assert service.get_resource("r1")["reserved"] == 3
    rid = answers[0].body["reservationId"]
    with ThreadPoolExecutor(max_workers=16) as pool:
        releases = list(pool.map(lambda _: service.release("r1", rid), range(16)))
    assert sum(r.created for r in releases) == 1
    assert service.get_resource("r1")["reserved"] == 0


def test_ambiguous_is_a_500_outcome_unknown_and_contention_a_503(res_app: Any, faults: Any, ddb: Any, table: str) -> None:
    post(res_app, "/resources", {"resourceId": "a1", "capacity": 5, "strategy": "atomic"})
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    status, body = post(res_app, "/resources/a1/reservations", {"quantity": 2}, key="k1")
    assert (status, body["error"]) == (500, "outcome_unknown")  # ATOMIC_POLICY=under: not re-sent
    assert "may or may not" in body["message"]
    assert resource(res_app, "a1")["reserved"] == 2  # it did apply, once; no record was written
    post(res_app, "/resources", {"resourceId": "c1", "capacity": 5, "strategy": "crt"})
    faults.add("throttle", operations={"TransactWriteItems"})
    status, body = post(res_app, "/resources/c1/reservations", {"quantity": 2}, key="k1")
    assert (status, body["error"]) == (503, "contention")
    faults.clear()
    assert post(res_app, "/resources/c1/reservations", {"quantity": 2}, key="k1")[0] == 201  # re-drive: safe
    assert resource(res_app, "c1")["reserved"] == 2
