"""``make proof``: every scenario under the same seeded fault schedule, one table, a verdict each.

Runs against DynamoDB Local (started here) with the fault injector on the layer's client:
errors after commit, forced resends, TransactionConflict, throttling and 500s before
sending, each at the rates below. Then the same guarantees over the whole API
(:mod:`proof.http`): HTTP scenarios against the local stack with faults in every function's
DynamoDB and SQS calls and in the queue and stream deliveries. ``--stress N`` runs N busy
processes beside it all. Exits non-zero if any scenario breaks its documented guarantee.
Results: printed, written to proof/results/latest.md, and written to docs/proof-results.md
(the page docs/proof.md links to) under a header naming the commit, date, seed and stress level.
Both files are overwritten by every run.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import shlex
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]
for key, value in {
    "AWS_ACCESS_KEY_ID": "proof",
    "AWS_SECRET_ACCESS_KEY": "proof",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}.items():
    os.environ.setdefault(key, value)

from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.template import read_stack  # noqa: E402
from proof import hot  # noqa: E402
from proof.checker import History, Report, details, table  # noqa: E402
from testkit.faults import FaultInjector  # noqa: E402

FAULT_RATES = {"after_commit": 0.04, "resend": 0.03, "conflict": 0.04, "throttle": 0.03, "unavailable": 0.02}
CONFLICTING = {"TransactWriteItems", "TransactGetItems", "UpdateItem", "PutItem", "DeleteItem"}
RESULTS = ROOT / "proof" / "results"
DOCS_RESULTS = ROOT / "docs" / "proof-results.md"
GENERATED = ("docs/proof-results.md", "docs/bench-results.md")  # not "uncommitted changes" of the code measured


def with_faults(seed: int, exclude: frozenset[str] = frozenset()) -> FaultInjector:
    from counters.core import client as dynamo

    dynamo.reset_client()
    injector = FaultInjector(dynamo.client(), seed=seed)
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
    from counters.core import client as layer_client
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.services.likes import Likes
    from testkit.limits import LimitModel

    name = new_table(ddb)
    setup = Likes(name)
    setup.create_post(author_id="proof", body="hot", post_id="p")
    unlikers = [f"x{i}" for i in range(size // 4)]
    for user in unlikers:
        setup.like("p", user)
    injector = with_faults(seed)
    model = LimitModel(layer_client.client(), scale=20.0) if limits else None
    likes = Likes(name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01))
    history = History(base=len(unlikers), floor=0)
    rng = random.Random(seed)
    intents = [("like", f"u{i}") for i in range(size)] + [("unlike", u) for u in unlikers]
    rng.shuffle(intents)
    stop = threading.Event()

    def intent_task(kind: str, user: str) -> Callable[[], None]:
        def run() -> None:
            op = history.invoke(f"{kind}:{user}", 1 if kind == "like" else -1)
            status = "unknown"
            for _ in range(2):  # every request is sent twice (a client retry / redelivery)
                try:
                    (likes.like if kind == "like" else likes.unlike)("p", user)
                    status = "ok"
                except ContentionError:
                    pass
            history.complete(op, status)

        return run

    def reader() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            item = ddb.get_item(TableName=name, Key={"PK": {"S": "POST#p"}, "SK": {"S": "META"}}, ConsistentRead=True)["Item"]
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
    audit = Likes(name).audit("p")
    label = "likes (refcount, transaction + key guard)" + (", one post under the partition limit model" if limits else "")
    report = history.check(label, audit.stored, documented="exact", faults=sum(injector.injected.values()) + limited)
    report.duplicates = max(0, audit.drift)  # a tally above its likes (LIKE# items, tombstones aside) counted something twice
    report.under += max(0, -audit.drift)
    ddb.delete_table(TableName=name)
    return [report]


def _poll(stop: threading.Event, history: History, read: Callable[[], int]) -> threading.Thread:
    def loop() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            history.read(read(), t0)
            time.sleep(0.005)

    thread = threading.Thread(target=loop)
    thread.start()
    return thread


# (label, strategy, shards, atomic policy, documented guarantee)
RESERVATION_CASES = [
    ("atomic, policy under", "atomic", 1, "under", "under"),
    ("atomic, policy over", "atomic", 1, "over", "over"),
    ("occ", "occ", 1, "under", "under"),
    ("occ_history (N=32)", "occ_history", 1, "under", "exact"),
    ("crt", "crt", 1, "under", "exact"),
    ("marker", "marker", 1, "under", "exact"),
    ("set", "set", 1, "under", "exact"),
    ("atomic x4 shards, under", "atomic", 4, "under", "under"),
    ("crt x4 shards", "crt", 4, "under", "exact"),
    ("marker x4 shards", "marker", 4, "under", "exact"),
]


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
    for label, strategy, shards, policy, documented in RESERVATION_CASES:
        name = new_table(ddb)
        rng = random.Random(seed)
        intents = [(f"k{i}", rng.randint(1, 3)) for i in range(size)]
        capacity = (sum(q for _, q in intents) * 3) // 4
        Reservations(name).create_resource("r", capacity=capacity, strategy=strategy, shards=shards)
        # A forced resend is an SDK retry: atomic's guarantee presumes SDK retries are off (its
        # client refuses otherwise), and its over-application under them has its own test.
        injector = with_faults(seed, exclude=frozenset({"resend"}) if strategy == "atomic" else frozenset())
        service = Reservations(
            name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01), atomic_policy=policy, max_tokens=size
        )
        reader = Reservations(name)
        history = History(base=0, floor=0, ceiling=capacity)
        exact = documented == "exact"

        def task(key: str, quantity: int) -> Callable[[], None]:
            def run() -> None:
                op = history.invoke(key, quantity)
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

            return run

        stop = threading.Event()
        polling = _poll(stop, history, lambda: int(reader.get_resource("r")["reserved"]))
        run_parallel([task(k, q) for k, q in intents], clients)
        stop.set()
        polling.join()
        injector.detach()
        final = int(reader.get_resource("r")["reserved"])
        reports.append(history.check(f"reservations: {label}", final, documented=documented, faults=sum(injector.injected.values())))
        ddb.delete_table(TableName=name)
    return reports


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
    rng = random.Random(seed)
    amounts = [rng.choice([-3, -2, -1, 1, 2, 3, 5]) for _ in range(size * 2)]

    def task(amount: int) -> Callable[[], None]:
        def run() -> None:
            key = new_key()
            op = history.invoke(key, amount)
            status = "unknown"
            for _ in range(2):
                try:
                    ledger.post_entry("l", amount, key)  # as the API answers: 201/200 or an error
                    status = "ok"
                except Exception:  # noqa: BLE001 - a refusal or a 503: unknown to the client; it re-sends once
                    pass
            history.complete(op, status)

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
    polling = _poll(stop, history, lambda: plain.balance("l").balance)
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

        def task(key: str) -> Callable[[], None]:
            def run() -> None:
                answered = 0
                for _ in range(12):
                    try:
                        placed = orders.place(key=key, customer_id="c", items=[{"sku": "s", "quantity": 1}])
                    except Exception:  # noqa: BLE001 - unanswered: re-send the same key
                        continue
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

    def poll() -> None:
        while not stop.is_set():
            value, _ = reader.read()
            seen.append(value or 0)
            time.sleep(0.002)

    polling = threading.Thread(target=poll)
    polling.start()

    def advance(value: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(12):
                try:
                    pointer.advance(value)
                    return
                except Exception:  # noqa: BLE001 - a redelivery, as a queue would do
                    continue

        return run

    run_parallel([advance(v) for v in values], clients)
    stop.set()
    polling.join()
    injector.detach()
    final, _ = reader.read()
    decreases = sum(1 for a, b in zip(seen, seen[1:], strict=False) if b < a)
    reports.append(
        Report(
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
    )
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
    "reservations": reservations_scenario,
    "ledger": ledger_scenario,
    "orders": orders_scenario,
}


SPIN = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:  # bounded: the run's limit, or the proof gone
    for _ in range(200_000):
        pass
"""
STRESS_LIMIT_SECONDS = 3600.0


class Stress:
    """N pure-CPU spin processes beside the proof, bounded by the run (and by an hour)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Stress:
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN, str(STRESS_LIMIT_SECONDS), str(os.getpid())]))
        return self

    def __exit__(self, *_: object) -> None:
        for proc in self.procs:  # only the processes started here, by their own handle
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def results_page(body: str, *, commit: str, dirty: bool, date: str, seed: int, stress: str, command: str) -> str:
    """docs/proof-results.md: this run's tables under a header saying where they come from."""
    code = f"`{commit}`" + (" + uncommitted changes" if dirty else "")
    return (
        "# Proof results\n\n"
        "Generated by `make proof` (`proof/__main__.py`) and overwritten by every run: do not edit by hand.\n"
        "What the scenarios and columns mean: [proof.md](proof.md).\n\n"
        "| commit | date (UTC) | seed | stress | command |\n"
        "|---|---|---|---|---|\n"
        f"| {code} | {date} | {seed} | {stress} | `{command}` |\n\n"
        f"{body.rstrip()}\n"
    )


def main(argv: list[str] | None = None) -> int:
    from proof import http

    parser = argparse.ArgumentParser(prog="python -m proof")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--size", type=int, default=300, help="distinct intents per in-process scenario")
    parser.add_argument("--only", default=None, help="comma-separated in-process scenario names ('' for none)")
    parser.add_argument("--http", default=",".join(http.SCENARIOS), help="comma-separated HTTP scenario names ('' for none)")
    parser.add_argument("--http-scale", type=float, default=0.8, help="multiplies the HTTP scenarios' request counts")
    parser.add_argument("--http-clients", type=int, default=16)
    parser.add_argument("--stress", type=int, default=0, metavar="N", help="N busy processes (CPU spin loops) beside the proof")
    args = parser.parse_args(argv)
    names = [n for n in (args.only.split(",") if args.only is not None else SCENARIOS) if n]
    http_names = [n for n in args.http.split(",") if n]
    reports: list[Report] = []
    http_reports: list[Any] = []
    started = time.monotonic()
    timings = {}
    with Stress(args.stress), DynamoDBLocal() as ddb_local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
        ddb = dynamodb_client(ddb_local.endpoint)
        for name in names:
            reports += SCENARIOS[name](ddb, args.seed, args.clients, args.size)
        timings["in-process"] = time.monotonic() - started
        if http_names:
            from devstack.sqs import SqsEmulator

            http_started = time.monotonic()
            emulator = SqsEmulator().start()
            try:
                http_reports = http.run(
                    http_names,
                    ddb_local.endpoint,
                    emulator.endpoint,
                    seed=args.seed,
                    scale=args.http_scale,
                    clients=args.http_clients,
                    log=RESULTS / "http-functions.log",
                )
            finally:
                emulator.stop()
            timings["HTTP"] = time.monotonic() - http_started
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    rates = ", ".join(f"{k} {v:.0%}" for k, v in FAULT_RATES.items())
    stress = f", --stress {args.stress} ({args.stress} CPU spin processes on {os.cpu_count()} cores)" if args.stress else ""
    spent = "; ".join(f"{k} {v:.0f} s" for k, v in timings.items())
    text = f"Measured on commit `{commit}`, seed {args.seed}{stress}; {time.monotonic() - started:.0f} s ({spent}).\n\n"
    if reports:
        text += f"In-process: {args.clients} clients, faults per DynamoDB call: {rates}.\n\n{table(reports)}\n\n"
        found = details(reports)
        if found:
            text += f"{found}\n\n"
    if http_reports:
        text += f"{http.describe()} {args.http_clients} HTTP clients (functions' output: proof/results/http-functions.log).\n\n"
        text += f"{http.table(http_reports)}\n\n"
        found = http.details(http_reports)
        if found:
            text += f"{found}\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.md").write_text(text)
    DOCS_RESULTS.write_text(
        results_page(
            text,
            commit=commit,
            dirty=bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{g}" for g in GENERATED))),
            date=time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            seed=args.seed,
            stress=f"--stress {args.stress} ({args.stress} CPU spin processes on {os.cpu_count()} cores)" if args.stress else "none",
            command=shlex.join(["python", "-m", "proof", *(sys.argv[1:] if argv is None else argv)]),
        )
    )
    print(f"written to {(RESULTS / 'latest.md').relative_to(ROOT)} and {DOCS_RESULTS.relative_to(ROOT)}")
    return 0 if all(r.verdict == "holds" for r in [*reports, *http_reports]) else 1


if __name__ == "__main__":
    sys.exit(main())
