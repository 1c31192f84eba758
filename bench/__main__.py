"""``make bench``: cold-import, throughput and capacity per operation, measured in one run.

Prints Markdown tables and writes them to docs/bench-results.md (overwritten by every full run, with
the commit, date and machine). Not part of the tests: numbers vary by machine; ratios against
a baseline measured in the same run are what count. ``--quick`` runs a smaller version;
``--only occ`` measures some throughput scenarios (printed, not written).

* Cold start: median wall time of ``import <handler module>`` in a fresh interpreter (the
  layer and the function folder on ``sys.path``, the template's environment) vs
  ``import boto3`` measured the same way.
* Throughput: operations/s on DynamoDB Local at 1, 8 and 32 concurrent clients, for the
  layer's primitive and for a hand-written minimal boto3 call making the same requests
  (same client settings; OCC: same reads, same backoff). Each cell runs several rounds of
  one baseline batch and one layer batch of the same size (~0.5 s), alternating which goes
  first; overhead ratio = layer time / baseline time per round, reported as the median over
  rounds with its IQR and min-max (target <= 1.10), beside the client CPU per operation.
* Capacity: RCU/WCU per operation as DynamoDB reports it (``ReturnConsumedCapacity``) and,
  for multi-item transactions, from the cost model (DynamoDB Local reports a constant):
  a transactional write costs 2 WCU per item up to 1 KB (prepare + commit).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ROOT, coldstart, hot
from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client
from devstack.template import read_stack

DOC = ROOT / "docs" / "bench-results.md"  # written by every full run (docs/bench.md explains it)


# ----------------------------------------------------------------------------- cold start
def _import_once(code: str, env: dict[str, str]) -> float:
    probe = f"import time,sys; t=time.perf_counter(); {code}; print((time.perf_counter()-t)*1000)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cold_imports(runs: int) -> list[tuple[str, float, float]]:
    """Each run imports ``boto3`` and then every handler, each in a fresh interpreter, so the
    baseline and the handlers meet the same moments of the machine's load; medians over runs."""
    stack = read_stack("bench-table")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
    probes: list[tuple[str, str, dict[str, str]]] = [("import boto3 (baseline)", "import boto3", base_env)]
    for name, fn in sorted(stack.functions.items()):
        module = fn.handler.rsplit(".", 1)[0]
        env = {**base_env, **fn.environment, "PYTHONPATH": os.pathsep.join([str(fn.code_dir), *map(str, fn.layers)])}
        probes.append((f"{name} ({fn.code_dir.relative_to(ROOT)}/{module}.py)", f"import {module}", env))
        if name == "LikesFunction":
            # Tracing=Active as shipped adds no import (Lambda writes the segments); with
            # Powertools Tracer the function would also import aws-xray-sdk and patch botocore.
            traced = f"import {module}; from aws_lambda_powertools import Tracer; Tracer(service='bench', auto_patch=True)"
            traced_env = {**env, "AWS_LAMBDA_FUNCTION_NAME": "bench", "POWERTOOLS_TRACE_DISABLED": "false"}
            try:
                _import_once(traced, traced_env)
            except subprocess.CalledProcessError:
                continue  # aws-xray-sdk not installed
            probes.append((f"{name} + Powertools Tracer (Tracing on in code; not shipped)", traced, traced_env))
    for _, code, env in probes:  # warm the bytecode caches: the first import of a module compiles it
        _import_once(code, env)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in probes}
    for _ in range(runs):
        for label, code, env in probes:
            samples[label].append(_import_once(code, env))
    boto3_ms = statistics.median(samples[probes[0][0]])
    return [(label, statistics.median(samples[label]), statistics.median(samples[label]) / boto3_ms) for label, _, _ in probes]


# ----------------------------------------------------------------------------- throughput
@dataclass
class Scenario:
    name: str
    setup: Callable[[Any, str], Any]  # (plain client, table) -> state
    layer_op: Callable[[Any, str, int], Any]  # (state, table, i) -> Result or None
    baseline_op: Callable[[Any, str, int], dict[str, Any]]  # (plain client, table, i) -> response
    model_wcu: float  # cost-model WCU per operation on real DynamoDB
    model_note: str


def _likes_setup(ddb: Any, table: str) -> Any:
    from counters.services.likes import Likes

    likes = Likes(table)
    for post in ("layer", "base"):
        likes.create_post(author_id="bench", body="bench", post_id=post)
    return likes


def _likes_layer(likes: Any, table: str, i: int) -> Any:
    return likes.like("layer", f"u{i}").result


def _likes_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """The like the layer sends (counters.primitives.toggle): the user's state item switched on
    under the latest-request-wins condition, stamped, and the tally moved, in one transaction."""
    at, by = time.time_ns() // 1_000_000, uuid.uuid4().hex
    return ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": {"PK": {"S": "POST#base"}, "SK": {"S": f"LIKE#USER#u{i}"}},
                    "UpdateExpression": "SET #state = :true, #at = :at, #by = :by, #rid = :by, #u = :u, #t = :t REMOVE #exp",
                    "ConditionExpression": "attribute_not_exists(#sk) OR (#state = :false AND "
                    "(attribute_not_exists(#at) OR #at < :at OR (#at = :at AND #by < :by)))",
                    "ExpressionAttributeNames": {
                        "#state": "liked", "#at": "changedAt", "#by": "changedBy", "#sk": "SK",
                        "#rid": "requestId", "#exp": "expiresAt", "#u": "userId", "#t": "likedAt",
                    },
                    "ExpressionAttributeValues": {
                        ":true": {"BOOL": True}, ":false": {"BOOL": False}, ":at": {"N": str(at)}, ":by": {"S": by},
                        ":u": {"S": f"u{i}"}, ":t": {"N": str(at // 1000)},
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": table,
                    "Key": {"PK": {"S": "POST#base"}, "SK": {"S": "META"}},
                    "UpdateExpression": "ADD #tally :delta",
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": "PK", "#tally": "likeTally"},
                    "ExpressionAttributeValues": {":delta": {"N": "1"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ],
        ClientRequestToken=str(uuid.uuid4()),
        ReturnConsumedCapacity="TOTAL",
    )


def _resource_setup(strategy: str, shards: int = 1) -> Callable[[Any, str], Any]:
    def setup(ddb: Any, table: str) -> Any:
        from counters.core.failures import RetryPolicy
        from counters.primitives.approaches import create
        from counters.services.reservations import Reservations, resource_key

        Reservations(table).create_resource("layer", capacity=10**9, strategy=strategy, shards=shards)
        Reservations(table).create_resource("base", capacity=10**9, strategy=strategy, shards=shards)
        if shards > 1:
            return Reservations(table, retry=RetryPolicy(max_attempts=8))
        return create(strategy, table, retry=RetryPolicy(max_attempts=8)), resource_key("layer")

    return setup


def _approach_layer(state: Any, table: str, i: int) -> Any:
    if not isinstance(state, tuple):  # sharded: the service picks and splits shards
        return state.reserve("layer", 1, f"t{i}").result
    approach, key = state
    return approach.apply(key, 1, token=f"tok-{i}")


_ADD = {
    "UpdateExpression": "ADD #reserved :d, #available :nd",
    "ConditionExpression": "attribute_exists(#pk) AND #available >= :q",
    "ExpressionAttributeNames": {"#pk": "PK", "#reserved": "reserved", "#available": "available"},
    "ExpressionAttributeValues": {":d": {"N": "1"}, ":nd": {"N": "-1"}, ":q": {"N": "1"}},
}


def _atomic_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    return ddb.update_item(TableName=table, Key={"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, ReturnConsumedCapacity="TOTAL", **_ADD)


def _crt_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    update = {"TableName": table, "Key": {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, **_ADD}
    return ddb.transact_write_items(
        TransactItems=[{"Update": update}], ClientRequestToken=str(uuid.uuid4()), ReturnConsumedCapacity="TOTAL"
    )


def _marker_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    update = {"TableName": table, "Key": {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, **_ADD}
    marker = {
        "TableName": table,
        "Item": {
            "PK": {"S": f"RSV#b{i}"},
            "SK": {"S": "RSV"},
            "quantity": {"N": "1"},
            "status": {"S": "CONFIRMED"},
            "createdAt": {"N": "1"},
            "expiresAt": {"N": "2"},
        },
        "ConditionExpression": "attribute_not_exists(PK)",
    }
    return ddb.transact_write_items(TransactItems=[{"Update": update}, {"Put": marker}], ReturnConsumedCapacity="TOTAL")


_BASE_KEY = {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}
OCC_ATTEMPTS = 8  # the layer's budget in this bench (RetryPolicy(max_attempts=8)); the baseline gets the same


def _occ_write(ddb: Any, table: str, update: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Minimal hand-written OCC (seed 03) doing what the layer's loop does, request for request:
    read (consistent), write if unchanged since the read; on a lost race back off with full
    jitter (the layer's RetryPolicy defaults: 20 ms doubling, capped at 500 ms), read again
    and write again, within the same attempt budget. Both sides ask for ``ALL_OLD`` on a
    failed condition (the layer checks it for its own write) and ``ReturnConsumedCapacity``
    (the layer reports capacity on every call).
    ``update`` turns the item read into the conditional write's expressions."""
    item = ddb.get_item(TableName=table, Key=_BASE_KEY, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")["Item"]
    for attempt in range(1, OCC_ATTEMPTS + 1):
        counts = {":r": {"N": str(int(item["reserved"]["N"]) + 1)}, ":a": {"N": str(int(item["available"]["N"]) - 1)}}
        write = update(item)
        try:
            return ddb.update_item(
                TableName=table,
                Key=_BASE_KEY,
                UpdateExpression=write["UpdateExpression"],
                ConditionExpression=write["ConditionExpression"],
                ExpressionAttributeValues={**counts, **write["ExpressionAttributeValues"]},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ReturnConsumedCapacity="TOTAL",
            )
        except ddb.exceptions.ConditionalCheckFailedException:
            if attempt < OCC_ATTEMPTS:
                time.sleep(random.uniform(0, min(0.5, 0.02 * 2 ** (attempt - 1))))
                item = ddb.get_item(TableName=table, Key=_BASE_KEY, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")["Item"]
    return {}  # out of attempts, like the layer's contention


def _occ_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """The entity tag: unchanged since the read, replaced by a new one."""
    return _occ_write(
        ddb,
        table,
        lambda item: {
            "UpdateExpression": "SET reserved = :r, available = :a, tag = :new",
            "ConditionExpression": "tag = :old",
            "ExpressionAttributeValues": {":old": item["tag"], ":new": {"S": uuid.uuid4().hex}},
        },
    )


def _occ_history_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """A version, plus the seed's bounded chain of the last 32 writers' tags on the item."""
    return _occ_write(
        ddb,
        table,
        lambda item: {
            "UpdateExpression": "SET reserved = :r, available = :a, version = :next, tags = :chain",
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": {
                ":v": item["version"],
                ":next": {"N": str(int(item["version"]["N"]) + 1)},
                ":chain": {"L": [*item["tags"]["L"], {"S": f"b{i}"}][-32:]},
            },
        },
    )


def _ledger_setup(ddb: Any, table: str) -> Any:
    from counters.core.failures import RetryPolicy
    from counters.primitives.ledger import Ledger

    return Ledger(table, retry=RetryPolicy(max_attempts=8))


def _ledger_layer(ledger: Any, table: str, i: int) -> Any:
    from counters.primitives.ledger import new_key

    return ledger.append("layer", 1, new_key())


def _ledger_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    return ddb.put_item(
        TableName=table,
        Item={"PK": {"S": "LEDGER#base"}, "SK": {"S": f"ENTRY#{i:013d}-{uuid.uuid4().hex}"}, "amount": {"N": "1"}},
        ConditionExpression="attribute_not_exists(PK)",
        ReturnConsumedCapacity="TOTAL",
    )


SCENARIOS = [
    Scenario("like (refcount link)", _likes_setup, _likes_layer, _likes_baseline, 4.0, "2 items x 2 WCU (transactional)"),
    Scenario("reserve: atomic", _resource_setup("atomic"), _approach_layer, _atomic_baseline, 1.0, "1 UpdateItem"),
    Scenario("reserve: crt", _resource_setup("crt"), _approach_layer, _crt_baseline, 2.0, "1 item x 2 WCU (transactional)"),
    Scenario("reserve: marker", _resource_setup("marker"), _approach_layer, _marker_baseline, 4.0, "2 items x 2 WCU (transactional)"),
    Scenario(
        "reserve: occ (one hot item)",
        _resource_setup("occ"),
        _approach_layer,
        _occ_baseline,
        1.0,
        "1 GetItem + 1 UpdateItem per attempt",
    ),
    Scenario(
        "reserve: occ_history (one hot item)",
        _resource_setup("occ_history"),
        _approach_layer,
        _occ_history_baseline,
        1.0,
        "1 GetItem + 1 UpdateItem per attempt (item ~1 KB with 32 tags)",
    ),
    Scenario("ledger append", _ledger_setup, _ledger_layer, _ledger_baseline, 1.0, "1 PutItem (+1 dirty marker per ledger per 5 min)"),
]


def contention(endpoint: str, ops: int, levels: list[int]) -> list[tuple[str, int, float, float]]:
    """OCC retry amplification (attempts per success) and sharded vs unsharded crt, by concurrency."""
    from counters.core import client as dynamo
    from counters.core.failures import RetryPolicy
    from counters.primitives.approaches import create
    from counters.services.reservations import Reservations, resource_key

    ddb = dynamodb_client(endpoint)
    rows = []
    cases = (
        ("occ (primitive)", "occ", 1, False),
        ("occ_history (primitive)", "occ_history", 1, False),
        ("crt (primitive)", "crt", 1, False),
        ("crt, full reserve (reads + record)", "crt", 1, True),
        ("crt x8 shards, full reserve", "crt", 8, True),
    )
    for label, strategy, shards, full in cases:
        for clients in levels:
            table = f"bench-{uuid.uuid4().hex[:8]}"
            create_table(ddb, read_stack(table))
            dynamo.reset_client()
            Reservations(table).create_resource("r", capacity=10**9, strategy=strategy, shards=shards)
            if full:
                service = Reservations(table, retry=RetryPolicy(max_attempts=20))
                batch = _run(lambda i, service=service: service.reserve("r", 1, f"c{i}").result, ops, clients)
            else:
                approach = create(strategy, table, retry=RetryPolicy(max_attempts=20))
                batch = _run(lambda i, approach=approach: approach.apply(resource_key("r"), 1, token=f"c{i}"), ops, clients)
            results = [r for r in batch.results if r is not None]
            successes = [r for r in results if r.outcome.succeeded]
            rows.append((label, clients, batch.rate, sum(r.attempts for r in results) / max(1, len(successes))))
            ddb.delete_table(TableName=table)
    return rows


@dataclass
class Batch:
    """One timed batch of ``n`` operations at some concurrency."""

    seconds: float
    cpu_seconds: float  # this process's CPU (client side; DynamoDB Local is another process)
    results: list[Any]  # one per operation that returned (None for one that raised)
    errors: int

    @property
    def rate(self) -> float:
        return len(self.results) / self.seconds


def _run(op: Callable[[int], Any], n: int, clients: int) -> Batch:
    counter = iter(range(n))
    lock = threading.Lock()
    results: list[Any] = []
    errors = [0]

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            try:
                r = op(i)
            except Exception:  # counted, not hidden: a raising worker would otherwise stop silently
                r = None
                with lock:
                    errors[0] += 1
            with lock:
                results.append(r)

    cpu, start = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(clients):
            pool.submit(worker)
    return Batch(time.perf_counter() - start, time.process_time() - cpu, results, errors[0])


def _pairs(base: Callable[[int], Any], layer: Callable[[int], Any], n: int, *, swap: bool) -> tuple[Batch, Batch]:
    """One caller, ``n`` baseline and ``n`` layer calls alternating one by one (the layer first
    when ``swap``): each side's batch is the sum of its own calls' times."""
    sides: list[list[Any]] = [[0.0, 0.0, [], 0], [0.0, 0.0, [], 0]]  # seconds, cpu, results, errors
    order = ((1, layer), (0, base)) if swap else ((0, base), (1, layer))
    for i in range(n):
        for side, op in order:
            acc = sides[side]
            cpu, start = time.process_time(), time.perf_counter()
            try:
                r = op(i)
            except Exception:
                r = None
                acc[3] += 1
            acc[0] += time.perf_counter() - start
            acc[1] += time.process_time() - cpu
            acc[2].append(r)
    return Batch(*sides[0]), Batch(*sides[1])


@dataclass
class Cell:
    """One scenario at one concurrency: ``rounds`` alternating (baseline, layer) batches of
    ``per_round`` operations each; a round's ratio is layer time / baseline time for the
    same number of operations (= baseline ops/s / layer ops/s)."""

    scenario: str
    clients: int
    per_round: int
    base: list[Batch]
    layer: list[Batch]

    @property
    def ratios(self) -> list[float]:
        return [lb.seconds / bb.seconds for bb, lb in zip(self.base, self.layer, strict=True)]

    def spread(self) -> tuple[float, float, float, float, float]:
        """median, quartiles and min/max of the per-round ratios."""
        r = sorted(self.ratios)
        q1, _, q3 = statistics.quantiles(r, n=4, method="inclusive") if len(r) > 1 else (r[0], r[0], r[0])
        return statistics.median(r), q1, q3, r[0], r[-1]

    @staticmethod
    def _median_rate(batches: list[Batch]) -> float:
        return statistics.median(b.rate for b in batches)

    @staticmethod
    def _cpu_ms(batches: list[Batch]) -> float:
        return statistics.median(b.cpu_seconds / max(1, len(b.results)) for b in batches) * 1000

    @staticmethod
    def _succeeded(batches: list[Batch], ok: Callable[[Any], bool]) -> float:
        results = [r for b in batches for r in b.results]
        return sum(1 for r in results if r is not None and ok(r)) / max(1, len(results))

    def row(self) -> dict[str, Any]:
        layer_res = [r for b in self.layer for r in b.results if r is not None]
        return {
            "layer_ops": self._median_rate(self.layer),
            "base_ops": self._median_rate(self.base),
            "spread": self.spread(),
            "cpu": (self._cpu_ms(self.layer), self._cpu_ms(self.base)),
            "ok": (self._succeeded(self.layer, lambda r: r.succeeded), self._succeeded(self.base, bool)),
            "errors": (sum(b.errors for b in self.layer), sum(b.errors for b in self.base)),
            "wcu": statistics.mean(r.capacity.write_units for r in layer_res) if layer_res else 0.0,
            "rcu": statistics.mean(r.capacity.read_units for r in layer_res) if layer_res else 0.0,
        }


@dataclass
class Plan:
    rounds: int = 9
    round_seconds: float = 0.5  # target duration of one batch; sized from the warm-up's rate
    min_ops: int = 20  # per batch, and at least 2 per client (a batch is then not one call per thread)
    max_ops: int = 2000

    def per_round(self, warm_rate: float, clients: int) -> int:
        return max(self.min_ops, 2 * clients, min(self.max_ops, round(warm_rate * self.round_seconds)))


def throughput(endpoint: str, plan: Plan, levels: list[int], scenarios: list[Scenario]) -> list[Cell]:
    """Every scenario at every level: warm both paths, size the batches from the warm-up, then
    ``plan.rounds`` rounds of one baseline batch and one layer batch on fresh keys, the order
    alternating from round to round so that neither side always runs first."""
    import boto3

    from counters.core import client as dynamo
    from counters.core.client import CLIENT_CONFIG

    setup_client = dynamodb_client(endpoint)
    # the baseline's client has the layer's settings (connection pool of 64, SDK retries off,
    # same timeouts): otherwise 32 clients share botocore's default 10 connections
    plain = boto3.session.Session().client("dynamodb", endpoint_url=endpoint, config=CLIENT_CONFIG)
    cells = []
    for scenario in scenarios:
        for clients in levels:
            table = f"bench-{uuid.uuid4().hex[:8]}"
            create_table(setup_client, read_stack(table))
            dynamo.reset_client()
            state = scenario.setup(setup_client, table)
            offset = clients * 10_000_000  # fresh keys per level

            def layer(first: int, n: int) -> Batch:
                return _run(lambda i: scenario.layer_op(state, table, offset + first + i), n, clients)

            def base(first: int, n: int) -> Batch:
                return _run(lambda i: scenario.baseline_op(plain, table, offset + 5_000_000 + first + i), n, clients)

            warm = max(2 * clients, plan.min_ops)
            layer(4_000_000, warm)
            warm_rate = base(4_000_000, warm).rate
            per_round = plan.per_round(warm_rate, clients)
            cell = Cell(scenario.name, clients, per_round, [], [])
            for r in range(plan.rounds):
                first = r * per_round
                if clients == 1:  # one caller: alternate call by call, so both sides meet the same moments of noise
                    b, lay = _pairs(
                        lambda i: scenario.baseline_op(plain, table, offset + 5_000_000 + first + i),
                        lambda i: scenario.layer_op(state, table, offset + first + i),
                        per_round,
                        swap=r % 2 == 1,
                    )
                    cell.base.append(b)
                    cell.layer.append(lay)
                elif r % 2 == 0:
                    cell.base.append(base(first, per_round))
                    cell.layer.append(layer(first, per_round))
                else:
                    cell.layer.append(layer(first, per_round))
                    cell.base.append(base(first, per_round))
            cells.append(cell)
            setup_client.delete_table(TableName=table)
            print(f"  {scenario.name} x{clients}: {per_round} ops x {plan.rounds} rounds, ratio {cell.spread()[0]:.2f}", file=sys.stderr)
    return cells


# ----------------------------------------------------------------------------- one hot post
def hot_posts(*, quick: bool) -> list[str]:
    """bench/hot.py's standard vs hot table (one post, the limit model), as Markdown lines.

    Each row on a DynamoDB Local of its own (:func:`bench.hot.run_posts`): the one the throughput and
    contention sections filled answers several times slower by then (one run: 15 standard and 26 hot
    likes/s at load 1.5, against 150-240 on a fresh one at load 3-11), and so does one instance
    from row to row."""
    seconds, warm = (8.0, 2.0) if quick else (15.0, 3.0)
    scale, transaction_ms, clients = hot.POSTS_SCALE, 5.0, 8
    load = os.getloadavg()[0]
    rows = hot.run_posts(None, scale=scale, transaction_ms=transaction_ms, clients=clients, seconds=seconds, warm=warm)
    return [
        "",
        f"## One hot post: `standard` vs `hot` likes under the limit model (bench/hot.py, {clients} clients, {seconds:g} s per row)",
        "",
        f"Distinct users like one post; {hot.describe(scale, transaction_ms)} The hot row's tally is kept by the "
        "LikeAggregatorFunction's handler run from DynamoDB Local's stream by the local stack's poller (the last row: "
        "with Lambda's 1 s batching window emulated), its META writes on the same limited client. A reader reads META "
        "(consistent GetItem) every 50 ms; lag(n) = the first read showing tally >= n minus the n-th acknowledgement, "
        f"after the first {warm:g} s. Each row on a DynamoDB Local of its own, warmed {hot.JVM_WARM:g} s first. Load average {load:.1f} before the rows, "
        f"{os.getloadavg()[0]:.1f} after; docs/bench.md explains the columns and what binds.",
        "",
        hot.post_table(rows),
        "",
        *hot.verdict(rows, scale),
    ]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {sys.version.split()[0]}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="5 rounds of ~0.2 s batches, 3 import runs (a few minutes)")
    parser.add_argument("--rounds", type=int, help="alternating baseline/layer rounds per cell (default 9)")
    parser.add_argument("--round-seconds", type=float, help="target duration of one batch (default 0.5)")
    parser.add_argument("--import-runs", type=int)
    parser.add_argument("--contention-ops", type=int, help="calls per contention cell (default 100)")
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument(
        "--only",
        help="throughput scenarios whose name contains this (comma-separated; 'hot': the hot-post table); skips cold start and contention",
    )
    parser.add_argument("--out", type=Path, help=f"where the tables go (default {DOC.relative_to(ROOT)}; not written with --only)")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    plan = Plan(rounds=5, round_seconds=0.2) if args.quick else Plan()
    plan.rounds = args.rounds or plan.rounds
    plan.round_seconds = args.round_seconds or plan.round_seconds
    import_runs = args.import_runs or (3 if args.quick else 7)
    contention_ops = args.contention_ops or (50 if args.quick else 100)
    scenarios = SCENARIOS
    if args.only:
        wanted = args.only.split(",")
        scenarios = [s for s in SCENARIOS if any(w in s.name for w in wanted)]

    began = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md") else ""
    lines = [
        "# Benchmarks (`make bench`)",
        "",
        "Written by `make bench` (`python -m bench`, bench/__main__.py) on every run: do not edit by hand.",
        "What is measured and how to read it: [bench.md](bench.md).",
        "",
        f"Measured on commit `{commit}`{dirty}, {time.strftime('%Y-%m-%d %H:%M %Z')}; {machine()}; "
        f"load average {load:.1f} at the start; `python -m bench {' '.join(argv if argv is not None else sys.argv[1:])}`.",
        "",
    ]
    if not args.only:
        lines += [
            "## Cold start: handler module import (median of fresh interpreters)",
            "",
            "| module | import ms | vs `import boto3` |",
            "|---|---:|---:|",
        ]
        for name, ms, ratio in cold_imports(import_runs):
            lines.append(f"| {name} | {ms:.0f} | {ratio:.2f}x |")
        lines += [
            "",
            "### Where each handler's import goes (`python -X importtime`, self time per group in ms, median; start-up excluded)",
            "",
            "The importtime totals run above the wall-clock times (tracing costs); the groups show who pays. "
            "\"the standard library and the rest\" is almost all what botocore imports (boto3 imports the same).",
            "",
            coldstart.table(
                {name: coldstart.decompose(fn.code_dir, fn.layers, fn.environment, import_runs) for name, fn in sorted(read_stack("bench-table").functions.items())},
                coldstart.boto3_ms(import_runs),
            ),
            "",
        ]

    with DynamoDBLocal() as ddb_local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
        cells = throughput(ddb_local.endpoint, plan, levels, scenarios)
        contended = [] if args.only else contention(ddb_local.endpoint, contention_ops, levels)
    posts = hot_posts(quick=args.quick) if not args.only or "hot" in args.only.split(",") else []
    lines += [
        "## Throughput on DynamoDB Local: layer vs a minimal hand-written boto3 call doing the same requests",
        "",
        f"Each cell: {plan.rounds} rounds, each one baseline batch and one layer batch of the same number of operations "
        f"(sized for ~{plan.round_seconds:g} s, at least 20 and 2 per client), the order alternating from round to round "
        "(with one client the two sides alternate call by call within a round). "
        "Overhead = layer time / baseline time within a round (= baseline ops/s / layer ops/s): the median over rounds, "
        "its interquartile range and its min-max. Target: <= 1.10x. Client CPU = this process's CPU per operation "
        "(DynamoDB Local runs in another process): the layer's own cost, free of the network and of the other processes' noise.",
        "",
        "| operation | clients | ops x rounds | layer ops/s | baseline ops/s | overhead (median) | IQR | min-max "
        "| client CPU ms/op layer / baseline | succeeded layer / baseline | WCU/op reported | RCU/op reported | WCU/op on DynamoDB (cost model) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    models = {s.name: s for s in SCENARIOS}
    errors = []
    for cell in cells:
        s, row = models[cell.scenario], cell.row()
        med, q1, q3, lo, hi = row["spread"]
        lines.append(
            f"| {cell.scenario} | {cell.clients} | {cell.per_round} x {plan.rounds} | {row['layer_ops']:.0f} | {row['base_ops']:.0f} "
            f"| {med:.2f}x | {q1:.2f}-{q3:.2f} | {lo:.2f}-{hi:.2f} | {row['cpu'][0]:.2f} / {row['cpu'][1]:.2f} "
            f"| {row['ok'][0]:.0%} / {row['ok'][1]:.0%} | {row['wcu']:.1f} | {row['rcu']:.1f} | {s.model_wcu:.0f} ({s.model_note}) |"
        )
        if any(row["errors"]):
            errors.append(f"{cell.scenario} x{cell.clients}: {row['errors'][0]} layer / {row['errors'][1]} baseline calls raised")
    lines += [
        "",
        "OCC rows count every call, also those that ran out of their 8 attempts (succeeded < 100%, WCU/op < 1); both sides "
        "back off the same way (full jitter, 20 ms doubling, capped at 500 ms) and read the item again after the backoff. "
        "DynamoDB Local reports a constant for multi-item transactions, so the cost-model column is what real DynamoDB bills.",
    ]
    if errors:
        lines += ["", "Calls that raised (counted as not succeeded): " + "; ".join(errors) + "."]
    if contended:
        lines += [
            "",
            f"## Contention: one hot counter, {contention_ops} calls per cell, 20 attempts "
            "(DynamoDB Local runs transactions one at a time, so crt never conflicts here)",
            "",
            "| approach | clients | calls/s | attempts per success |",
            "|---|---:|---:|---:|",
        ]
        for label, clients, rate, amplification in contended:
            lines.append(f"| {label} | {clients} | {rate:.0f} | {amplification:.2f} |")
    lines += posts
    end_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += ["", f"The run took {(time.perf_counter() - began) / 60:.1f} minutes; load average {end_load:.1f} at the end."]
    text = "\n".join(lines)
    print(text)
    out = args.out or (None if args.only else DOC)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        print(f"\nwritten to {out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
