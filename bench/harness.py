"""The throughput harness: timed batches at a concurrency, rounds alternating baseline and layer,
per-round overhead ratios (:func:`throughput`), and OCC/sharding contention (:func:`contention`)."""

from __future__ import annotations

import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.baselines import Scenario
from devstack.dynamodb_local import create_table, dynamodb_client
from devstack.template import read_stack


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


def contention(endpoint: str, ops: int, levels: list[int]) -> list[tuple[str, int, float, float]]:
    """OCC retry amplification (attempts per success) and sharded vs unsharded crt, by concurrency."""
    from counters.core import client as dynamo
    from counters.core.failures import RetryPolicy
    from counters.primitives.approaches import create
    from counters.services.reservations import Reservations
    from counters.store.resources_counters import resource_key

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
