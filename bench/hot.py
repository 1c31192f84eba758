"""``python -m bench.hot``: one hot post under DynamoDB's limits, modelled (testkit.limits).

The ``standard`` baseline of the "hot posts" work: many distinct users like ONE post
(``Likes.like``: one TransactWriteItems, the LIKE# Put + the META ADD, 4 WCU on one partition
key) from N threads, for a fixed time, against DynamoDB Local, with and without
:class:`testkit.limits.LimitModel` on the layer's client. A single-item PutItem on one partition
key (1 WCU) is the control: its ceiling with the model is the model's per-partition rate, which
shows that the model, not DynamoDB Local or the machine, is what binds.

Rows
    * ``no model``: DynamoDB Local's own speed on this machine (no limits, no conflicts);
    * ``model``: the default model (``transaction_ms`` of the service x ``scale`` held per
      transaction, so overlapping likes on META conflict as they would on the service);
    * ``model, no hold``: capacity only (``transaction_ms=0, hold_during_call=False``: no
      conflict can happen): where the WCU ceiling alone puts a like (1000/scale / 4 likes/s).

Sustained rate: completions after the first ``--warm`` seconds (the bucket starts full with
``burst_seconds`` of capacity) divided by the time they took. Every call goes through the
layer's retry engine (``RetryPolicy()``: 6 attempts, 20..500 ms full-jitter backoff); a like
whose budget runs out is a ``ContentionError`` (the API's 503/202), counted as ``gave up``.
Not part of the tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_REGION", "us-east-1")

from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.template import read_stack  # noqa: E402
from testkit.limits import LimitModel  # noqa: E402

SCALE = 20.0
"""DynamoDB's 1,000 WCU/s per partition / 20 = 50 WCU/s: 12.5 likes/s and 50 PutItem/s on one
key, far below what DynamoDB Local does on 2 cores (~150-200 likes/s, ~200 PutItem/s in
docs/bench-results.md), so the model's limit binds, not the machine."""


@dataclass
class Row:
    case: str
    model: str
    clients: int
    rate: float
    done: int
    gave_up: int
    throttles: int
    conflicts: int
    model_wcu: float
    reported_wcu: float
    cost_wcu: float
    audit: str


def _drive(op: Callable[[int], Any], clients: int, seconds: float, warm: float) -> tuple[float, list[Any], int]:
    """Run ``op(i)`` from ``clients`` threads for ``seconds``; (sustained ops/s, results, gave up)."""
    lock = threading.Lock()
    counter = iter(range(10**9))
    stamps: list[float] = []
    results: list[Any] = []
    gave_up = 0
    start = time.perf_counter()
    end = start + seconds

    def worker() -> None:
        nonlocal gave_up
        from counters.core.errors import ContentionError

        while time.perf_counter() < end:
            with lock:
                i = next(counter)
            try:
                r = op(i)
            except ContentionError:
                with lock:
                    gave_up += 1
                continue
            now = time.perf_counter()
            with lock:
                stamps.append(now)
                results.append(r)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = sorted(s for s in stamps if s >= start + warm)
    rate = len(after) / (after[-1] - (start + warm)) if len(after) > 1 else 0.0
    return rate, results, gave_up


def measure(ddb: Any, case: str, label: str, limits_kwargs: dict[str, Any] | None, clients: int, seconds: float, warm: float) -> Row:
    from counters.core import client as dynamo
    from counters.core.engine import run
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.core.outcome import Outcome
    from counters.services.likes import Likes

    table = f"hot-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(table))
    dynamo.reset_client()
    layer = dynamo.client()
    likes = Likes(table)
    audit = ""
    try:
        if case == "like":
            likes.create_post(author_id="bench", body="hot", post_id="hot")
        model = LimitModel(layer, **limits_kwargs) if limits_kwargs is not None else None
        if case == "like":

            def op(i: int) -> Any:
                return likes.like("hot", f"u{i}").result

            cost = 4.0
        else:
            policy = RetryPolicy()

            def op(i: int) -> Any:
                item = {"PK": {"S": "HOT#put"}, "SK": {"S": f"E#{i:09d}"}, "n": {"N": "1"}}
                report = run(layer.put_item, {"TableName": table, "Item": item}, policy=policy, write=True)
                if report.outcome is not Outcome.APPLIED:  # the budget ran out: what Likes raises too
                    raise ContentionError(f"put {i} gave up after {report.attempts} attempts")
                return report

            cost = 1.0
        rate, results, gave_up = _drive(op, clients, seconds, warm)
        if model is not None:
            model.detach()
        done = len(results)
        reported = sum(r.capacity.write_units for r in results) / max(1, done)
        if case == "like":
            a = likes.audit("hot")
            audit = f"{a.stored} = {a.counted}" if a.drift == 0 else f"DRIFT {a.stored} vs {a.counted}"
        return Row(
            case="like (refcount link, 1 post)" if case == "like" else "PutItem on 1 partition key",
            model=label,
            clients=clients,
            rate=rate,
            done=done,
            gave_up=gave_up,
            throttles=sum(model.throttles.values()) if model else 0,
            conflicts=sum(model.conflicts.values()) if model else 0,
            model_wcu=model.total("wcu") / max(1, done) if model else 0.0,
            reported_wcu=reported,
            cost_wcu=cost,
            audit=audit,
        )
    finally:
        dynamo.reset_client()
        ddb.delete_table(TableName=table)


def table(rows: list[Row]) -> str:
    lines = [
        "| operation | limits | clients | sustained ops/s | done | gave up | throttles/op | conflicts/op | WCU/op (model) | WCU/op (DynamoDB Local) | WCU/op (cost model) | tally = likes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        per = max(1, r.done)
        model_wcu = f"{r.model_wcu:.2f}" if r.model != "no model" else "-"
        lines.append(
            f"| {r.case} | {r.model} | {r.clients} | {r.rate:.1f} | {r.done} | {r.gave_up} | {r.throttles / per:.2f} | "
            f"{r.conflicts / per:.2f} | {model_wcu} | {r.reported_wcu:.1f} | {r.cost_wcu:.0f} | {r.audit or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot")
    parser.add_argument("--scale", type=float, default=SCALE, help="divides DynamoDB's per-partition rates (default 20)")
    parser.add_argument("--transaction-ms", type=float, default=5.0, help="the service's transaction duration (held x scale)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=12.0, help="per row")
    parser.add_argument("--warm", type=float, default=3.0, help="seconds left out of the sustained rate (the burst)")
    parser.add_argument("--jvm-warm", type=float, default=6.0, help="seconds of unmeasured likes first (DynamoDB Local's JIT)")
    parser.add_argument("--endpoint", help="a running DynamoDB Local (default: start one)")
    args = parser.parse_args(argv)

    model = {"scale": args.scale, "transaction_ms": args.transaction_ms}
    no_hold = {"scale": args.scale, "transaction_ms": 0.0, "hold_during_call": False}
    cases = [
        ("like", "no model", None),
        ("like", f"model (scale {args.scale:g}, hold {args.transaction_ms * args.scale:g} ms)", model),
        ("like", f"model, no hold (scale {args.scale:g})", no_hold),
        ("put", "no model", None),
        ("put", f"model (scale {args.scale:g})", model),
    ]

    def run_all(endpoint: str) -> list[Row]:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
        ddb = dynamodb_client(endpoint)
        if args.jvm_warm > 0:  # DynamoDB Local's JIT: the first seconds are slow
            measure(ddb, "like", "warm-up", None, args.clients, args.jvm_warm, 0.0)
            measure(ddb, "put", "warm-up", None, args.clients, args.jvm_warm / 2, 0.0)
        rows = []
        for case, label, kwargs in cases:
            rows.append(measure(ddb, case, label, kwargs, args.clients, args.seconds, args.warm))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        return rows

    if args.endpoint:
        rows = run_all(args.endpoint)
    else:
        with DynamoDBLocal() as ddb_local:
            rows = run_all(ddb_local.endpoint)
    w, r = 1000 / args.scale, 3000 / args.scale
    print(
        f"\nModel: {w:g} WCU/s and {r:g} RCU/s per partition key (DynamoDB's 1,000 / 3,000 divided by {args.scale:g}), "
        f"1 s of burst; a like = 2 items x 2 WCU, so its WCU ceiling is {w / 4:g} likes/s; a PutItem's is {w:g}/s. "
        f"{os.cpu_count()} cores, {args.clients} clients, {args.seconds:g} s per row, first {args.warm:g} s left out.\n"
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
