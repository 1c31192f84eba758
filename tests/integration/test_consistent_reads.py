"""Every read the contracts declare strong (their ``READS``, docs/consistency.md) never misses an
acknowledged write: the write, then at once the read, from another client.

DynamoDB Local answers every read strongly consistent, so the in-process rows also answer each
eventually consistent read (one without ``ConsistentRead``) as AWS may right after a write: as if
the write had not reached the replica that serves it yet (the item absent). A strong route that
leaned on such a read would miss the write here; the HTTP rows show the same over the local API,
whose functions run in their own processes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from counters.store.ledger_items import new_key
from counters.store.operations import OperationRecords
from testkit.openapi import reads
from tests.conftest import HTTP_TIMEOUT, RunningApi, api_event, invoke

ROUNDS = 12
FUNCTIONS = {"posts": "LikesFunction", "ledgers": "LedgerFunction", "orders": "OrdersFunction", "operations": "OperationsFunction"}
STRONG = {route for route, read in reads().items() if read.strong}
EMPTY = {"GetItem": {}, "Query": {"Items": [], "Count": 0, "ScannedCount": 0}, "Scan": {"Items": [], "Count": 0, "ScannedCount": 0}}


class StaleReads:
    """Answers every eventually consistent read of ``client`` as not having seen any write yet."""

    def __init__(self, client: Any) -> None:
        self.client, self.on, self.answered = client, False, 0
        client.meta.events.register_first("before-call.dynamodb", self._before, unique_id=f"stale-{id(self)}")

    def _before(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        import json

        if not self.on or model.name not in (*EMPTY, "BatchGetItem"):
            return None
        body = json.loads(params.get("body") or b"{}")
        if model.name == "BatchGetItem":
            if all(spec.get("ConsistentRead") for spec in body.get("RequestItems", {}).values()):
                return None
            parsed: dict[str, Any] = {"Responses": {t: [] for t in body["RequestItems"]}, "UnprocessedKeys": {}}
        elif body.get("ConsistentRead"):
            return None
        else:
            parsed = dict(EMPTY[model.name])
        self.answered += 1
        return _Http(), {**parsed, "ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 0}}

    def detach(self) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", unique_id=f"stale-{id(self)}")


class _Http:
    status_code = 200
    headers: dict[str, str] = {}
    content = b""
    raw = None


@pytest.fixture
def stale(layer_client: Any) -> Iterator[StaleReads]:
    injector = StaleReads(layer_client)
    yield injector
    injector.detach()


Call = Callable[[str, str, Any, dict[str, str] | None], tuple[int, Any]]


def scenarios(write: Call, read: Call) -> Iterator[str]:
    """Each strongly consistent route, read right after the write it must see; yields the route read."""
    n = uuid.uuid4().hex[:8]
    post = f"c-{n}"
    assert write("POST", "/posts", {"postId": post, "authorId": "alice", "body": "hi"}, None)[0] == 201
    assert write("PUT", f"/posts/{post}/likes/u1", None, None) == (200, {"postId": post, "userId": "u1", "liked": True, "changed": True})
    assert read("GET", f"/posts/{post}", None, None)[1]["likeTally"] == 1
    yield "GET /posts/{postId}"
    assert read("GET", f"/posts/{post}/likes/u1", None, None) == (200, {"postId": post, "userId": "u1", "liked": True})
    yield "GET /posts/{postId}/likes/{userId}"
    assert read("GET", f"/posts/{post}/audit", None, None)[1] == {"postId": post, "stored": 1, "counted": 1, "drift": 0, "reason": None}
    yield "GET /posts/{postId}/audit"
    ledger = f"acct-{n}"
    assert write("POST", f"/ledgers/{ledger}/entries", {"amount": 7}, {"Idempotency-Key": new_key()})[0] == 201
    assert read("GET", f"/ledgers/{ledger}", None, None)[1]["balance"] == 7
    yield "GET /ledgers/{ledgerId}"
    status, order = write("POST", "/orders", {"customerId": "alice", "items": [{"sku": "s1", "quantity": 1}]}, {"Idempotency-Key": n})
    assert status == 201, order
    assert read("GET", f"/orders/{order['orderId']}", None, None) == (200, order)
    yield "GET /orders/{orderId}"
    for shards in (1, 4):
        resource = f"r{shards}-{n}"
        assert write("POST", "/resources", {"resourceId": resource, "capacity": 10, "strategy": "marker", "shards": shards}, None)[0] == 201
        status, taken = write("POST", f"/resources/{resource}/reservations", {"quantity": 3}, {"Idempotency-Key": n})
        assert status == 201, taken
        assert read("GET", f"/resources/{resource}", None, None)[1]["reserved"] == 3, shards
        yield "GET /resources/{resourceId}"
        assert read("GET", f"/resources/{resource}/reservations/{taken['reservationId']}", None, None)[1]["status"] == "CONFIRMED"
        yield "GET /resources/{resourceId}/reservations/{reservationId}"


def test_each_strong_read_sees_the_write_it_follows_in_process(load_function: Any, table: str, stale: StaleReads) -> None:
    modules: dict[str, Any] = {}

    def module(path: str) -> Any:
        family = path.split("/")[1]
        name = FUNCTIONS.get(family, "ReservationsFunction")
        if name not in modules:
            modules[name] = load_function(name, table)
        return modules[name]

    def write(method: str, path: str, body: Any, headers: dict[str, str] | None) -> tuple[int, Any]:
        stale.on = False
        return invoke(module(path), api_event(method, path, body, headers=headers))

    def read(method: str, path: str, body: Any, headers: dict[str, str] | None) -> tuple[int, Any]:
        stale.on = True
        try:
            return invoke(module(path), api_event(method, path, body, headers=headers))
        finally:
            stale.on = False

    seen: set[str] = set()
    for _ in range(ROUNDS):
        seen |= set(scenarios(write, read))
    # a deferred request's record, written as the API writes it before answering 202, then read
    operations = OperationRecords(table)
    for _ in range(ROUNDS):
        operation_id = uuid.uuid4().hex
        assert operations.put_pending(operation_id, "reserve", 1, None)
        status, body = read("GET", f"/operations/{operation_id}", None, None)
        assert (status, body["status"]) == (200, "PENDING"), body
    seen.add("GET /operations/{operationId}")
    assert seen == STRONG, "a route declared strong has no row here (or a row reads a route declared otherwise)"
    assert stale.answered == 0  # no strong route asked for an eventually consistent read
    # the injector answers what an eventually consistent read may: the likers (declared as of a watermark) miss the like
    post = f"e-{uuid.uuid4().hex[:8]}"
    assert write("POST", "/posts", {"postId": post, "authorId": "alice", "body": "hi"}, None)[0] == 201
    assert write("PUT", f"/posts/{post}/likes/u1", None, None)[0] == 200
    status, body = read("GET", f"/posts/{post}/likes", None, None)
    assert status == 404 or body["likers"] == [], body  # the post's layout or its like items not seen yet
    assert stale.answered > 0


def test_each_strong_read_sees_the_write_it_follows_over_http(local_api: RunningApi) -> None:
    writer, reader = requests.Session(), requests.Session()  # two clients; the API's functions run in 4 processes each

    def call(session: requests.Session) -> Call:
        def send(method: str, path: str, body: Any, headers: dict[str, str] | None) -> tuple[int, Any]:
            r = session.request(method, f"{local_api.url}{path}", json=body, headers=headers, timeout=HTTP_TIMEOUT)
            return r.status_code, r.json()

        return send

    seen: set[str] = set()
    for _ in range(ROUNDS):
        seen |= set(scenarios(call(writer), call(reader)))
    assert seen == STRONG - {"GET /operations/{operationId}"}  # a 202's record: read in process above


def test_a_post_created_a_moment_ago_is_found_by_a_process_that_never_read_it(table: str, stale: StaleReads) -> None:
    """Right after a post's creation an eventually consistent read may not see it (the injector answers
    so): a like, a like state and the likers list from another process find it all the same, because a
    layout not found is read again strongly before the answer is 404."""
    from counters import Likes

    creator, other = Likes(table), Likes(table)  # two processes: the other has never read the post
    post, _ = creator.posts.create_post(author_id="alice", body="hi")
    stale.on = True
    change = other.toggling.like(post["postId"], "u1")
    assert (change.liked, change.changed) == (True, True)
    assert stale.answered > 0  # the layout's eventually consistent read did miss it
    assert Likes(table).posts.like_state(post["postId"], "u1")["liked"] is True
