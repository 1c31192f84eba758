"""The in-process proof scenarios: each layer service under the seeded fault schedule, one table each.

Registered in :data:`SCENARIOS` (the hot-post ones live in :mod:`proof.hot`), run by
:mod:`proof.__main__` (``make proof``), which puts the repository and the layer on ``sys.path``.
Every DynamoDB call of the layer's client goes through the fault injector at :data:`FAULT_RATES`.
"""

from __future__ import annotations

import functools
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from proof import adopt, hot
from proof.checker import History, Report
from proof.linearizability import FAIL, OK, BoundedCounter, GrowOnlySet, MonotonicRegister, Recorder, SumRegister, check, resent
from testkit.faults import FaultInjector

FAULT_RATES = {"after_commit": 0.04, "resend": 0.03, "conflict": 0.04, "throttle": 0.03, "unavailable": 0.02}
CONFLICTING = {"TransactWriteItems", "TransactGetItems", "UpdateItem", "PutItem", "DeleteItem"}
WRITES = {"TransactWriteItems", "UpdateItem", "PutItem", "DeleteItem"}
SEARCH_BUDGET = 5.0
"""Seconds the linearizability search may spend on one row's history before it says ``unknown``."""
LATE_RATE = 0.02
"""The reservations rows' share of writes that land late (after the caller's next call)."""


def with_faults(seed: int, exclude: frozenset[str] = frozenset(), *, late: float = 0.0) -> FaultInjector:
    """The layer's client under :data:`FAULT_RATES` (but ``exclude``); ``late``: that rate of
    writes held and landing late (testkit.faults ``late``), at least 3 of them."""
    from counters.core import client as dynamo

    dynamo.reset_client()
    injector = FaultInjector(dynamo.client(), seed=seed)
    if late:
        injector.add("late", rate=late, operations=WRITES, at_least=3)
    for kind, rate in FAULT_RATES.items():
        if kind in exclude:
            continue
        # TransactionConflict comes from writes and transactional reads, not from plain reads
        injector.add(kind, rate=rate, operations=CONFLICTING if kind == "conflict" else None)
    return injector


def new_table(ddb: Any) -> str:
    name = f"proof-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(name))
    return name


def run_parallel(tasks: list[Callable[[], None]], clients: int) -> None:
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for future in [pool.submit(t) for t in tasks]:
            future.result()


# ----------------------------------------------------------------------------- scenarios
def likes_scenario(ddb: Any, seed: int, clients: int, size: int, *, limits: bool = False) -> list[Report]:
    """Distinct users like (and pre-liked users unlike) one hot post, every request sent twice.
    With ``limits``, DynamoDB's per-partition limits and transaction conflicts are modelled too
    (testkit/limits.py, scale 20): most attempts on the hot post are throttled or cancelled."""
    from botocore.exceptions import BotoCoreError, ClientError

    from counters.core import client as layer_client
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.services.likes import Likes
    from testkit.limits import LimitModel

    name = new_table(ddb)
    setup = Likes(name)
    setup.posts.create_post(author_id="proof", body="hot", post_id="p")
    unlikers = [f"x{i}" for i in range(size // 4)]
    for user in unlikers:
        setup.toggling.like("p", user)
    injector = with_faults(seed)
    model = LimitModel(layer_client.client(), scale=20.0) if limits else None
    likes = Likes(name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01))
    history = History(base=len(unlikers), floor=0)
    calls = Recorder()
    rng = random.Random(seed)
    intents = [("like", f"u{i}") for i in range(size)] + [("unlike", u) for u in unlikers]
    rng.shuffle(intents)
    stop = threading.Event()

    def intent_task(kind: str, user: str) -> Callable[[], None]:
        def run() -> None:
            op = history.invoke(f"{kind}:{user}", 1 if kind == "like" else -1)
            handle = calls.invoke("r", "append", 1 if kind == "like" else -1)
            status = "unknown"
            for _ in range(2):  # every request is sent twice (a client retry / redelivery)
                try:
                    (likes.toggling.like if kind == "like" else likes.toggling.unlike)("p", user)
                    status = "ok"
                except ContentionError:
                    pass
            history.complete(op, status)
            calls.complete(handle, OK if status == "ok" else None)

        return run

    def reader() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            handle = calls.invoke("r", "read")
            try:
                item = ddb.get_item(TableName=name, Key={"PK": {"S": "POST#p"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
            except (BotoCoreError, ClientError):  # a timed-out or refused read answers nothing: read again
                calls.drop(handle)
                continue
            calls.complete(handle, int(item["likeTally"]["N"]))
            history.read(int(item["likeTally"]["N"]), t0)
            time.sleep(0.005)

    reading = threading.Thread(target=reader)
    reading.start()
    run_parallel([intent_task(k, u) for k, u in intents], clients)
    stop.set()
    reading.join()
    injector.detach()
    limited = sum(model.throttles.values()) + sum(model.conflicts.values()) if model else 0
    if model:
        model.detach()
    audit = Likes(name).audits.audit("p")
    label = "likes (refcount, transaction + key guard)" + (", one post under the partition limit model" if limits else "")
    report = history.check(label, audit.stored, documented="exact", faults=sum(injector.injected.values()) + limited)
    report.duplicates = max(0, audit.drift)  # a tally above its likes (LIKE# items, tombstones aside) counted something twice
    report.under += max(0, -audit.drift)
    handle = calls.invoke("r", "read")
    calls.complete(handle, audit.stored)
    # the post's set of likers, read as its tally: every user likes or unlikes once (re-sent: the same
    # request), so the set's size moves by one a call, a sum register from the pre-liked users
    report.linearizable = check(SumRegister(initial=len(unlikers)), calls.history(), budget=SEARCH_BUDGET)
    ddb.delete_table(TableName=name)
    return [report]


def _poll(stop: threading.Event, history: History, read: Callable[[], int], calls: Recorder | None = None) -> threading.Thread:
    """A reader polling ``read`` into ``history`` (and, as ``("read",)`` calls on key ``r``, into ``calls``)."""
    from counters.core.errors import ContentionError

    def loop() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            handle = calls.invoke("r", "read") if calls is not None else 0
            try:
                value = read()
            except ContentionError:  # a busy read (throttled, timed out) answers nothing: the reader asks again
                if calls is not None:
                    calls.drop(handle)  # a read without an answer tells nothing
                continue
            if calls is not None:
                calls.complete(handle, value)
            history.read(value, t0)
            time.sleep(0.005)

    thread = threading.Thread(target=loop)
    thread.start()
    return thread


def reservation_cases(shards: int = 4) -> list[tuple[str, str, int, dict[str, int | str], str]]:
    """(label, strategy, shards, its options, documented guarantee): every registered approach once per
    variant of its settings (atomic: under, over), then each shardable one over ``shards`` (its first variant)."""
    from counters.primitives.approaches import NAMES, approach_class, names, variants

    def label(name: str, options: dict[str, int | str], spread: str) -> str:
        return ", ".join([name + spread, *(f"{key} {value}" for key, value in options.items())])

    cases = [(label(n, o, ""), n, 1, o, approach_class(n).promise(**o)) for n in NAMES for o in variants(n)]
    for n in names(shardable=True):
        o = variants(n)[0]
        cases.append((label(n, o, f" x{shards} shards"), n, shards, o, approach_class(n).promise(**o)))
    return cases


def reservations_scenario(ddb: Any, seed: int, clients: int, size: int) -> list[Report]:
    """Every approach of seed 02 reserving from one resource whose capacity is 3/4 of the demand.

    Exact approaches: the client re-sends an intent (same Idempotency-Key) until it gets a
    definite answer, then once more (a redelivery). Inexact ones (atomic, occ): the caller
    follows the approach's own policy and does not re-send (their retry is the policy).
    """
    from counters.core.errors import InsufficientCapacity, SlotsFull
    from counters.core.failures import RetryPolicy
    from counters.services.reservations import Reservations

    reports = []
    from counters.primitives.approaches import approach_class

    for label, strategy, shards, options, documented in reservation_cases():
        name = new_table(ddb)
        rng = random.Random(seed)
        intents = [(f"k{i}", rng.randint(1, 3)) for i in range(size)]
        capacity = (sum(q for _, q in intents) * 3) // 4
        Reservations(name).create_resource("r", capacity=capacity, strategy=strategy, shards=shards)
        # A forced resend is an SDK retry: atomic's and occ's guarantees presume SDK retries are off
        # (the layer's client has them off; atomic's refuses a client with them), and their
        # over-application under them has its own test (an SDK re-send past another writer looks
        # to occ like a lost race). What the layer can meet on AWS instead, a send whose outcome was
        # unknown landing late, after occ's re-read, is ``late`` (testkit.faults), drawn for them.
        inexact = not approach_class(strategy).exact
        injector = with_faults(seed, exclude=frozenset({"resend"}) if inexact else frozenset(), late=LATE_RATE)
        retry = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
        service = Reservations(name, retry=retry, options={"set": {"max_tokens": size}, **({strategy: options} if options else {})})
        reader = Reservations(name)
        history = History(base=0, floor=0, ceiling=capacity)
        calls = Recorder()
        exact = documented == "exact"

        def task(key: str, quantity: int) -> Callable[[], None]:
            def run() -> None:
                op = history.invoke(key, quantity)
                handle = calls.invoke("r", "reserve", quantity)
                status, sends = "unknown", 0
                while sends < (4 if exact else 1):
                    sends += 1
                    try:
                        service.reserve("r", quantity, key)
                        status = "ok"
                    except (InsufficientCapacity, SlotsFull):
                        status = "fail" if status != "ok" else status
                    except Exception:  # noqa: BLE001 - contention, ambiguous or a 500: unknown to the client
                        continue  # an exact client re-sends the same key
                    if exact and sends == 1:
                        continue  # one redelivery of a definite answer too
                    break
                history.complete(op, status)
                calls.complete(handle, {"ok": OK, "fail": FAIL}.get(status))

            return run

        stop = threading.Event()
        polling = _poll(stop, history, lambda: int(reader.get_resource("r")["reserved"]), calls)
        run_parallel([task(k, q) for k, q in intents], clients)
        stop.set()
        polling.join()
        injector.detach()
        final = int(reader.get_resource("r")["reserved"])
        handle = calls.invoke("r", "read")
        calls.complete(handle, final)
        report = history.check(f"reservations: {label}", final, documented=documented, faults=sum(injector.injected.values()))
        # sharded takes refuse on the shards they saw; one item's threshold refuses only what did not fit.
        # exact, atomic under, occ: each call at most once; atomic over: each send (up to the budget) at most once
        model = BoundedCounter(capacity, strict_fail=shards == 1)
        recorded = calls.history()
        history_ = resent(recorded, service.store.retry.max_attempts) if documented == "over" else recorded
        report.linearizable = check(model, history_, budget=SEARCH_BUDGET)
        report.notes.append(f"{injector.injected['late']} writes landed late, {injector.injected['resend']} resent")
        reports.append(report)
        ddb.delete_table(TableName=name)
    return reports


def occ_late_scenario(ddb: Any, seed: int, clients: int, size: int) -> list[Report]:
    """occ on a seeded schedule: one client, a share of its writes landing late (``late``: the caller
    is told 500, the same write lands right after its re-read of the item), and each time one lands
    another writer takes 1 before the caller's re-send; every call followed by a strong read. Only
    the late landing is injected, so every answer is definite unless occ says ambiguous: applying a
    call twice (a next round after the other writer's tag) shows as a read no order explains.
    ``clients`` is not used: one client makes the schedule the seed's alone."""
    from counters.core import client as dynamo
    from counters.core.errors import InsufficientCapacity
    from counters.core.failures import RetryPolicy
    from counters.services.reservations import Reservations

    del clients
    name = new_table(ddb)
    rng = random.Random(seed)
    intents = [(f"k{i}", rng.randint(1, 3)) for i in range(size)]
    capacity = sum(q for _, q in intents) * 3 // 4 + size
    Reservations(name).create_resource("r", capacity=capacity, strategy="occ")
    dynamo.reset_client()
    injector = FaultInjector(dynamo.client(), seed=seed).add("late", rate=0.3, operations={"UpdateItem"}, at_least=3)
    service = Reservations(
        name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01), options={"atomic": {"policy": "under"}}
    )
    plain = Reservations(name, dynamodb=dynamo_plain())
    history = History(base=0, floor=0, ceiling=capacity)
    calls = Recorder()
    rivals = [0]

    def read() -> None:
        t0 = time.monotonic()
        handle = calls.invoke("r", "read")
        value = int(plain.get_resource("r")["reserved"])
        calls.complete(handle, value)
        history.read(value, t0)

    def rival() -> None:  # another writer, between our late write's landing and our re-send
        rivals[0] += 1
        op = history.invoke(f"rival{rivals[0]}", 1)
        handle = calls.invoke("r", "reserve", 1)
        plain.reserve("r", 1, f"rival{rivals[0]}")
        history.complete(op, "ok")
        calls.complete(handle, OK)

    injector.landed = rival
    for key, quantity in intents:
        op = history.invoke(key, quantity)
        handle = calls.invoke("r", "reserve", quantity)
        status = "unknown"
        try:
            service.reserve("r", quantity, key)
            status = "ok"
        except InsufficientCapacity:
            status = "fail"
        except Exception:  # noqa: BLE001, S110 - ambiguous: unknown to the client
            pass
        history.complete(op, status)
        calls.complete(handle, {"ok": OK, "fail": FAIL}.get(status))
        read()
    injector.detach()
    final = int(plain.get_resource("r")["reserved"])
    report = history.check("reservations: occ, late writes and a rival writer (one client, seeded)", final, documented="under")
    report.faults = sum(injector.injected.values())
    report.linearizable = check(BoundedCounter(capacity), calls.history(), budget=SEARCH_BUDGET)
    report.notes.append(f"{injector.injected['late']} writes landed late, {rivals[0]} rival takes after them")
    if rivals[0] < 3:
        report.unexercised.append(f"rival writer after a late landing ({rivals[0]} < 3)")
    ddb.delete_table(TableName=name)
    return [report]


def ledger_scenario(ddb: Any, seed: int, clients: int, size: int) -> list[Report]:
    """Appends (every one sent twice) while two compactors and readers run; retry window 2 s."""
    from counters.core.errors import CounterError
    from counters.core.failures import RetryPolicy
    from counters.primitives.ledger import new_key
    from counters.services.ledgers import Ledgers

    name = new_table(ddb)
    injector = with_faults(seed)
    ledger = Ledgers(name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01), retry_window=2.0, margin=1.0)
    plain = Ledgers(name, dynamodb=dynamo_plain(), retry_window=2.0, margin=1.0)
    history = History(base=0)
    calls = Recorder()
    rng = random.Random(seed)
    amounts = [rng.choice([-3, -2, -1, 1, 2, 3, 5]) for _ in range(size * 2)]

    def task(amount: int) -> Callable[[], None]:
        def run() -> None:
            key = new_key()
            op = history.invoke(key, amount)
            handle = calls.invoke("r", "append", amount)
            status = "unknown"
            for _ in range(2):
                try:
                    ledger.post_entry("l", amount, key)  # as the API answers: 201/200 or an error
                    status = "ok"
                except Exception:  # noqa: BLE001 - a refusal or a 503: unknown to the client; it re-sends once
                    pass
            history.complete(op, status)
            calls.complete(handle, OK if status == "ok" else None)

        return run

    stop = threading.Event()

    def compactor() -> None:
        while not stop.is_set():
            try:
                plain.compact("l")
            except CounterError:
                pass
            time.sleep(0.2)

    compactors = [threading.Thread(target=compactor) for _ in range(2)]
    for t in compactors:
        t.start()
    polling = _poll(stop, history, lambda: plain.balance("l").balance, calls)
    run_parallel([task(a) for a in amounts], clients)
    time.sleep(3.5)  # let the last entries age past window + margin, so compaction merges them
    plain.compact("l")
    stop.set()
    polling.join()
    for t in compactors:
        t.join()
    injector.detach()
    balance = plain.balance("l")
    report = history.check(
        "ledger (append + concurrent compaction)", balance.balance, documented="exact", faults=sum(injector.injected.values())
    )
    report.notes.append(f"pending after final compaction: {balance.pending_entries}")
    handle = calls.invoke("r", "read")
    calls.complete(handle, balance.balance)
    report.linearizable = check(SumRegister(), calls.history(), budget=SEARCH_BUDGET)
    ddb.delete_table(TableName=name)
    return [report]


def orders_scenario(ddb: Any, seed: int, clients: int, size: int) -> list[Report]:
    """Orders in both modes (every request re-sent until answered, plus once more), then the
    pointer fed every id in random order, duplicated: unique ids, no holes in gapless mode,
    a pointer that never decreases and ends at the greatest id."""
    from counters.core.failures import RetryPolicy
    from counters.primitives.pointer import Pointer
    from counters.services.orders import Orders

    reports = []
    for mode in ("fast", "gapless"):
        name = new_table(ddb)
        injector = with_faults(seed)
        orders = Orders(name, mode=mode, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01))
        ids: dict[str, set[int]] = {}
        lock = threading.Lock()
        calls = Recorder()

        def task(key: str) -> Callable[[], None]:
            def run() -> None:
                answered = 0
                for _ in range(12):
                    handle = calls.invoke(key, "add", key)
                    try:
                        placed = orders.place(key=key, customer_id="c", items=[{"sku": "s", "quantity": 1}])
                    except Exception:  # noqa: BLE001 - unanswered: re-send the same key
                        calls.complete(handle, None)
                        continue
                    calls.complete(handle, int(placed.order["orderId"]))
                    with lock:
                        ids.setdefault(key, set()).add(int(placed.order["orderId"]))
                    answered += 1
                    if answered == 2:
                        return

            return run

        run_parallel([task(f"key-{i}") for i in range(size)], clients)
        injector.detach()
        all_ids = [i for s in ids.values() for i in s]
        per_key_dupes = sum(len(s) - 1 for s in ids.values())  # one key answered with two ids
        shared = len(all_ids) - len(set(all_ids))  # one id given to two keys
        report = Report(
            name=f"orders: {mode} ids",
            operations=size,
            faults=sum(injector.injected.values()),
            over=0,
            under=size - len(ids),
            duplicates=per_key_dupes + shared,
            breaches=0 if mode == "fast" else len(set(range(1, len(set(all_ids)) + 1)) ^ set(all_ids)),
            bad_reads=0,
            final=len(set(all_ids)),
            acknowledged=len(ids),
            possible=size,
            documented="exact",
        )
        report.notes.append(f"max id {max(all_ids, default=0)}")
        # each key's answers against a grow-only set of (key, id): one id per key, however often re-sent
        # (partitioned by key; one id given to two keys is the duplicates column)
        report.linearizable = check(GrowOnlySet(), calls.history(), budget=SEARCH_BUDGET)
        reports.append(report)
        ddb.delete_table(TableName=name)

    name = new_table(ddb)
    injector = with_faults(seed)
    pointer = Pointer(name, "LAST_ORDER", attribute="orderId", retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01))
    reader = Pointer(name, "LAST_ORDER", attribute="orderId", dynamodb=dynamo_plain())
    values = [v for v in range(1, size + 1) for _ in range(2)]
    random.Random(seed).shuffle(values)
    seen: list[int] = []
    stop = threading.Event()
    calls = Recorder()

    def poll() -> None:
        while not stop.is_set():
            handle = calls.invoke("p", "read")
            value, _ = reader.read()
            calls.complete(handle, value or 0)
            seen.append(value or 0)
            time.sleep(0.002)

    polling = threading.Thread(target=poll)
    polling.start()

    def advance(value: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(12):
                handle = calls.invoke("p", "advance", value)
                try:
                    pointer.advance(value)
                except Exception:  # noqa: BLE001 - a redelivery, as a queue would do
                    calls.complete(handle, None)
                    continue
                calls.complete(handle, OK)
                return

        return run

    run_parallel([advance(v) for v in values], clients)
    stop.set()
    polling.join()
    injector.detach()
    handle = calls.invoke("p", "read")
    final, _ = reader.read()
    calls.complete(handle, final or 0)
    decreases = sum(1 for a, b in zip(seen, seen[1:], strict=False) if b < a)
    pointer_report = Report(
        name="pointer: LAST_ORDER, shuffled + duplicated updates",
        operations=len(values),
        faults=sum(injector.injected.values()),
        over=max(0, (final or 0) - size),
        under=max(0, size - (final or 0)),
        duplicates=0,
        breaches=0,
        bad_reads=decreases,
        final=final or 0,
        acknowledged=size,
        possible=size,
        documented="exact",
    )
    pointer_report.linearizable = check(MonotonicRegister(), calls.history(), budget=SEARCH_BUDGET)
    reports.append(pointer_report)
    ddb.delete_table(TableName=name)
    return reports


def dynamo_plain() -> Any:
    """A client without fault injection (readers and compactors measure, they are not under test)."""
    import boto3

    from counters.core.client import CLIENT_CONFIG

    return boto3.session.Session().client("dynamodb", config=CLIENT_CONFIG)


KIT = hot.Kit(new_table=new_table, with_faults=with_faults, run_parallel=run_parallel, plain_client=dynamo_plain)

SCENARIOS: dict[str, Callable[[Any, int, int, int], list[Report]]] = {
    "likes": likes_scenario,
    "likes-limits": functools.partial(likes_scenario, limits=True),
    "likes-hot": functools.partial(hot.likes_hot_scenario, kit=KIT),
    "likes-order": functools.partial(hot.likes_order_scenario, kit=KIT),
    "likes-switch": functools.partial(hot.likes_switch_scenario, kit=KIT),
    "likes-grow": functools.partial(hot.likes_grow_scenario, kit=KIT),
    "reservations": reservations_scenario,
    "occ-late": occ_late_scenario,
    "ledger": ledger_scenario,
    "orders": orders_scenario,
    "refcount-adopt": functools.partial(adopt.refcount_adopt_scenario, with_faults=with_faults, run_parallel=run_parallel),
}
