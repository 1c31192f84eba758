"""Orders against DynamoDB Local: sequence ids (fast and gapless), idempotency keys, the
LAST_ORDER pointer fed by the table's stream, under concurrency, duplicates and injected faults."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.primitives.pointer import Pointer
from counters.primitives.sequence import Sequence
from counters.services.orders import POINTER, Orders
from devstack.runtime import LambdaContext
from devstack.streams import StreamPoller
from tests.conftest import HTTP_TIMEOUT, RunningApi, api_event, invoke, item_count, load_event

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
OCC = RetryPolicy(max_attempts=400, base_delay=0.001, max_delay=0.02)
MODES = ["fast", "gapless"]


@pytest.fixture
def orders_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("OrdersFunction", table)


@pytest.fixture
def pointer_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("OrderPointerFunction", table, build=lambda s: Pointer(table, POINTER, attribute="orderId", retry=FAST))


def use_mode(module: Any, table: str, mode: str) -> Orders:
    return module.function.configure(module.function.settings, Orders(table, mode=mode, retry=FAST, occ=OCC))


def stream_to(pointer_fn: Any, table: str, endpoint: str) -> StreamPoller:
    """The table's stream, delivered in-process to the order pointer function."""
    context = LambdaContext.for_function("OrderPointerFunction", 512, 10)
    return StreamPoller(table, endpoint, {"OrderPointerFunction": lambda event: ("ok", pointer_fn.lambda_handler(event, context))})


def order_body(customer: str = "c1", sku: str = "sku-1", quantity: int = 1) -> dict[str, Any]:
    return {"customerId": customer, "items": [{"sku": sku, "quantity": quantity}]}


def post(module: Any, key: str, body: Any) -> tuple[int, Any]:
    return invoke(module, api_event("POST", "/orders", body, headers={"Idempotency-Key": key}))


def stored_orders(ddb: Any, table: str) -> list[dict[str, Any]]:
    """Every ORDER# item (orderId, idempotencyKey), consistently scanned."""
    out, kwargs = (
        [],
        {
            "TableName": table,
            "ConsistentRead": True,
            "FilterExpression": "begins_with(PK, :p)",
            "ExpressionAttributeValues": {":p": {"S": "ORDER#"}},
            "ProjectionExpression": "orderId, idempotencyKey",
        },
    )
    while True:
        page = ddb.scan(**kwargs)
        out += [{"orderId": int(i["orderId"]["N"]), "key": i["idempotencyKey"]["S"]} for i in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# ---------------------------------------------------------------------------- behaviour
@pytest.mark.parametrize("mode", MODES)
def test_place_replay_get_and_latest(mode: str, orders_fn: Any, pointer_fn: Any, ddb: Any, table: str, dynamodb_endpoint: str) -> None:
    use_mode(orders_fn, table, mode)
    status, first = post(orders_fn, "k1", order_body(quantity=2))
    assert status == 201 and first["orderId"] == 1 and first["items"] == [{"sku": "sku-1", "quantity": 2}]
    assert post(orders_fn, "k1", order_body(quantity=2)) == (200, first)  # a replay: same order
    status, body = post(orders_fn, "k1", order_body(quantity=3))  # same key, different body
    assert (status, body["error"]) == (422, "idempotency_key_reused")
    status, second = post(orders_fn, "k2", order_body("c2"))
    assert status == 201 and second["orderId"] == 2  # the replays took no id, in either mode
    assert invoke(orders_fn, api_event("GET", "/orders/1")) == (200, first)
    assert invoke(orders_fn, api_event("GET", "/orders/3"))[0] == 404
    # The pointer is advanced by the stream, not by the request.
    assert invoke(orders_fn, api_event("GET", "/orders/latest")) == (200, {"orderId": None})
    assert stream_to(pointer_fn, table, dynamodb_endpoint).poll_once() == 2
    assert invoke(orders_fn, api_event("GET", "/orders/latest")) == (200, {"orderId": 2})
    assert item_count(ddb, table) == 2 + 2 + 1 + 1  # orders, key records, sequence, pointer


def test_fast_mode_burns_an_id_on_an_ambiguous_add_never_duplicates(orders_fn: Any, faults: Any, table: str) -> None:
    orders = use_mode(orders_fn, table, "fast")
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    placed = orders.place(key="k1", customer_id="c1", items=[{"sku": "a", "quantity": 1}])
    assert faults.injected["after_commit"] == 1
    assert placed.created and placed.order["orderId"] == 2  # the ADD that "failed" took 1: a gap
    assert placed.result.attempts == 2  # one retry: the ADD


def test_gapless_after_commit_and_resend_take_no_extra_id(orders_fn: Any, faults: Any, table: str, ddb: Any) -> None:
    orders = use_mode(orders_fn, table, "gapless")
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
    assert orders.place(key="k1", customer_id="c1", items=[{"sku": "a", "quantity": 1}]).order["orderId"] == 1
    faults.add("resend", operations={"TransactWriteItems"}, limit=1)
    assert orders.place(key="k2", customer_id="c1", items=[{"sku": "a", "quantity": 1}]).order["orderId"] == 2
    # Every in-line attempt fails after committing: 503, then the client resends the request.
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    with pytest.raises(ContentionError):
        orders.place(key="k3", customer_id="c1", items=[{"sku": "a", "quantity": 1}])
    again = orders.place(key="k3", customer_id="c1", items=[{"sku": "a", "quantity": 1}])
    assert (again.created, again.order["orderId"]) == (False, 3)
    assert orders.place(key="k4", customer_id="c1", items=[{"sku": "a", "quantity": 1}]).order["orderId"] == 4
    assert sorted(o["orderId"] for o in stored_orders(ddb, table)) == [1, 2, 3, 4]


@pytest.mark.parametrize("mode", MODES)
def test_a_sequence_behind_its_orders_never_overwrites_one(mode: str, orders_fn: Any, ddb: Any, table: str) -> None:
    """The counter item is lost (restored from an old backup, deleted by hand): the next id
    collides with a stored order. The order's attribute_not_exists guard refuses it (409)."""
    use_mode(orders_fn, table, mode)
    assert post(orders_fn, "k1", order_body("alice"))[0] == 201
    ddb.delete_item(TableName=table, Key={"PK": {"S": "SEQ#ORDER"}, "SK": {"S": "META"}})
    status, body = post(orders_fn, "k2", order_body("mallory"))
    assert (status, body["error"]) == (409, "integrity_error")
    assert invoke(orders_fn, api_event("GET", "/orders/1"))[1]["customerId"] == "alice"
    assert item_count(ddb, table, "ORDERKEY#k2") == 0


def test_gapless_keeps_the_token_of_an_unknown_outcome_through_a_later_conflict(faults: Any, table: str) -> None:
    """Attempt 1 commits but answers 500; attempt 2 is cancelled by a conflict; attempt 3 must
    re-send attempt 1's ClientRequestToken so DynamoDB replays the commit. With a fresh token
    it would execute, fail on the moved counter, and take value 2: a hole (the old counters.tx)."""
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
    armed = []

    def arm_conflict_after_the_first_attempt(_delay: float) -> None:
        if not armed:
            armed.append(faults.add("conflict", operations={"TransactWriteItems"}, limit=1))

    seq = Sequence(table, "S", mode="gapless", retry=RetryPolicy(max_attempts=6, sleep=arm_conflict_after_the_first_attempt))
    taken = seq.next()
    assert (faults.injected["after_commit"], faults.injected["conflict"]) == (1, 1)
    assert (taken.outcome, taken.value, seq.current()[0]) == (Outcome.APPLIED, 1, 1)


# ---------------------------------------------------------------------------- concurrency + faults
# A load test is sized by what it proves, and asserts that it exercised it, so that a run too
# small (or too lucky) to meet a duplicate race or a fault of every kind cannot pass vacuously.
ORDER_FAULTS = {"after_commit": 0.05, "resend": 0.05, "conflict": 0.05, "throttle": 0.05, "unavailable": 0.05}
MIN_FAULTS_PER_KIND = 3  # one environment: ~15-50 per kind at these rates; every failure path was taken, several times
MIN_TWIN_RACES = 10  # a key's two requests both missed the other's key record and met at its condition
MIN_REPLAYS = 10  # a key's later request found the key record and answered the stored order
MIN_LOST_COUNTER_RACES = 20  # several environments: rounds lost on the counter's ``value = :old``


@pytest.mark.parametrize("mode", MODES)
def test_orders_from_32_clients_with_duplicates_and_faults(
    mode: str, orders_fn: Any, pointer_fn: Any, faults: Any, ddb: Any, table: str, dynamodb_endpoint: str
) -> None:
    """32 client threads place 300 orders; a quarter of the requests are sent again (half of
    those right beside the original, so both are in flight at once); every kind of fault hits
    the sequence and the transactions. Every key gets one order id, no id is shared, gapless
    ids are 1..N, and the pointer ends at the max. (Was 2,000 orders: the same paths, taken
    fewer times; the run now asserts each path was taken, see the MIN_ constants.)

    The threads share one layer object (in gapless mode they queue on its local lock, which
    keeps the run time low); the race between environments at DynamoDB is the next test's."""
    place_orders(orders_fn, pointer_fn, faults, ddb, table, dynamodb_endpoint, mode=mode, n=300, envs=1, seed=4)


def test_gapless_ids_when_4_environments_race_for_the_counter(
    orders_fn: Any, pointer_fn: Any, faults: Any, ddb: Any, table: str, dynamodb_endpoint: str
) -> None:
    """32 threads over 4 layer objects (4 Lambda environments): only the counter's
    ``value = :old`` condition serialises them (the lost rounds are counted). Still exactly 1..N."""
    place_orders(orders_fn, pointer_fn, faults, ddb, table, dynamodb_endpoint, mode="gapless", n=160, envs=4, seed=6)


def place_orders(
    orders_fn: Any, pointer_fn: Any, faults: Any, ddb: Any, table: str, dynamodb_endpoint: str, *, mode: str, n: int, envs: int, seed: int
) -> None:
    lock = threading.Lock()
    lost_counter_races = [0]

    def lost_a_counter_race(delay: float) -> None:  # the gapless OCC backs off only after losing the counter's condition
        with lock:
            lost_counter_races[0] += 1
        time.sleep(delay)

    layers = [use_mode(orders_fn, table, mode) for _ in range(envs)]
    for layer in layers:
        layer.sequence.occ = RetryPolicy(OCC.max_attempts, OCC.base_delay, OCC.max_delay, sleep=lost_a_counter_race)
    clients = 32
    rng = random.Random(seed)
    keys = [f"key-{i}-{uuid.uuid4().hex[:6]}" for i in range(n)]
    resent = rng.sample(keys, n // 4)  # duplicates: the same Idempotency-Key re-sent
    beside, later = set(resent[: len(resent) // 2]), resent[len(resent) // 2 :]
    requests_ = keys + later
    rng.shuffle(requests_)
    requests_ = [r for key in requests_ for r in ([key, key] if key in beside else [key])]  # the twin goes out at once
    assert len(requests_) == n + n // 4
    for kind, rate in ORDER_FAULTS.items():
        faults.add(kind, operations={"UpdateItem", "TransactWriteItems"}, rate=rate)
    answers: dict[str, list[tuple[int, bool, str | None]]] = defaultdict(list)
    resends = 0

    attempts = 0

    def client(job: tuple[int, str]) -> None:
        nonlocal resends, attempts
        index, key = job
        items = [{"sku": f"sku-{hash(key) % 7}", "quantity": 1 + hash(key) % 3}]
        for _ in range(20):  # a client resends the same request on 503
            try:
                placed = layers[index % envs].place(key=key, customer_id="c1", items=items)
            except ContentionError:
                with lock:
                    resends += 1
                continue
            with lock:
                answers[key].append((placed.order["orderId"], placed.created, placed.result.reason))
                attempts += placed.result.attempts
            return
        raise AssertionError(f"{key}: no answer after 20 resends")

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(client, enumerate(requests_)))
    elapsed = time.monotonic() - began

    # -- what the run exercised (a run that met none of it would prove nothing)
    if envs == 1:
        assert all(faults.injected[kind] >= MIN_FAULTS_PER_KIND for kind in ORDER_FAULTS), dict(faults.injected)
    else:  # most rounds lose the counter's condition, and a lost round commits nothing for after_commit/resend to hit
        assert sum(faults.injected.values()) >= 20, dict(faults.injected)
    replies = [(created, reason) for got in answers.values() for _, created, reason in got]
    twin_races = sum(1 for created, reason in replies if not created and reason == "item_exists")
    replays = sum(1 for created, reason in replies if not created and reason != "item_exists")
    assert twin_races >= MIN_TWIN_RACES, (twin_races, replays)
    assert replays >= MIN_REPLAYS, (twin_races, replays)
    if envs > 1:
        assert lost_counter_races[0] >= MIN_LOST_COUNTER_RACES, lost_counter_races

    # -- what must hold
    ids_by_key = {key: {order_id for order_id, _, _ in got} for key, got in answers.items()}
    assert all(len(ids) == 1 for ids in ids_by_key.values()), "a key answered two different order ids"
    assert all(sum(created for _, created, _ in got) <= 1 for got in answers.values()), "a key was created twice"
    ids = [next(iter(v)) for v in ids_by_key.values()]
    assert len(ids_by_key) == n and len(set(ids)) == n  # 0 duplicate order ids
    stored = stored_orders(ddb, table)
    assert len(stored) == n  # one order per key, none orphaned by a fault
    assert {o["key"]: o["orderId"] for o in stored} == {k: next(iter(v)) for k, v in ids_by_key.items()}
    taken, _ = Sequence(table, "ORDER").current()
    if mode == "gapless":
        assert sorted(ids) == list(range(1, n + 1))  # exactly 1..N, no holes
        assert taken == n
    else:
        assert taken >= max(ids) and len(set(ids)) == n  # unique; gaps allowed
    print(
        f"\n[{mode}, {envs} env] {n} orders + {len(requests_) - n} duplicates from {clients} threads in {elapsed:.1f}s "
        f"({n / elapsed:.0f} orders/s with faults), {twin_races} twin races, {replays} replays, "
        f"{lost_counter_races[0]} lost counter rounds, {resends} 503 resends, sequence at {taken} "
        f"({taken - n} ids burned), {attempts / len(requests_):.2f} write attempts per request, faults {dict(faults.injected)}"
    )

    faults.clear()
    poller = stream_to(pointer_fn, table, dynamodb_endpoint)
    poller.poll_once()
    assert poller.delivered >= n
    assert invoke(orders_fn, api_event("GET", "/orders/latest")) == (200, {"orderId": max(ids)})


# ---------------------------------------------------------------------------- the pointer
def test_pointer_outcomes(table: str, layer_client: Any) -> None:
    pointer = Pointer(table, "P", retry=FAST)
    assert pointer.read()[0] is None
    assert pointer.advance(5).outcome is Outcome.APPLIED
    stale = pointer.advance(3)
    assert (stale.outcome, stale.reason, stale.value) == (Outcome.REJECTED, "stale", 5)
    again = pointer.advance(5)
    assert (again.outcome, again.reason) == (Outcome.DUPLICATE, "already_at_value")
    assert pointer.advance(6).outcome is Outcome.APPLIED
    assert pointer.read()[0] == 6


def stream_record(order_id: int, seq: int) -> dict[str, Any]:
    """An ORDER# INSERT as Lambda delivers it from the stream (events/order_pointer/*.json shape)."""
    keys = {"PK": {"S": f"ORDER#{order_id}"}, "SK": {"S": "META"}}
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": int(time.time()),
            "Keys": keys,
            "NewImage": {**keys, "orderId": {"N": str(order_id)}},
            "SequenceNumber": str(10**20 + seq),
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/tally/stream/2026-01-01T00:00:00.000",
    }


def test_pointer_replayed_in_random_order_with_duplicates_never_decreases(pointer_fn: Any, orders_fn: Any, faults: Any) -> None:
    """600 order inserts, each delivered 1-3 times, shuffled into random batches handled by 8
    concurrent invocations (parallel shards, retried batches), with ambiguous failures and
    resends on the pointer writes. Readers record every value they see: never a step back."""
    n = 600
    rng = random.Random(9)
    deliveries = [i for i in range(1, n + 1) for _ in range(rng.choice([1, 1, 2, 3]))]
    rng.shuffle(deliveries)
    batches, at = [], 0
    while at < len(deliveries):
        size = rng.randint(1, 12)
        batches.append([stream_record(order_id, at + j) for j, order_id in enumerate(deliveries[at : at + size])])
        at += size
    faults.add("after_commit", operations={"UpdateItem"}, rate=0.15)
    faults.add("resend", operations={"UpdateItem"}, rate=0.1)
    faults.add("throttle", operations={"UpdateItem"}, rate=0.05)
    done = threading.Event()
    seen: list[list[int | None]] = [[] for _ in range(3)]

    def reader(log: list[int | None]) -> None:
        while not done.is_set() or len(log) < 20:  # at least 20 reads, however fast the deliveries ran
            status, body = invoke(orders_fn, api_event("GET", "/orders/latest"))
            assert status == 200
            log.append(body["orderId"])

    def deliver(batch: list[dict[str, Any]]) -> None:
        for _ in range(10):  # Lambda re-drives a batch from its first reported failure
            response = pointer_fn.lambda_handler({"Records": batch}, LambdaContext.for_function("p", 512, 10))
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            if not failed:
                return
            batch = batch[min(i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed) :]
        raise AssertionError("batch kept failing")

    readers = [threading.Thread(target=reader, args=(log,)) for log in seen]
    for t in readers:
        t.start()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(deliver, batches))
    done.set()
    for t in readers:
        t.join()

    assert sum(faults.injected.values()) > 10, faults.injected
    assert invoke(orders_fn, api_event("GET", "/orders/latest")) == (200, {"orderId": n})
    for log in seen:
        values = [v for v in log if v is not None]
        assert len(values) > 5
        assert all(a <= b for a, b in zip(values, values[1:], strict=False)), "the pointer moved backward"
        assert all(v is not None for v in log[log.index(values[0]) :])  # once set, never unset


# ---------------------------------------------------------------------------- events, HTTP
def test_order_events_run_in_order(orders_fn: Any, pointer_fn: Any, table: str) -> None:
    assert post(orders_fn, "seed-key", order_body())[0] == 201  # order 1, so order 2 is the sample's
    sequence = [
        ("orders/create_order.json", 201),
        ("orders/create_order.json", 200),  # the same Idempotency-Key again
        ("orders/get_order.json", 200),
    ]
    for name, expected in sequence:
        status, body = invoke(orders_fn, load_event(name))
        assert status == expected, (name, body)
    assert body["orderId"] == 1  # get_order.json asks for order 1
    response = pointer_fn.lambda_handler(load_event("order_pointer/order_inserts.json"), LambdaContext.for_function("p", 512, 10))
    assert response == {"batchItemFailures": []}
    assert invoke(orders_fn, load_event("orders/latest_order.json")) == (200, {"orderId": 2})


def test_http_orders_and_stream_pointer(local_api: RunningApi, load_function: Any, layer_client: Any, dynamodb_endpoint: str) -> None:
    """Over real HTTP (template default: fast mode), with the stream feeding the pointer function."""
    url = local_api.url
    pointer_fn = load_function("OrderPointerFunction", local_api.table)
    key = uuid.uuid4().hex
    r = requests.post(f"{url}/orders", json=order_body(), headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 201, r.text
    order_id = r.json()["orderId"]
    assert r.headers["Location"] == f"/orders/{order_id}"
    r2 = requests.post(f"{url}/orders", json=order_body(), headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT)
    assert (r2.status_code, r2.json()) == (200, r.json())
    assert (
        requests.post(f"{url}/orders", json=order_body(quantity=9), headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT).status_code
        == 422
    )
    assert requests.post(f"{url}/orders", json=order_body(), timeout=HTTP_TIMEOUT).status_code == 400  # no key
    assert requests.get(f"{url}/orders/{order_id}", timeout=HTTP_TIMEOUT).json() == r.json()
    with ThreadPoolExecutor(max_workers=8) as pool:  # the local server's listen backlog is small
        codes = list(
            pool.map(
                lambda i: (
                    requests.post(
                        f"{url}/orders", json=order_body(), headers={"Idempotency-Key": f"{key}-{i % 40}"}, timeout=30
                    ).status_code
                ),
                range(80),
            )
        )
    assert sorted(set(codes)) == [200, 201] and codes.count(201) == 40
    stream_to(pointer_fn, local_api.table, dynamodb_endpoint).poll_once()
    latest = requests.get(f"{url}/orders/latest", timeout=HTTP_TIMEOUT).json()["orderId"]
    assert latest >= order_id + 40
    assert requests.get(f"{url}/orders/{latest}", timeout=HTTP_TIMEOUT).status_code == 200
