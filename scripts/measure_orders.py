"""Measure order placement on DynamoDB Local: orders/s and capacity per order, fast vs gapless.

Usage: .venv/bin/python scripts/measure_orders.py [--orders 1000] [--threads 32]

Starts its own DynamoDB Local (a table per run, built from template.yaml), places distinct
orders from ``--threads`` threads (no faults, no duplicates) and prints one row per run:

* ``fast``: one layer object shared by every thread (the ADD never conflicts);
* ``gapless/1 env``: one object: threads queue locally, one transaction in flight;
* ``gapless/N envs``: one object per thread, like N concurrent Lambda environments:
  every writer races for the counter at DynamoDB, and losers pay cancelled transactions.

Capacity: single-item calls are summed from ``ConsumedCapacity`` as DynamoDB Local reports
it; Local reports a constant for multi-item transactions, so transaction WCU come from the
cost model (2 WCU per item of <= 1 KB per transactional write) applied to committed ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]
for key, value in {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ.setdefault(key, value)

from counters.core import client as dynamo  # noqa: E402
from counters.core.errors import ContentionError  # noqa: E402
from counters.services.orders import Orders  # noqa: E402
from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.template import read_stack  # noqa: E402

TX_WCU_PER_ITEM = 2.0


def run(ddb, mode: str, envs: int, orders: int, threads: int) -> dict:
    table = f"measure-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(table))
    dynamo.reset_client()
    client = dynamo.client()
    calls: Counter[str] = Counter()
    units: Counter[str] = Counter()
    lock = threading.Lock()

    def count(http_response, parsed, model, **_):
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        with lock:
            calls[f"{model.name}:{'ok' if http_response.status_code < 300 else 'failed'}"] += 1
            if model.name != "TransactWriteItems":
                units[model.name] += sum(float(e.get("CapacityUnits", 0)) for e in entries)

    client.meta.events.register("after-call.dynamodb", count)
    layers = [Orders(table, mode=mode) for _ in range(envs)]

    busy = Counter()

    def place(i: int) -> None:
        while True:  # a 503 is resent with the same key, as a client would
            try:
                layers[i % envs].place(key=f"k{i}", customer_id="c1", items=[{"sku": "sku-1", "quantity": 1}])
                return
            except ContentionError:
                with lock:
                    busy["503"] += 1

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(place, range(orders)))
    elapsed = time.monotonic() - began
    client.meta.events.unregister("after-call.dynamodb", count)
    items_per_tx = 2 if mode == "fast" else 3
    committed = calls["TransactWriteItems:ok"]
    return {
        "run": f"{mode}/{envs} env" + ("s" if envs > 1 else ""),
        "orders/s": orders / elapsed,
        "503 resends": busy["503"],
        "tx attempts/order": (committed + calls["TransactWriteItems:failed"]) / orders,
        "RCU/order": units["GetItem"] / orders,
        "single-item WCU/order": units["UpdateItem"] / orders,
        "tx WCU/order (model)": committed * items_per_tx * TX_WCU_PER_ITEM / orders,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    with DynamoDBLocal() as local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = local.endpoint
        ddb = dynamodb_client(local.endpoint)
        run(ddb, "fast", 1, 200, args.threads)  # warm the JVM
        rows = [
            run(ddb, "fast", 1, args.orders, args.threads),
            run(ddb, "gapless", 1, args.orders, args.threads),
            run(ddb, "gapless", args.threads, max(64, args.orders // 8), args.threads),
        ]
    headers = list(rows[0])
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
