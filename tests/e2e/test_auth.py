"""AuthMode COGNITO over real HTTP: the acting user comes from verified claims, never from the
path or body, and another user's objects are refused before anything is written: 403, or for
objects whose ids are computable (reservations, orders, operations) 404 exactly as if missing.

The local API stands in for API Gateway's Cognito authorizer (devstack.auth): it verifies the
token, refuses a bad one with 401 without calling the function, and passes the claims in
``requestContext.authorizer.claims``, so the functions run exactly as deployed. "Nothing
written" is checked on the whole table: a Scan before and after every refused request.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from counters.primitives.ledger import new_key
from devstack.auth import LocalUserPool
from devstack.stack import LocalStack
from tests.conftest import settled

# One worker runs the whole module (pytest -n, --dist loadgroup): its stack is module-scoped and
# its first test must meet the likes function's first transaction.
pytestmark = pytest.mark.xdist_group("auth-stack")

SECRET = "bola-test-secret"
ALICE, BOB = "3d1f2c4e-alice", "7a9b0c1d-bob"


class Client:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.headers = {"Authorization": token} if token else {}

    def __call__(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def stack(dynamodb_endpoint: str, sqs_endpoint: str) -> Iterator[LocalStack]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TALLY_DEV_TOKEN_SECRET", SECRET)
        # The first like transaction in the likes function is contended past its in-line budget,
        # so one request is deferred (202) and leaves an operation record owned by its caller.
        mp.setenv("DEVSTACK_FAULTS", json.dumps({"LikesFunction": [["conflict", {"operations": ["TransactWriteItems"], "limit": 2}]]}))
        running = LocalStack(
            dynamodb_endpoint,
            f"tally-auth-{random.randrange(10**6)}",
            port=0,
            concurrency=1,
            sqs_endpoint=sqs_endpoint,
            visibility_override=1,
            params={"AuthMode": "COGNITO", "InlineRetryAttempts": "2"},
        ).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def users(stack: LocalStack) -> dict[str, Client]:
    pool = LocalUserPool(SECRET.encode())
    url = stack.api.url
    return {
        "alice": Client(url, pool.issue(ALICE)),
        "bob": Client(url, pool.issue(BOB)),
        "admin": Client(url, pool.issue("0-admin", ["admin"])),
        "anonymous": Client(url, None),
    }


@pytest.fixture(scope="module")
def unchanged(stack: LocalStack, ddb: Any) -> Callable[[requests.Response], None]:
    """Sends nothing itself: wraps a refused request and asserts the table did not change."""

    def scan() -> list[dict[str, Any]]:
        items, start = [], None
        while True:
            page = ddb.scan(TableName=stack.table, ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
            items += page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))

    def at_rest() -> list[dict[str, Any]]:
        """The table once the stack's own work is done (an earlier test's deferred request applied
        by the worker, its stream records by the consumers: a lagging order pointer changed the
        table under a refused request at load 45), so only the request in between is compared."""
        while stack.queue_depth("RetryQueue"):
            time.sleep(0.1)
        assert stack.streams is not None
        stack.streams.wait_caught_up()
        return scan()

    class Guard:
        def __enter__(self) -> Guard:
            self.before = at_rest()
            return self

        def __exit__(self, *exc: Any) -> None:
            if exc[0] is None:
                assert at_rest() == self.before, "a refused request wrote to the table"

    return Guard  # type: ignore[return-value]


def refused(response: requests.Response, status: int = 403) -> None:
    assert response.status_code == status, response.text
    if status == 403:
        assert response.json()["error"] == "forbidden"


def hidden(response: requests.Response, missing: requests.Response, real_id: str, missing_id: str) -> None:
    """Another user's object answers exactly as a missing one: status, headers that matter, body."""
    assert response.status_code == missing.status_code == 404, (response.text, missing.text)
    assert response.headers["Content-Type"] == missing.headers["Content-Type"]
    assert response.json() == {**missing.json(), "message": missing.json()["message"].replace(missing_id, real_id)}


def test_operations_are_read_by_their_caller_only(users: dict[str, Client], unchanged: Any, stack: LocalStack) -> None:
    """Runs first in the module: the deferred like is the likes function's first transaction."""
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    assert alice("POST", "/posts", json={"postId": "op-post", "authorId": ALICE, "body": "b"}).status_code == 201
    deferred = alice("PUT", f"/posts/op-post/likes/{ALICE}")
    assert deferred.status_code == 202, deferred.text
    location = deferred.headers["Location"]
    # however long the retry worker's first cold start takes: done when the queue is empty
    record = settled(lambda: alice("GET", location).json(), lambda: stack.queue_depth("RetryQueue"))
    assert record["status"] == "APPLIED"
    with unchanged():  # after the worker is done with it: nothing else writes meanwhile
        real = location.rsplit("/", 1)[1]
        hidden(bob("GET", location), bob("GET", f"/operations/{'0' * 32}"), real, "0" * 32)
    assert admin("GET", location).status_code == 200


def test_no_token_or_a_bad_one_is_401_before_the_function_runs(users: dict[str, Client], unchanged: Any) -> None:
    url = users["alice"].url
    forged = LocalUserPool(b"another-secret").issue(ALICE)
    expired = LocalUserPool(SECRET.encode()).issue(ALICE, ttl=-1)
    for token in (None, "not-a-jwt", forged, expired):
        client = Client(url, token)
        with unchanged():
            r = client("POST", "/posts", json={"postId": "p401", "authorId": ALICE, "body": "b"})
            assert (r.status_code, r.json()) == (401, {"message": "Unauthorized"})
            assert client("PUT", f"/posts/p401/likes/{ALICE}").status_code == 401


def test_bob_cannot_like_or_unlike_as_alice(users: dict[str, Client], unchanged: Any) -> None:
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    with unchanged():
        refused(bob("POST", "/posts", json={"postId": "p1", "authorId": ALICE, "body": "in alice's name"}))
    assert alice("POST", "/posts", json={"postId": "p1", "authorId": ALICE, "body": "b"}).status_code == 201
    with unchanged():
        refused(bob("PUT", f"/posts/p1/likes/{ALICE}"))
        refused(admin("PUT", f"/posts/p1/likes/{ALICE}"))  # admins do not act in someone's name either
    assert alice("PUT", f"/posts/p1/likes/{ALICE}").json()["changed"] is True
    with unchanged():
        refused(bob("DELETE", f"/posts/p1/likes/{ALICE}"))
    assert bob("PUT", f"/posts/p1/likes/{BOB}").json()["changed"] is True
    assert alice("GET", "/posts/p1").json()["likeTally"] == 2
    with unchanged():
        refused(alice("GET", "/posts/p1/audit"))  # reads every like: admins only
        refused(alice("PUT", "/posts/p1/mode", json={"mode": "hot"}))  # changes how every like is counted
    assert admin("GET", "/posts/p1/audit").json()["drift"] == 0
    assert alice("DELETE", f"/posts/p1/likes/{ALICE}").json()["changed"] is True
    assert [liker["userId"] for liker in bob("GET", "/posts/p1/likes").json()["likers"]] == [BOB]


def test_bob_cannot_read_or_cancel_alices_reservation(users: dict[str, Client], unchanged: Any) -> None:
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    for strategy in ("marker", "crt"):
        resource = f"seats-{strategy}"
        with unchanged():
            refused(alice("POST", "/resources", json={"resourceId": resource, "capacity": 10, "strategy": strategy}))
        assert admin("POST", "/resources", json={"resourceId": resource, "capacity": 10, "strategy": strategy}).status_code == 201
        mine = alice("POST", f"/resources/{resource}/reservations", json={"quantity": 3}, headers={"Idempotency-Key": "k1"})
        assert mine.status_code == 201, mine.text
        rid = mine.json()["reservationId"]
        path = f"/resources/{resource}/reservations/{rid}"
        nobody = "00000000-0000-5000-8000-000000000000"
        with unchanged():
            for method in ("GET", "DELETE"):
                hidden(bob(method, path), bob(method, f"/resources/{resource}/reservations/{nobody}"), rid, nobody)
        # The same Idempotency-Key from another user is another reservation, never alice's.
        bobs = bob("POST", f"/resources/{resource}/reservations", json={"quantity": 3}, headers={"Idempotency-Key": "k1"})
        assert bobs.status_code == 201 and bobs.json()["reservationId"] != rid
        assert alice("GET", f"/resources/{resource}").json()["reserved"] == 6
        assert admin("GET", path).json()["status"] == "CONFIRMED"  # support may look
        assert alice("DELETE", path).json()["status"] == "RELEASED"
        assert alice("GET", f"/resources/{resource}").json()["reserved"] == 3


def test_bob_cannot_read_or_write_alices_ledger(users: dict[str, Client], unchanged: Any) -> None:
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    for ledger in (ALICE, f"{ALICE}.savings"):
        assert alice("POST", f"/ledgers/{ledger}/entries", json={"amount": 5}, headers={"Idempotency-Key": new_key()}).status_code == 201
        with unchanged():
            refused(bob("GET", f"/ledgers/{ledger}"))
            refused(bob("POST", f"/ledgers/{ledger}/entries", json={"amount": -5}, headers={"Idempotency-Key": new_key()}))
            refused(admin("POST", f"/ledgers/{ledger}/entries", json={"amount": -5}, headers={"Idempotency-Key": new_key()}))
            refused(alice("POST", f"/ledgers/{ledger}/compact"))  # compaction is an admin route
        assert alice("GET", f"/ledgers/{ledger}").json()["balance"] == 5
        assert admin("GET", f"/ledgers/{ledger}").json()["balance"] == 5
        assert admin("POST", f"/ledgers/{ledger}/compact").status_code == 200
    with unchanged():  # a ledger named after someone else, or sharing only a prefix, is not yours
        refused(alice("POST", f"/ledgers/{ALICE}x/entries", json={"amount": 1}, headers={"Idempotency-Key": new_key()}))


def test_orders_are_placed_for_and_read_by_their_customer(users: dict[str, Client], unchanged: Any) -> None:
    alice, bob, admin = users["alice"], users["bob"], users["admin"]
    order = {"customerId": ALICE, "items": [{"sku": "book", "quantity": 1}]}
    with unchanged():
        refused(bob("POST", "/orders", json=order, headers={"Idempotency-Key": "o1"}))
    placed = alice("POST", "/orders", json=order, headers={"Idempotency-Key": "o1"})
    assert placed.status_code == 201, placed.text
    path = placed.headers["Location"]
    with unchanged():
        real = path.rsplit("/", 1)[1]
        hidden(bob("GET", path), bob("GET", "/orders/999999"), real, "999999")
    assert alice("GET", path).json()["customerId"] == ALICE
    assert admin("GET", path).status_code == 200
    # Idempotency-Keys are per caller: bob's "o1" is bob's own order, not a 422 on alice's key.
    bobs = bob("POST", "/orders", json={"customerId": BOB, "items": [{"sku": "pen", "quantity": 2}]}, headers={"Idempotency-Key": "o1"})
    assert bobs.status_code == 201, bobs.text
    assert bobs.json()["orderId"] != placed.json()["orderId"]
    assert alice("POST", "/orders", json=order, headers={"Idempotency-Key": "o1"}).json() == placed.json()


def test_json_media_types_and_hostile_json_over_http(users: dict[str, Client], unchanged: Any) -> None:
    alice = users["alice"]
    for n, content_type in enumerate(("application/JSON", "application/vnd.api+json")):
        body = json.dumps({"postId": f"mt{n}", "authorId": ALICE, "body": "b"})
        r = alice("POST", "/posts", data=body, headers={"Content-Type": content_type})
        assert r.status_code == 201, r.text
    with unchanged():
        for body in ('{"postId": "h1", "authorId": "a", "body": "b", "n": ' + "9" * 5000 + "}", '{"a": ' + "[" * 3000 + "]" * 3000 + "}"):
            for path, headers in (("/posts", {}), (f"/ledgers/{ALICE}/entries", {"Idempotency-Key": new_key()})):
                r = alice("POST", path, data=body, headers={"Content-Type": "application/json", **headers})
                assert r.status_code == 400 and r.json()["error"] == "invalid_json", r.text


def test_only_an_admin_may_move_or_receive_a_share_of_capacity(users: dict[str, Client], unchanged: Any) -> None:
    """Issue 21's escrow routes: a signed-in stranger (or the resource's own customers) may not move
    a Region's share elsewhere or credit one; the refusal writes nothing."""
    admin = users["admin"]
    assert admin("POST", "/resources", json={"resourceId": "escrow-1", "capacity": 10, "strategy": "atomic"}).status_code == 201
    for who in ("alice", "bob"):
        with unchanged():
            refused(
                users[who](
                    "POST", "/resources/escrow-1/transfers", json={"to": "us-east-1", "quantity": 5}, headers={"Idempotency-Key": "t1"}
                )
            )
            refused(users[who]("POST", "/resources/escrow-1/transfers/receive"))
    with unchanged():
        refused(users["anonymous"]("POST", "/resources/escrow-1/transfers", json={"to": "us-east-1", "quantity": 5}), 401)


def test_every_operation_of_the_openapi_document_needs_a_token(users: dict[str, Client], unchanged: Any) -> None:
    """docs/openapi.json declares the ID token on every operation (and no anonymous alternative):
    with AuthMode=COGNITO each one answers 401 without a token, before its function runs."""
    import re

    from testkit.openapi import OUTPUT, SCHEME

    doc = json.loads(OUTPUT.read_text())
    anonymous = users["anonymous"]
    with unchanged():
        for path, operations in doc["paths"].items():
            concrete = re.sub(r"\{[^}]+\}", "1", path)
            for method, operation in operations.items():
                assert all(SCHEME in alternative for alternative in operation["security"]), (method, path)
                r = anonymous(method.upper(), concrete, json={} if method in ("post", "put") else None)
                assert (r.status_code, r.json()) == (401, {"message": "Unauthorized"}), (method, path, r.text)
