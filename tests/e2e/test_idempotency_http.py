"""Idempotency-Key as draft-ietf-httpapi-idempotency-key-header-07 has it, route by route, over real
HTTP through the local stack (docs/retries.md#idempotency-keys has the table these tests follow):

* a required key missing (or empty): 400 ``idempotency_key_missing``, and nothing written;
* a key reused with another payload: 422 ``idempotency_key_reused``, and nothing written;
* the first request with the key still in flight: 409 ``idempotency_key_in_flight`` (only the
  atomic/occ reservation claim has such a state; every other route writes its key and its effect
  in one conditional write or transaction, so a twin finds either nothing or the answer);
* the published expiry: the ledger refuses a key older than its retry window (422
  ``idempotency_key_expired``).

The transfer routes need an MREC table: :func:`mrec_api` runs the local API with the template's
``GlobalTableMode=mrec`` on the session's DynamoDB Local (one table; this Region us-east-1).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from counters.core.regions import home_of
from counters.primitives.approaches import NAMES
from counters.primitives.ledger import new_key
from counters.services.reservations import CLAIM_SECONDS, reservation_id
from counters.store.resources_records import Status, record_put
from devstack.api import LocalApi
from devstack.template import read_stack
from tests.conftest import HTTP_TIMEOUT, RunningApi, item_count

pytestmark = pytest.mark.xdist_group("idempotency-http")  # one worker runs the module's MREC stack, not each

HERE, THERE = "us-east-1", "eu-west-1"  # the tests' AWS_REGION, and the other Region of the MREC table


def post(url: str, path: str, body: Any, key: str | None = None) -> requests.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return requests.post(f"{url}{path}", json=body, headers=headers, timeout=HTTP_TIMEOUT)


def new_resource(url: str, strategy: str, capacity: int = 10, **extra: Any) -> str:
    """A fresh resource; its id's home is this Region (HERE), so the MREC stack creates it too (an id
    homed in THERE is created only there: 409 wrong_region, docs/regions.md "Creations")."""
    rid = f"idem-{strategy}-{uuid.uuid4().hex[:8]}"
    while home_of(rid, (THERE, HERE)) != HERE:
        rid = f"idem-{strategy}-{uuid.uuid4().hex[:8]}"
    r = post(url, "/resources", {"resourceId": rid, "capacity": capacity, "strategy": strategy, **extra})
    assert r.status_code == 201, r.text
    return rid


def reserved(url: str, rid: str) -> int:
    return int(requests.get(f"{url}/resources/{rid}", timeout=HTTP_TIMEOUT).json()["reserved"])


@pytest.fixture(scope="module")
def mrec_api(ddb: Any, local_api: RunningApi) -> Iterator[str]:
    """The local API of this Region (us-east-1) of an MREC global table, on the session's table."""
    params = {"GlobalTableMode": "mrec", "ReplicaRegions": f"{THERE},{HERE}", "HomeRegion": HERE, "GlobalTableName": local_api.table}
    api = LocalApi(read_stack(local_api.table, params=params), "127.0.0.1", 0, concurrency=1)
    api.start()
    try:
        yield api.url
    finally:
        api.stop()


# ------------------------------------------------------------------------------ 400: a required key missing
ORDER: dict[str, Any] = {"customerId": "c1", "items": [{"sku": "s1", "quantity": 1}]}


@pytest.mark.parametrize("sent", [None, ""], ids=["absent", "empty"])
@pytest.mark.parametrize("route", ["orders", "ledger", "reservation-set", "reservation-crt", "transfer"])
def test_a_required_key_missing_is_a_400_that_writes_nothing(local_api: RunningApi, ddb: Any, route: str, sent: str | None) -> None:
    url, body = local_api.url, dict[str, Any]()
    if route == "orders":
        path, body = "/orders", ORDER
    elif route == "ledger":
        path, body = f"/ledgers/acct-{uuid.uuid4().hex[:8]}/entries", {"amount": 5}
    elif route == "transfer":  # required on every table: the key is checked before the table's mode (409 there before)
        path, body = f"/resources/{new_resource(url, 'set')}/transfers", {"to": THERE, "quantity": 1}
    else:
        path, body = f"/resources/{new_resource(url, route.split('-')[1])}/reservations", {"quantity": 1}
    before = item_count(ddb, local_api.table)
    r = post(url, path, body, sent)
    assert (r.status_code, r.json()["error"]) == (400, "idempotency_key_missing"), r.text
    assert "docs/retries.md#idempotency-keys" in r.json()["message"]  # the draft: point to the documentation
    assert item_count(ddb, local_api.table) == before


def test_a_key_is_optional_where_documented_so(local_api: RunningApi) -> None:
    """POST /posts (a postId makes re-sends safe too) and atomic/occ reservations take no key gladly."""
    url = local_api.url
    assert post(url, "/posts", {"authorId": "alice", "body": "no key"}).status_code == 201
    for strategy in ("atomic", "occ"):
        rid = new_resource(url, strategy)
        assert post(url, f"/resources/{rid}/reservations", {"quantity": 1}).status_code == 201
        assert reserved(url, rid) == 1


# ------------------------------------------------------------------------------ 422: reused with another payload
@pytest.mark.parametrize("strategy", NAMES)
def test_a_reservation_key_reused_with_another_quantity_is_a_422(local_api: RunningApi, strategy: str) -> None:
    url, key = local_api.url, f"k-{uuid.uuid4().hex[:8]}"
    rid = new_resource(url, strategy)
    first = post(url, f"/resources/{rid}/reservations", {"quantity": 2}, key)
    again = post(url, f"/resources/{rid}/reservations", {"quantity": 2}, key)
    assert (first.status_code, again.status_code, again.json()) == (201, 200, first.json())
    other = post(url, f"/resources/{rid}/reservations", {"quantity": 3}, key)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused"), other.text
    assert reserved(url, rid) == 2  # the 422 took nothing


def test_a_post_key_reused_for_another_post_is_a_422(local_api: RunningApi) -> None:
    url, key = local_api.url, f"k-{uuid.uuid4().hex[:8]}"
    first = post(url, "/posts", {"authorId": "alice", "body": "one"}, key)
    again = post(url, "/posts", {"authorId": "alice", "body": "one"}, key)
    assert (first.status_code, again.status_code, again.json()["postId"]) == (201, 200, first.json()["postId"])
    other = post(url, "/posts", {"authorId": "alice", "body": "two"}, key)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused"), other.text
    assert requests.get(f"{url}/posts/{first.json()['postId']}", timeout=HTTP_TIMEOUT).json()["body"] == "one"


def test_an_order_key_reused_with_another_body_is_a_422(local_api: RunningApi) -> None:
    url, key = local_api.url, f"k-{uuid.uuid4().hex[:8]}"
    first = post(url, "/orders", ORDER, key)
    again = post(url, "/orders", ORDER, key)
    assert (first.status_code, again.status_code, again.json()) == (201, 200, first.json())
    other = post(url, "/orders", {**ORDER, "items": [{"sku": "s1", "quantity": 2}]}, key)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused"), other.text


def test_a_ledger_key_reused_with_another_amount_is_a_422_and_an_old_key_expires(local_api: RunningApi) -> None:
    url, ledger, key = local_api.url, f"acct-{uuid.uuid4().hex[:8]}", new_key()
    path = f"/ledgers/{ledger}/entries"
    assert post(url, path, {"amount": 5}, key).status_code == 201
    other = post(url, path, {"amount": 6}, key)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused"), other.text
    # the published expiry: a key older than the retry window (600 s by default) is refused
    old = post(url, path, {"amount": 5}, new_key(at=time.time() - 3600))
    assert (old.status_code, old.json()["error"]) == (422, "idempotency_key_expired"), old.text
    assert requests.get(f"{url}/ledgers/{ledger}", timeout=HTTP_TIMEOUT).json()["balance"] == 5


def test_a_transfer_key_reused_with_another_quantity_or_target_is_a_422(mrec_api: str) -> None:
    url, key = mrec_api, f"k-{uuid.uuid4().hex[:8]}"
    rid = new_resource(url, "set", capacity=10, shares={HERE: 6, THERE: 4})
    first = post(url, f"/resources/{rid}/transfers", {"to": THERE, "quantity": 2}, key)
    assert first.status_code == 201, first.text
    assert (first.json()["from"], first.json()["to"], first.json()["quantity"]) == (HERE, THERE, 2)
    again = post(url, f"/resources/{rid}/transfers", {"to": THERE, "quantity": 2}, key)
    assert (again.status_code, again.json()) == (200, first.json())
    other = post(url, f"/resources/{rid}/transfers", {"to": THERE, "quantity": 3}, key)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused"), other.text
    missing = post(url, f"/resources/{rid}/transfers", {"to": THERE, "quantity": 2})
    assert (missing.status_code, missing.json()["error"]) == (400, "idempotency_key_missing"), missing.text
    view = requests.get(f"{url}/resources/{rid}", timeout=HTTP_TIMEOUT).json()
    assert view["inFlight"] == 2 and view["regions"][HERE]["available"] == 4, view  # one transfer, once


# ------------------------------------------------------------------------------ 409: the first request in flight
@pytest.mark.parametrize("strategy", ["atomic", "occ"])
def test_a_reservation_key_whose_first_request_is_in_flight_is_a_409(local_api: RunningApi, ddb: Any, strategy: str) -> None:
    """atomic/occ claim the key first (a PENDING record), take, then confirm. The claim is put here
    exactly as the first request puts it (the layer's own ``record_put``), and that request is
    still between its claim and its confirmation: a re-send answers 409 and takes nothing."""
    url, key = local_api.url, f"k-{uuid.uuid4().hex[:8]}"
    rid = new_resource(url, strategy)
    token = reservation_id(rid, key)
    fields = {"reservationId": token, "resourceId": rid, "strategy": strategy, "requestId": uuid.uuid4().hex, "idempotencyKey": key}
    ddb.put_item(**record_put(local_api.table, token, 2, None, fields, Status.PENDING).params())
    for quantity in (2, 3):  # the same request, and (still a 422) another quantity
        r = post(url, f"/resources/{rid}/reservations", {"quantity": quantity}, key)
        expected = (409, "idempotency_key_in_flight") if quantity == 2 else (422, "idempotency_key_reused")
        assert (r.status_code, r.json()["error"]) == expected, r.text
    assert reserved(url, rid) == 0
    # a claim older than CLAIM_SECONDS was left by a request that died: no longer in flight (500 outcome_unknown, as documented)
    stale = {**fields, "requestId": uuid.uuid4().hex}
    put = record_put(local_api.table, token, 2, None, stale, Status.PENDING).params()
    put["Item"]["createdAt"] = {"N": str(int(time.time()) - CLAIM_SECONDS - 60)}
    ddb.put_item(TableName=put["TableName"], Item=put["Item"])
    r = post(url, f"/resources/{rid}/reservations", {"quantity": 2}, key)
    assert (r.status_code, r.json()["error"]) == (500, "outcome_unknown"), r.text


# ------------------------------------------------------------------------------ transfers/receive agrees with transfers
def test_receive_answers_as_a_transfer_does(local_api: RunningApi, mrec_api: str) -> None:
    """Not MREC: 409 unsupported_in_region_mode, for an existing resource and a missing one alike
    (before: 200 {"credited": 0}, which told an operator to wait for transfers that cannot exist).
    MREC: 404 for a missing resource, as a transfer answers."""
    url = local_api.url
    rid = new_resource(url, "set")
    for resource in (rid, "no-such-resource"):
        sent = post(url, f"/resources/{resource}/transfers", {"to": THERE, "quantity": 1}, "k1")
        received = post(url, f"/resources/{resource}/transfers/receive", None)
        for r in (sent, received):
            assert (r.status_code, r.json()["error"]) == (409, "unsupported_in_region_mode"), r.text
    sent = post(mrec_api, "/resources/no-such-resource/transfers", {"to": THERE, "quantity": 1}, "k1")
    received = post(mrec_api, "/resources/no-such-resource/transfers/receive", None)
    assert (sent.status_code, received.status_code) == (404, 404), (sent.text, received.text)
    escrowed = new_resource(mrec_api, "set")
    assert post(mrec_api, f"/resources/{escrowed}/transfers/receive", None).json() == {"resourceId": escrowed, "credited": 0}
