"""SQS-driven retries: a 202 is eventually applied exactly once; duplicates change nothing."""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from counters.core.failures import RetryPolicy
from counters.primitives.approaches import NAMES, approach_class
from counters.services.ledgers import Ledgers
from counters.services.likes import Likes
from counters.services.orders import Orders
from counters.services.reservations import Reservations
from devstack.runtime import LambdaContext
from devstack.sqs import QueuePoller
from devstack.stack import LocalStack
from tests.conftest import HTTP_TIMEOUT, Queues, api_event, invoke, item_count, like_item, likes_count, settled

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)


class InProcess:
    """A FunctionPool stand-in: runs the handler here; ``deliveries`` > 1 re-delivers each batch."""

    def __init__(self, module: Any, deliveries: int = 1) -> None:
        self.module, self.deliveries = module, deliveries
        self.fn = type("Fn", (), {"name": "RetryWorkerFunction"})()

    def invoke(self, event: dict[str, Any]) -> tuple[str, Any]:
        results = [self.module.lambda_handler(event, LambdaContext.for_function("worker", 512, 15)) for _ in range(self.deliveries)]
        return "ok", results[0]


@pytest.fixture
def apps(load_function: Any, table: str, queues: Queues, layer_client: Any) -> tuple[Any, Any, Any]:
    refs = queues.urls
    likes = load_function("LikesFunction", table, refs, build=lambda s: Likes(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, refs)
    for executor_owner in (worker.function.service,):
        assert set(executor_owner.executors) >= {"like", "unlike"}
    operations = load_function("OperationsFunction", table, refs)
    return likes, worker, operations


def poller(queues: Queues, worker: Any, deliveries: int = 1) -> QueuePoller:
    return QueuePoller(queues.sqs, queues.urls["RetryQueue"], queues.attrs["RetryQueue.Arn"], InProcess(worker, deliveries), 10, True)  # type: ignore[arg-type]


def drain(queues: Queues, worker: Any, deliveries: int = 1, rounds: int = 200) -> None:
    p = poller(queues, worker, deliveries)
    for _ in range(rounds):
        if p.poll_once(wait_seconds=1) == 0 and queues.depth("RetryQueue") == 0:
            return
    raise AssertionError("retry queue did not drain")


def tally(ddb: Any, table: str, post: str) -> int:
    item = ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
    return int(item["likeTally"]["N"])


def test_contention_is_deferred_with_202_and_replayed_exactly_once(apps: Any, faults: Any, queues: Queues, ddb: Any, table: str) -> None:
    likes, worker, operations = apps
    assert invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))[0] == 201
    faults.add("conflict", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(likes, api_event("PUT", "/posts/p1/likes/u1"))
    assert (status, body["status"]) == (202, "PENDING")
    operation_id = body["operationId"]
    assert invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]["status"] == "PENDING"
    assert tally(ddb, table, "p1") == 0 and queues.depth("RetryQueue") == 1

    drain(queues, worker, deliveries=2)  # every message delivered twice
    status, record = invoke(operations, api_event("GET", f"/operations/{operation_id}"))
    assert status == 200 and record["status"] == "APPLIED" and record["result"]["changed"] is True
    assert tally(ddb, table, "p1") == 1 and likes_count(ddb, table, "p1") == 1
    assert queues.depth("RetryDLQ") == 0


def test_replay_still_contended_is_an_item_failure_then_redelivered(apps: Any, faults: Any, queues: Queues, ddb: Any, table: str) -> None:
    likes, worker, operations = apps
    invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    faults.add("throttle", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    operation_id = invoke(likes, api_event("PUT", "/posts/p1/likes/u1"))[1]["operationId"]
    # the worker's in-line budget (default policy, 6 attempts) is exhausted once more
    faults.add("conflict", operations={"TransactWriteItems"}, limit=6)
    message = queues.sqs.receive_message(QueueUrl=queues.urls["RetryQueue"], AttributeNames=["All"])["Messages"]
    from devstack.sqs import sqs_event

    response = worker.lambda_handler(sqs_event(message, queues.attrs["RetryQueue.Arn"]), LambdaContext.for_function("w", 512, 15))
    assert response == {"batchItemFailures": [{"itemIdentifier": message[0]["MessageId"]}]}
    assert invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]["status"] == "PENDING"
    drain(queues, worker)  # visible again after 1 s; applies now
    assert invoke(operations, api_event("GET", f"/operations/{operation_id}"))[1]["status"] == "APPLIED"
    assert tally(ddb, table, "p1") == 1


def test_poison_messages_go_to_the_dlq_at_once(apps: Any, queues: Queues) -> None:
    _, worker, _ = apps
    for body in [
        "not json",
        json.dumps({"op": "explode", "payload": {}, "token": "t", "operation_id": "x" * 32, "created_at": 1}),
        json.dumps({"op": "like", "payload": {"postId": "a#b", "userId": "u"}, "token": "t", "operation_id": "y" * 32, "created_at": 1}),
    ]:
        queues.sqs.send_message(QueueUrl=queues.urls["RetryQueue"], MessageBody=body)
    p = poller(queues, worker)
    while p.poll_once(wait_seconds=1):
        pass
    assert p.invocations <= 3  # no redeliveries were needed
    assert queues.depth("RetryQueue") == 0 and queues.depth("RetryDLQ") == 3


def test_unacknowledged_when_the_queue_is_unreachable(load_function: Any, table: str, faults: Any, ddb: Any, sqs_endpoint: str) -> None:
    likes = load_function(
        "LikesFunction",
        table,
        {"RetryQueue": f"{sqs_endpoint}/123456789012/no-such-queue"},
        build=lambda s: Likes(s.table_name, retry=FAST),
    )
    invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    faults.add("conflict", operations={"TransactWriteItems"})
    status, body = invoke(likes, api_event("PUT", "/posts/p1/likes/u1"))
    assert (status, body["error"]) == (503, "contention")
    assert item_count(ddb, table) == 1  # the post only: no operation record claims to be queued


FAULT_RATES = {"after_commit": 0.04, "resend": 0.02, "conflict": 0.04, "throttle": 0.03, "unavailable": 0.02}


class FaultyStack:
    """The local stack with faults injected into the named functions' processes, and an HTTP
    client that re-sends what was not acknowledged (5xx), like a real client."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, report_dir: Any, dynamodb_endpoint: str, sqs_endpoint: str, functions: list[str], prefix: str
    ) -> None:
        spec = [[kind, {"rate": rate}] for kind, rate in FAULT_RATES.items()]
        monkeypatch.setenv("DEVSTACK_FAULTS", json.dumps({name: spec for name in functions}))
        monkeypatch.setenv("DEVSTACK_FAULTS_REPORT", str(report_dir))
        self.report_dir = report_dir
        self.table = f"{prefix}-{random.randrange(10**6)}"
        self.stack = LocalStack(
            dynamodb_endpoint,
            self.table,
            port=0,
            concurrency=4,
            sqs_endpoint=sqs_endpoint,
            visibility_override=1,
            deliveries=2,
            params={"InlineRetryAttempts": "2"},
        ).start()
        self.session = requests.Session()
        self.session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=32))
        self.url = self.stack.api.url

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        for _ in range(30):
            response = self.session.request(method, f"{self.url}{path}", timeout=HTTP_TIMEOUT, **kwargs)
            if response.status_code < 500:
                return response
        raise AssertionError(f"{method} {path} never acknowledged")

    def final(self, response: requests.Response) -> dict[str, Any]:
        """The operation record of a 202, once it is no longer PENDING (or the worker is done)."""
        operation = response.json()["operationId"]
        return settled(lambda: self.call("GET", f"/operations/{operation}").json(), lambda: self.stack.queue_depth("RetryQueue"), 0.2)

    def faults(self) -> tuple[int, int]:
        """(injected, calls) over every faulted process."""
        calls = injected = 0
        for report in self.report_dir.glob("*.json"):
            data = json.loads(report.read_text())
            calls += sum(data["calls"].values())
            injected += sum(data["injected"].values())
        return injected, calls

    def injected_on(self, function: str, operation: str, kind: str) -> int:
        """How often ``kind`` hit ``operation`` in ``function``'s processes so far (each process
        writes its report after every invocation, before answering)."""
        return sum(
            json.loads(report.read_text()).get("by_operation", {}).get(f"{operation}:{kind}", 0)
            for report in self.report_dir.glob(f"{function}-*.json")
        )

    def drained(self) -> bool:
        """Nothing left on the retry queue (the second delivery of the last batch may still be in
        flight: wait for it, however long it takes) and nothing in the DLQ."""
        while self.stack.queue_depth("RetryQueue"):
            time.sleep(0.1)
        return self.stack.queue_depth("RetryDLQ") == 0


def test_operations_under_faults_are_applied_exactly_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, dynamodb_endpoint: str, sqs_endpoint: str, ddb: Any
) -> None:
    """>= 800 like/unlike requests over HTTP (every one sent twice; was 2,000) plus 50 invalid ones;
    ~15% of every DynamoDB call in the API and worker processes faulted; the client retries
    only unacknowledged answers (5xx). Every 200/202 ends applied exactly once, every 4xx
    leaves no trace, every queue batch is delivered twice, nothing reaches the DLQ."""
    env = FaultyStack(monkeypatch, tmp_path, dynamodb_endpoint, sqs_endpoint, ["LikesFunction", "RetryWorkerFunction"], "tally-retries")
    call, table = env.call, env.table
    try:
        rng = random.Random(2026)
        posts = [f"p{i}" for i in range(4)]
        for post in posts:
            # a re-send after a 5xx whose create committed is answered from the stored post: 200
            assert call("POST", "/posts", json={"postId": post, "authorId": "a", "body": "b"}).status_code in (200, 201)
        # Each (post, user) pair gets one kind of request, so the final state is known.
        likers = {(rng.choice(posts), f"u{i}") for i in range(300)}
        unlikers = {(rng.choice(posts), f"x{i}") for i in range(80)}
        with ThreadPoolExecutor(max_workers=32) as pool:
            setup = list(pool.map(lambda pu: call("PUT", f"/posts/{pu[0]}/likes/{pu[1]}"), sorted(unlikers)))
        assert {r.status_code for r in setup} <= {200, 202}
        for response in setup:  # the likes to be undone are all in place before the unlikes start
            if response.status_code == 202:
                assert env.final(response)["status"] in ("APPLIED", "DUPLICATE")
        reqs = [("PUT", f"/posts/{p}/likes/{u}") for p, u in likers for _ in range(2)]
        reqs += [("DELETE", f"/posts/{p}/likes/{u}") for p, u in unlikers for _ in range(2)]
        reqs += [("PUT", f"/posts/{rng.choice(posts)}/likes/bad%23id{i}") for i in range(25)]
        reqs += [("PUT", f"/posts/missing{i}/likes/u1") for i in range(25)]
        rng.shuffle(reqs)
        assert len(reqs) >= 800
        with ThreadPoolExecutor(max_workers=32) as pool:
            responses = list(pool.map(lambda r: call(*r), reqs))
        answers: dict[int, int] = {}
        for r in responses:
            answers[r.status_code] = answers.get(r.status_code, 0) + 1
        assert set(answers) <= {200, 202, 400, 404}, answers
        # what the run must have met (expected ~10-15 deferrals at these rates), or it proves nothing about the worker
        assert answers.get(202, 0) >= 3, f"the fault rate should push some requests past the in-line budget: {answers}"
        for (method, path), response in zip(reqs, responses, strict=True):
            if "bad%23id" in path:
                assert response.status_code == 400  # refused before any DynamoDB call
            elif "/missing" in path:  # 404 in-line, or deferred under contention and rejected by the worker
                if response.status_code == 202:
                    final = env.final(response)
                    assert (final["status"], final["result"]["error"]) == ("REJECTED", "not_found")
                else:
                    assert response.status_code == 404
            elif response.status_code == 202:
                assert env.final(response)["status"] in ("APPLIED", "DUPLICATE")
            else:
                assert response.status_code == 200, (method, path, response.text)
        injected, calls = env.faults()
        assert injected >= 0.10 * calls, (injected, calls)
        assert env.drained()
        for post in posts:
            expected = sum(1 for p, _ in likers if p == post)
            assert tally(ddb, table, post) == likes_count(ddb, table, post) == expected
        for post, user in likers:
            assert like_item(ddb, table, post, user) is not None
        assert sum(item_count(ddb, table, f"POST#missing{i}") for i in range(25)) == 0  # 4xx left no trace
        print(f"\nanswers {answers}; injected {injected} faults in {calls} DynamoDB calls")
    finally:
        env.stack.stop()


def test_local_stack_resolves_a_202_through_its_own_worker(
    monkeypatch: pytest.MonkeyPatch, dynamodb_endpoint: str, sqs_endpoint: str
) -> None:
    """End to end over HTTP: the like is contended in the API's process, queued, and the
    devstack's poller has the worker process apply it."""
    monkeypatch.setenv("DEVSTACK_FAULTS", json.dumps({"LikesFunction": [["conflict", {"operations": ["TransactWriteItems"], "limit": 6}]]}))
    stack = LocalStack(
        dynamodb_endpoint, f"tally-e2e-{random.randrange(10**6)}", port=0, concurrency=1, sqs_endpoint=sqs_endpoint, visibility_override=1
    ).start()
    try:
        url = stack.api.url
        assert requests.post(f"{url}/posts", json={"postId": "p1", "authorId": "a", "body": "b"}, timeout=HTTP_TIMEOUT).status_code == 201
        r = requests.put(f"{url}/posts/p1/likes/u1", timeout=HTTP_TIMEOUT)
        assert r.status_code == 202, r.text
        location = r.headers["Location"]
        assert (
            settled(lambda: requests.get(f"{url}{location}", timeout=HTTP_TIMEOUT).json(), lambda: stack.queue_depth("RetryQueue"))[
                "status"
            ]
            == "APPLIED"
        )
        assert requests.get(f"{url}/posts/p1", timeout=HTTP_TIMEOUT).json()["likeTally"] == 1
    finally:
        stack.stop()


def test_reservations_under_faults_are_exact_and_deferred_only_when_safe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, dynamodb_endpoint: str, sqs_endpoint: str, ddb: Any
) -> None:
    """400 reservations over HTTP on the four exact strategies (every request sent twice, ~15% of
    DynamoDB calls faulted in the API and the worker): reserved == the sum of distinct confirmed
    reservations, never above capacity; deferred ones end APPLIED/DUPLICATE/REJECTED; plus
    releases, each deferred or applied once; and atomic defers only the confirmation of a take
    that applied, never the take, and counts each take at most once. (Was 800 against a
    capacity of 150: now 400 against 75, the same demand ~1.3x capacity, so each resource still
    sells out, which is asserted.)"""
    capacity = 75
    env = FaultyStack(monkeypatch, tmp_path, dynamodb_endpoint, sqs_endpoint, ["ReservationsFunction", "RetryWorkerFunction"], "tally-rsv")
    call, final, session, url, stack = env.call, env.final, env.session, env.url, env.stack

    try:
        strategies = [n for n in NAMES if approach_class(n).exact]
        for strategy in [*strategies, "atomic"]:
            # a create is not idempotent: a 5xx after commit, re-sent, is a 409; the resource is what was asked
            created = call("POST", "/resources", json={"resourceId": f"r-{strategy}", "capacity": capacity, "strategy": strategy})
            assert created.status_code in (201, 409), created.text
            resource = call("GET", f"/resources/r-{strategy}").json()
            assert (resource["capacity"], resource["strategy"], resource["reserved"]) == (capacity, strategy, 0), resource
        rng = random.Random(7)
        reqs = [(s, f"k-{s}-{i}", rng.randint(1, 3)) for s in strategies for i in range(50)]
        reqs = [r for r in reqs for _ in range(2)]
        rng.shuffle(reqs)

        def reserve(req: tuple[str, str, int]) -> tuple[tuple[str, str, int], requests.Response]:
            strategy, key, quantity = req
            return req, call("POST", f"/resources/r-{strategy}/reservations", json={"quantity": quantity}, headers={"Idempotency-Key": key})

        with ThreadPoolExecutor(max_workers=32) as pool:
            results = list(pool.map(reserve, reqs))
        confirmed: dict[str, dict[str, int]] = {s: {} for s in strategies}
        deferred = 0
        sold_out = {s: 0 for s in strategies}
        for (strategy, key, quantity), response in results:
            if response.status_code == 202:
                deferred += 1
                record = final(response)
                if record["status"] in ("APPLIED", "DUPLICATE"):
                    confirmed[strategy][key] = quantity
                else:
                    assert record["result"]["error"] in ("insufficient_capacity", "reservation_slots_full"), record
                    sold_out[strategy] += 1
            elif response.status_code in (200, 201):
                confirmed[strategy][key] = quantity
            else:
                assert response.status_code == 409, response.text  # sold out / slots full: definite
                sold_out[strategy] += 1
        assert all(sold_out.values()), f"every resource must have been sold out (demand ~1.3x capacity): {sold_out}"
        for strategy in strategies:
            resource = call("GET", f"/resources/r-{strategy}").json()
            assert resource["reserved"] == sum(confirmed[strategy].values()) <= capacity, (strategy, resource)
            assert resource["reserved"] + resource["available"] == capacity
        # every 409 and every REJECTED replay left nothing behind: one CONFIRMED record per confirmed key
        records = [
            item
            for page in ddb.get_paginator("scan").paginate(TableName=env.table, ConsistentRead=True)
            for item in page["Items"]
            if item["PK"]["S"].startswith("RSV#")
        ]
        for strategy in strategies:
            mine = [r for r in records if r["resourceId"]["S"] == f"r-{strategy}"]
            assert sorted(r["idempotencyKey"]["S"] for r in mine) == sorted(confirmed[strategy]), strategy
            assert {r["status"]["S"] for r in mine} == {"CONFIRMED"}, strategy

        # releases of every confirmed reservation, sent twice: the quantity comes back once
        from counters.services.reservations import reservation_id

        releases = [(s, reservation_id(f"r-{s}", k)) for s in strategies for k in confirmed[s]]
        with ThreadPoolExecutor(max_workers=32) as pool:
            answers = list(
                pool.map(lambda sr: call("DELETE", f"/resources/r-{sr[0]}/reservations/{sr[1]}"), [r for r in releases for _ in range(2)])
            )
        for response in answers:
            assert response.status_code in (200, 202), response.text
            if response.status_code == 202:
                deferred += 1
                assert final(response)["status"] in ("APPLIED", "DUPLICATE")
        for strategy in strategies:
            assert call("GET", f"/resources/r-{strategy}").json()["reserved"] == 0, strategy

        # atomic remembers no request: its take is never deferred (a replay could apply it twice),
        # so a busy take is 503 (nothing taken) and an unknown outcome 500 (may hold it). What may
        # be deferred is the confirmation of a take that applied (settle_claim: the take is done,
        # only its record is busy): 202, and it ends APPLIED with the record CONFIRMED. Whichever
        # call a fault hits, nothing acknowledged is lost and no take is counted twice: every
        # CONFIRMED record is in `reserved`, and `reserved` holds nothing but the takes of this
        # phase's records (CONFIRMED, or PENDING/UNKNOWN after a 5xx), plus at most one unit per
        # `resend` fault on an UpdateItem (an SDK re-send of the ADD: the over-apply atomic
        # documents for SDK retries, which the layer turns off; tested on its own).
        resends = env.injected_on("ReservationsFunction", "UpdateItem", "resend")
        atomic: dict[str, requests.Response] = {}
        for i in range(20):
            atomic[f"a{i}"] = session.post(
                f"{url}/resources/r-atomic/reservations", json={"quantity": 1}, headers={"Idempotency-Key": f"a{i}"}, timeout=HTTP_TIMEOUT
            )
        resends = env.injected_on("ReservationsFunction", "UpdateItem", "resend") - resends
        acknowledged: set[str] = set()
        for key, response in atomic.items():
            if response.status_code == 202:
                deferred += 1
                operation = env.final(response)
                assert (operation["op"], operation["status"]) == ("settle_claim", "APPLIED"), operation
                acknowledged.add(key)
            elif response.status_code == 201:
                acknowledged.add(key)
            else:
                assert response.status_code in (500, 503), response.text  # outcome_unknown / contention
        assert env.drained()
        held = {
            item["idempotencyKey"]["S"]: item["status"]["S"]
            for page in ddb.get_paginator("scan").paginate(TableName=env.table, ConsistentRead=True)
            for item in page["Items"]
            if item["PK"]["S"].startswith("RSV#") and item["resourceId"]["S"] == "r-atomic"
        }
        confirmed = {key for key, status in held.items() if status == "CONFIRMED"}
        assert acknowledged and acknowledged <= confirmed, (acknowledged, held)  # nothing acknowledged is lost
        assert set(held.values()) <= {"CONFIRMED", "PENDING", "UNKNOWN"}, held
        reserved = call("GET", "/resources/r-atomic").json()["reserved"]
        assert len(confirmed) <= reserved <= len(held) + resends, (reserved, held, resends)
        assert deferred, "the fault rate should defer some requests"
        answered = sorted(r.status_code for r in atomic.values())
        print(f"\ndeferred {deferred} of {len(reqs) + len(releases) * 2 + len(atomic)} reservation requests")
        print(f"atomic: answers {answered}, records {sorted(held.values())}, reserved {reserved}, UpdateItem resends {resends}")
    finally:
        stack.stop()


@pytest.mark.parametrize(("strategy", "deferred"), [(n, approach_class(n).exact) for n in NAMES])
def test_only_exact_strategies_are_deferred(
    strategy: str, deferred: bool, load_function: Any, table: str, queues: Queues, faults: Any, ddb: Any
) -> None:
    app = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    assert invoke(app, api_event("POST", "/resources", {"resourceId": "r", "capacity": 10, "strategy": strategy}))[0] == 201
    faults.add("throttle", operations={"TransactWriteItems", "UpdateItem"})
    status, body = invoke(app, api_event("POST", "/resources/r/reservations", {"quantity": 1}, headers={"Idempotency-Key": "k1"}))
    faults.clear()
    if deferred:
        assert (status, body["status"]) == (202, "PENDING")
        assert queues.depth("RetryQueue") == 1
    else:
        assert status == 503 and body["error"] == "contention"
        assert queues.depth("RetryQueue") == 0


def test_ledger_append_under_contention_is_deferred_and_replayed_once(load_function: Any, table: str, queues: Queues, faults: Any) -> None:
    from counters.primitives.ledger import new_key

    ledger_app = load_function("LedgerFunction", table, queues.urls, build=lambda s: Ledgers(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    key = new_key()
    faults.add("throttle", operations={"PutItem"}, limit=FAST.max_attempts)
    status, body = invoke(ledger_app, api_event("POST", "/ledgers/l1/entries", {"amount": 7}, headers={"Idempotency-Key": key}))
    assert (status, body["status"]) == (202, "PENDING")
    drain(queues, worker, deliveries=2)
    record = invoke(operations, api_event("GET", f"/operations/{body['operationId']}"))[1]
    assert record["status"] in ("APPLIED", "DUPLICATE")
    assert invoke(ledger_app, api_event("GET", "/ledgers/l1"))[1]["balance"] == 7
    # the client's own retry with the same key is a duplicate, not a second entry
    assert invoke(ledger_app, api_event("POST", "/ledgers/l1/entries", {"amount": 7}, headers={"Idempotency-Key": key}))[0] == 200
    assert invoke(ledger_app, api_event("GET", "/ledgers/l1"))[1]["balance"] == 7


def test_order_under_contention_is_deferred_and_placed_once(load_function: Any, table: str, queues: Queues, faults: Any) -> None:
    orders_app = load_function("OrdersFunction", table, queues.urls, build=lambda s: Orders(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    order = {"customerId": "c1", "items": [{"sku": "s1", "quantity": 2}]}
    faults.add("throttle", operations={"UpdateItem", "TransactWriteItems"}, limit=FAST.max_attempts)
    status, body = invoke(orders_app, api_event("POST", "/orders", order, headers={"Idempotency-Key": "order-key-1"}))
    assert (status, body["status"]) == (202, "PENDING"), body
    drain(queues, worker, deliveries=2)
    record = invoke(operations, api_event("GET", f"/operations/{body['operationId']}"))[1]
    assert record["status"] == "APPLIED"
    order_id = record["result"]["orderId"]
    # the client's retry with the same key answers the same order; no second order exists
    status, again = invoke(orders_app, api_event("POST", "/orders", order, headers={"Idempotency-Key": "order-key-1"}))
    assert (status, again["orderId"]) == (200, order_id)


@pytest.mark.parametrize("strategy", ["atomic", "occ"])
def test_a_take_whose_confirmation_is_busy_is_confirmed_from_the_retry_queue(
    strategy: str, load_function: Any, table: str, queues: Queues, faults: Any, ddb: Any
) -> None:
    """atomic/occ with a key: the take applied, then the claim's confirmation met contention. A
    re-send cannot confirm it (only that request knows the allocation), so the confirmation is
    deferred: 202 with an operation, APPLIED by the worker, and the key's re-send answers 200
    with the same reservation; the quantity is taken once."""
    app = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    assert invoke(app, api_event("POST", "/resources", {"resourceId": "r", "capacity": 10, "strategy": strategy}))[0] == 201
    service = app.function.service
    settle = service._settle_claim

    def busy_confirmation(rid: str, status: Any, allocation: Any, **options: Any) -> None:
        if allocation is not None:  # the take applied: its confirmation is throttled for its whole budget
            faults.add("throttle", operations={"UpdateItem"}, limit=FAST.max_attempts)
        settle(rid, status, allocation, **options)

    service._settle_claim = busy_confirmation
    reserve = api_event("POST", "/resources/r/reservations", {"quantity": 3}, headers={"Idempotency-Key": "k1"})
    status, body = invoke(app, reserve)
    service._settle_claim = settle
    faults.clear()
    assert (status, body["status"]) == (202, "PENDING"), body
    drain(queues, worker, deliveries=2)
    record = invoke(operations, api_event("GET", f"/operations/{body['operationId']}"))[1]
    assert (record["status"], record["result"]["status"]) == ("APPLIED", "CONFIRMED"), record
    status, again = invoke(app, reserve)
    assert (status, again["reservationId"], again["status"]) == (200, record["result"]["reservationId"], "CONFIRMED")
    assert invoke(app, api_event("GET", "/resources/r"))[1]["available"] == 7


def test_a_deferred_confirmation_whose_first_attempt_committed_is_this_requests(
    load_function: Any, table: str, queues: Queues, ddb: Any
) -> None:
    """The claim's in-line confirmation committed, but the call ended in contention (its answer lost,
    then the budget spent): 202. The worker's replay finds the record CONFIRMED by this very request
    (its own write), so the operation is APPLIED, not DUPLICATE (the HTTP proof counts a DUPLICATE
    there as a wrong 202)."""
    from counters.core.outcome import Outcome

    app = load_function("ReservationsFunction", table, queues.urls, build=lambda s: Reservations(s.table_name, retry=FAST))
    worker = load_function("RetryWorkerFunction", table, queues.urls)
    operations = load_function("OperationsFunction", table, queues.urls)
    assert invoke(app, api_event("POST", "/resources", {"resourceId": "r", "capacity": 10, "strategy": "atomic"}))[0] == 201
    store = app.function.service.store
    settle = store.settle_claim

    def committed_then_contended(rid: str, status: Any, allocation: Any) -> Outcome:
        assert settle(rid, status, allocation) is Outcome.APPLIED  # it committed...
        return Outcome.CONTENTION  # ...and the caller never learned it

    store.settle_claim = committed_then_contended
    reserve = api_event("POST", "/resources/r/reservations", {"quantity": 3}, headers={"Idempotency-Key": "k1"})
    status, body = invoke(app, reserve)
    store.settle_claim = settle
    assert (status, body["status"]) == (202, "PENDING"), body
    drain(queues, worker, deliveries=2)
    record = invoke(operations, api_event("GET", f"/operations/{body['operationId']}"))[1]
    assert (record["status"], record["result"]["status"]) == ("APPLIED", "CONFIRMED"), record
    assert invoke(app, api_event("GET", "/resources/r"))[1]["available"] == 7
