"""``python -m bench.spread``: one hot post at spread 8, 16, 32 and 64 under the limit model, and a
step of offered load absorbed by a post whose spread grows (issue 26, part 1).

The spread table
    One row per spread: a post created ``hot`` (spread 8) and grown to the row's spread before the
    run (``Posts.grow``; the ``Likes`` of the row has growth off, so the spread stays put), liked
    by distinct users from ``clients`` threads for a fixed time under :class:`LaneModel`, with the
    LikeAggregatorFunction's handler run from DynamoDB Local's stream (bench/hot.py's
    :func:`bench.hot.stream_aggregator`) with the template's 1 s batching window emulated, and
    RetryQueue with RetryWorkerFunction's handler on it (bench/retrying.py), so an examination the
    aggregator defers is run, as deployed. After the load, a row waits until the stream is drained
    and the retry queue is empty (polled until quiet, a 600 s hang guard). A
    control row runs the largest spread without the model: the machine's own rate, which must be
    well above the modelled ceiling for the model to be what binds.

The step (:func:`run_step`)
    One post created ``hot`` at spread 8 with growth on (``Likes(max_spread=MAX_SPREAD)``, 128), open-loop
    arrivals at a fixed rate: ``--low`` likes/s (below one key's capacity) for ``--before`` s,
    then ``--high`` (default 8x the 8-key ceiling) for ``--after`` s. Per second: offered,
    answered, the likes' throttles per like, the post's spread. Time to absorb: from the step until
    throttles per like stay under 0.1 to the end. Then the stream is drained and the retry queue
    emptied (as for a row), and every like is
    checked counted once: the tally = the users with a like item = the acknowledged likes (+ any
    like that gave up after its write went in), one item per user; every answer is a like or the
    API's documented ContentionError (503, or 202 with the retry queue).

The model (:class:`LaneModel`)
    testkit.limits.LimitModel at ``SCALE`` (2.5 WCU/s and 7.5 RCU/s per key), except META's key,
    which keeps the service's own rates (1,000 WCU/s, 3,000 RCU/s). The scale slows the service
    down 400x, but the aggregator's 1 s batching window is not slowed down with it, so META would
    meet 400x the pressure it meets on AWS: one write of ~5 KB (5 WCU, the checkpoint map at 64
    lanes) per second against 2.5 WCU/s, which a scaled META cannot take at all (its bucket holds
    2.5). On AWS the same write is 0.5% of META's 1,000 WCU/s. META's writes are still counted
    (WCU per like). The likes' throttles are timed apart from META's (:attr:`LaneModel.timeline`).

Not part of the tests. docs/bench.md explains the columns and the scale.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench import hot
from bench.retrying import RETRY_DLQ, STREAM_DLQ, Retrying, Settled, Settlement, WorkerCounts, drain_until_quiet
from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client
from devstack.template import read_stack
from testkit.limits import RCU_PER_PARTITION, WCU_PER_PARTITION, Bucket, LimitModel, Partition, item_size

SCALE = 400.0
"""2.5 WCU/s per key: 20 likes/s at 8 keys, 160 at 64, well under the ~240-300 hot likes/s this
2-core machine does on DynamoDB Local without the model (the control row), so the model binds at
every spread."""
SPREADS = (8, 16, 32, 64)
CLIENTS = 32
"""Threads per row: enough that throttled likes backing off (20..500 ms) leave others writing at 64 keys."""
POST = "p"


class LaneModel(LimitModel):
    """The limit model with the aggregator's keys (META's, and a post's lane groups' past 64
    lanes) at the service's own rates (see the module doc) and every throttle timed: (clock, on a
    write bucket, on an aggregator's key)."""

    def __init__(self, client: Any, *, table: str, meta_pk: str, **kwargs: Any) -> None:
        kwargs.setdefault("clock", time.perf_counter)
        super().__init__(client, **kwargs)
        from counters.store.post_items import LANE_GROUP, MAX_SPREAD

        self.meta: Partition = self.partition(table, {"S": meta_pk})
        groups = range(1, MAX_SPREAD // LANE_GROUP)
        self.aggregates = {self.meta, *(self.partition(table, {"S": f"{meta_pk}#G{g}"}) for g in groups)}
        self.timeline: list[tuple[float, bool, bool]] = []
        self._mine = threading.local()  # this thread's throttles off META: a like's own, it runs on one thread

    def _bucket(self, partition: Partition, write: bool, now: float) -> Bucket:
        buckets = self._write_buckets if write else self._read_buckets
        if partition in self.aggregates and partition not in buckets:
            rate = WCU_PER_PARTITION if write else RCU_PER_PARTITION
            buckets[partition] = Bucket(rate, rate * self.burst_seconds, rate * self.burst_seconds, now)
        return super()._bucket(partition, write, now)

    def _throttled(self, operation: str, call: Any, charges: list[Any], short: list[int], n: int) -> Any:
        hit = [c for c in charges if c.index in short]
        on_meta = any(c.partition in self.aggregates for c in hit)
        self.timeline.append((call.started, any(c.write for c in hit), on_meta))
        if not on_meta:
            self._mine.throttles = self.thread_throttles() + 1
        return super()._throttled(operation, call, charges, short, n)

    def thread_throttles(self) -> int:
        """The throttles off META this thread's calls met so far (a like's: the difference around it)."""
        return int(getattr(self._mine, "throttles", 0))

    def like_throttles(self, since: float = float("-inf"), until: float = float("inf")) -> tuple[int, int]:
        """(write, read) throttles of the likes' own calls (not META's) in [since, until)."""
        hits = [w for t, w, meta in list(self.timeline) if since <= t < until and not meta]
        return sum(hits), len(hits) - sum(hits)


@dataclass
class Counted:
    """The table after the stream drained: the post's tally and its like items."""

    tally: int
    items: int  # like items (one per user and lane)
    liked: int
    users: int  # distinct users with an item
    audit: str

    def exact(self, acknowledged: set[str], holders: set[str]) -> str:
        """'exact' when tally = liked items = users, one item per user, and every acknowledged like is there."""
        problems = []
        if self.tally != self.liked:
            problems.append(f"tally {self.tally} != {self.liked} liked items")
        if self.items != self.users:
            problems.append(f"{self.items - self.users} users with two items")
        missing = acknowledged - holders
        if missing:
            problems.append(f"{len(missing)} acknowledged likes missing")
        return "exact" if not problems else "; ".join(problems)


def settled_exact(run: dict[str, Any], acknowledged: set[str]) -> str:
    """:meth:`Counted.exact`, and what the retry side left: "did not drain", messages in the DLQs."""
    exact = run["counted"].exact(acknowledged, run["holders"])
    problems = run["retry"].problems() if run["retry"] is not None else []
    if not problems:
        return exact
    return "; ".join([*problems, *([] if exact == "exact" else [exact])])


def count(ddb: Any, table: str, likes: Any) -> tuple[Counted, set[str]]:
    """Scan the bench's own table: the like items, by user; the tally (META's and its groups'); ``Likes.audit``."""
    from counters.core.failures import RetryPolicy
    from counters.store.posts import PostStore

    per_user: Counter[str] = Counter()
    liked = items = 0
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        for item in page["Items"]:
            if item["SK"]["S"].startswith("LIKE#") and "livesIn" not in item:  # a pointer is no like item
                items += 1
                per_user[item["SK"]["S"]] += 1
                liked += 1 if item.get("liked", {}).get("BOOL") else 0
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    stored = PostStore(table, dynamodb=ddb).read(POST, RetryPolicy())  # META and, past 64 lanes, its groups' items
    a = likes.audits.audit(POST)
    audit = f"{a.stored} = {a.counted}" if a.stored == a.counted else f"DRIFT {a.stored} vs {a.counted}"
    holders = {sk.removeprefix("LIKE#USER#") for sk in per_user}
    return Counted(stored.tally if stored else 0, items, liked, len(per_user), audit), holders


@contextmanager
def fresh_local() -> Iterator[tuple[Any, str]]:
    """A DynamoDB Local of its own (bench/hot.py's reason: one instance slows down row after row)."""
    with DynamoDBLocal() as local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = local.endpoint
        yield dynamodb_client(local.endpoint), local.endpoint


class Aggregating:
    """The LikeAggregatorFunction's handler on the table's stream (:func:`bench.hot.stream_aggregator`,
    the template's 1 s window emulated) in a process of its own, as Lambda runs it: in the writers'
    process, 16-32 busy client threads starve its thread of the GIL and its lag becomes the bench's
    (measured: lag p99 1.2 s with 8 clients, 4.3 s with 16, 8.3 s with 32, at 100-136 likes/s).
    With ``limits`` its client carries a :class:`LaneModel` too (META at the service's rates), which
    counts its WCU on META. With ``queues`` (the SQS emulator's endpoint and the queues' URLs, from
    :class:`bench.retrying.Retrying`) it defers to RetryQueue and describes a dropped batch on
    LikeAggregatorDLQ, as deployed. Its stream activity is shared (:class:`bench.retrying.StreamActivity`),
    for the run to know when the stream is drained."""

    def __init__(self, table: str, endpoint: str, limits: dict[str, Any] | None, queues: tuple[str, dict[str, str]] | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ready, self.done, self.out = ctx.Event(), ctx.Event(), ctx.Queue()
        # the last completed poll: began (monotonic), invocations during it, records held after it;
        # then invocations ended, deferrals the queue took, deferrals it refused
        self.activity = ctx.Array("d", [float("-inf"), 0.0, 0.0, 0.0, 0.0, 0.0])
        self.process = ctx.Process(
            target=_aggregate, args=(table, endpoint, limits, queues, self.activity, self.ready, self.done, self.out), daemon=True
        )

    def start(self) -> None:
        self.process.start()
        if not self.ready.wait(120):
            raise RuntimeError("the aggregator's process did not start")

    def invocations(self) -> int:
        return int(self.activity[3])

    def last_poll(self) -> tuple[float, int, int]:
        with self.activity.get_lock():
            return self.activity[0], int(self.activity[1]), int(self.activity[2])

    def deferrals(self) -> tuple[int, int]:
        """(commands the retry queue took, deferrals it refused: their batches were reported)."""
        return int(self.activity[4]), int(self.activity[5])

    def stop(self) -> tuple[int, float, str]:
        """(META writes applied, their WCU: model-counted with ``limits``, else reported, what else
        the aggregator's service answered: outcomes other than applied, and attempts beyond one)."""
        self.done.set()
        try:
            writes, wcu, other = self.out.get(timeout=120)
        finally:
            self.process.join(30)
        return int(writes), float(wcu), str(other)


def _aggregate(
    table: str,
    endpoint: str,
    limits: dict[str, Any] | None,
    queues: tuple[str, dict[str, str]] | None,
    activity: Any,
    ready: Any,
    done: Any,
    out: Any,
) -> None:
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    from counters.core import client as dynamo
    from counters.core.outcome import Outcome

    refs = sqs = None
    if queues is not None:
        from devstack.sqs import sqs_client

        os.environ["AWS_ENDPOINT_URL_SQS"], refs = queues  # the handler's own SQS client (counters.core.client) reads it
        sqs = sqs_client(queues[0])
    applied: list[Any] = []
    poller, saved = hot.stream_aggregator(table, endpoint, hot.LAMBDA_WINDOW, applied, poller_window=True, refs=refs, sqs=sqs)
    _watch(poller, table, refs, activity)
    dynamo.reset_client()
    model = LaneModel(dynamo.client(), table=table, meta_pk=f"POST#{POST}", **limits) if limits is not None else None
    poller.start(interval=hot.LOCAL_POLL)
    ready.set()
    done.wait()
    poller.stop()
    hot._restore(saved)
    writes = sum(1 for x in applied if x.result.outcome is Outcome.APPLIED)
    wcu = (
        model.consumed().get(model.meta, {"wcu": 0.0})["wcu"] if model is not None else sum(x.result.capacity.write_units for x in applied)
    )
    outcomes = Counter(str(x.result.outcome.value) for x in applied if x.result.outcome is not Outcome.APPLIED)
    retried = sum(x.result.attempts - 1 for x in applied)
    out.put((writes, wcu, ", ".join([*(f"{n} {o}" for o, n in outcomes.items()), f"{retried} retried"])))


def _watch(poller: Any, table: str, refs: dict[str, str] | None, activity: Any) -> None:
    """Share the poller's activity (:meth:`Aggregating.last_poll`, :meth:`Aggregating.invocations`)
    and count the handler's deferrals (its module's ``defer``, which its handler calls by name)."""
    from testkit.functions import handler_module, template_function

    invoke = poller.invokers[hot.AGGREGATOR]

    def invoked(event: dict[str, Any]) -> Any:
        try:
            return invoke(event)
        finally:
            with activity.get_lock():
                activity[3] += 1

    poller.invokers[hot.AGGREGATOR] = invoked
    poll = poller.poll_once

    def polled(*, flush: bool = True) -> int:
        began, before = time.monotonic(), activity[3]
        n = poll(flush=flush)  # a poll that raised is not a completed one
        with activity.get_lock():
            activity[0], activity[1], activity[2] = began, activity[3] - before, poller.held
        return int(n)

    poller.poll_once = polled
    module = handler_module(template_function(hot.AGGREGATOR, table, refs=refs))  # imported already: the same module
    defer = module.defer

    def deferring(command: Any) -> bool:
        took = bool(defer(command))
        with activity.get_lock():
            activity[4 if took else 5] += 1
        return took

    module.defer = deferring


@contextmanager
def hot_post(
    ddb: Any, endpoint: str, *, spread: int, max_spread: int, limits: dict[str, Any] | None, retry: bool = True
) -> Iterator[dict[str, Any]]:
    """A table with one hot post grown to ``spread``, the aggregator on its stream (1 s window),
    with ``retry`` the retry queue and its worker (:class:`bench.retrying.Retrying`; the JVM's
    warm-ups run without), a reader of its tally every 50 ms and, with ``limits``, the model on the
    layer's client (and on the aggregator's and the worker's, each its own). After the body, the
    run waits until the stream is drained and the retry queue is empty
    (:func:`bench.retrying.drain_until_quiet`): ``run["retry"]`` says how long and what the queue did."""
    from counters.core import client as dynamo
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.services.likes import Likes
    from counters.services.likes.merging import Merges
    from counters.store.posts import PostStore

    table = f"spread-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(table))
    dynamo.reset_client()
    layer = dynamo.client()
    likes = Likes(table, max_spread=max_spread)
    likes.posts.create_post(author_id="bench", body="one post, many likers", post_id=POST, mode="hot")
    info = likes.posts.info(POST)
    while info.spread is not None and info.spread < spread:
        info = likes.posts.grow(POST, info, 2 * info.spread)
    if spread > 8:  # grown before any like: its sweep (nothing to point to) settles it
        Merges(table).settle(POST, spread)
        info = likes.posts.fresh(POST)
    assert info.spread == spread and info.settled, info
    retrying = Retrying(table, endpoint, limits, params={"LikesMaxSpread": str(max_spread)}, meta_pk=f"POST#{POST}") if retry else None
    model = LaneModel(layer, table=table, meta_pk=f"POST#{POST}", **limits) if limits is not None else None
    reads: list[tuple[float, int, int]] = []  # (time, tally, spread)
    sweeps: list[tuple[float, int, int]] = []  # (time, spread, lanes swept: all of the old spread once settled) when it changed
    stop = threading.Event()
    posts = PostStore(table, dynamodb=layer)

    def reader() -> None:
        policy = RetryPolicy()
        while not stop.is_set():
            began = time.perf_counter()
            try:
                got = posts.read(POST, policy)  # META and, past 64 lanes, its groups' items: the tally GET shows
            except ContentionError:
                continue
            now = time.perf_counter()
            assert got is not None and got.spread is not None
            spread_now = got.spread
            reads.append((now, got.tally, spread_now))
            swept = got.swept
            if not sweeps or sweeps[-1][1:] != (spread_now, swept):
                sweeps.append((now, spread_now, swept))
            stop.wait(max(0.0, hot.READ_EVERY - (now - began)))

    reading = threading.Thread(target=reader, name="tally-reader", daemon=True)
    run: dict[str, Any] = {"table": table, "likes": likes, "model": model, "reads": reads, "sweeps": sweeps, "retry": None}
    aggregator: Aggregating | None = None
    try:
        if retrying is not None:
            retrying.start()
        aggregator = Aggregating(table, endpoint, limits, (retrying.endpoint, retrying.refs) if retrying is not None else None)
        reading.start()
        aggregator.start()
        yield run
        drained = drain_until_quiet(Settled(aggregator, retrying.depth if retrying is not None else lambda: 0))
        if retrying is not None:
            dlq, stream_dlq = retrying.depth(RETRY_DLQ), retrying.depth(STREAM_DLQ)
            deferred, refused = aggregator.deferrals()
            run["retry"] = Settlement(drained, deferred, refused, WorkerCounts(), dlq, stream_dlq)
        elif drained is None:
            run["retry"] = Settlement(drained, 0, 0, WorkerCounts(), 0, 0)
    finally:
        stop.set()
        if reading.is_alive():
            reading.join()
        if aggregator is not None:
            run["agg_writes"], run["agg_wcu"], run["agg_other"] = aggregator.stop()
        if retrying is not None:
            counts = retrying.stop()
            if run["retry"] is not None:
                run["retry"].worker = counts
        if model is not None:
            model.detach()
    try:
        run["counted"], run["holders"] = count(ddb, table, likes)
        run["like_bytes"] = hot._like_bytes(ddb, table)
        meta = {"PK": {"S": f"POST#{POST}"}, "SK": {"S": "META"}}
        run["meta_bytes"] = item_size(ddb.get_item(TableName=table, Key=meta, ConsistentRead=True)["Item"])
    finally:
        dynamo.reset_client()
        ddb.delete_table(TableName=table)


# ----------------------------------------------------------------------------- the spread table
def _like(likes: Any, user: str) -> str:
    """One like (a ``ContentionError`` passes through: the API's 503/202); the user who liked."""
    likes.toggling.like(POST, user)
    return user


@dataclass
class SpreadRow:
    spread: int
    model: str
    load: float
    clients: int
    rate: float
    likes: int
    gave_up: int
    write_throttles: int
    read_throttles: int
    like_wcu: float | None  # per like, counted by the model (the likes' own keys)
    agg_wcu: float | None  # per like, counted by the model on META (the aggregator's writes)
    like_rcu: float | None  # per like, counted by the model on the lanes (the chain reads of ``Posts.locate``)
    cost: float  # per like, cost model (items' sizes): the like + the aggregator's META writes
    agg_writes: int
    agg_other: str  # the aggregator's other answers (outcomes, retried attempts)
    meta_bytes: int
    lags: list[float]
    lag_missing: int
    exact: str
    retry: Settlement | None = None  # the retry queue and its worker, after the run settled

    @property
    def wcu(self) -> float | None:
        return None if self.like_wcu is None or self.agg_wcu is None else self.like_wcu + self.agg_wcu


def measure_spread(spread: int, limits: dict[str, Any] | None, label: str, clients: int, seconds: float, warm: float) -> SpreadRow:
    """One row, on a DynamoDB Local of its own warmed ``hot.JVM_WARM`` s first (unmeasured likes)."""
    with fresh_local() as (ddb, endpoint):
        if hot.JVM_WARM:
            with hot_post(ddb, endpoint, spread=spread, max_spread=8, limits=None, retry=False) as run:
                hot._drive(lambda i: run["likes"].toggling.like(POST, f"w{i}").result, clients, hot.JVM_WARM, 0.0)
                run["expect"] = 0
        load = os.getloadavg()[0]
        with hot_post(ddb, endpoint, spread=spread, max_spread=8, limits=limits) as run:
            likes, model = run["likes"], run["model"]
            drive = hot._drive(lambda i: _like(likes, f"u{i}"), clients, seconds, warm)
            run["expect"] = len(drive.results)
            if model is not None:
                model.detach()  # the drain's and the audit's calls are not the row's
    done = len(drive.results)
    per = max(1, done)
    writes, reads = model.like_throttles() if model is not None else (0, 0)
    like_wcu = agg_wcu = like_rcu = None
    if model is not None:
        consumed = model.consumed()
        at_meta = consumed.get(model.meta, {"wcu": 0.0, "rcu": 0.0})
        like_wcu, agg_wcu = (model.total("wcu") - at_meta["wcu"]) / per, run["agg_wcu"] / per  # META's WCU: the aggregator's process
        like_rcu = (model.total("rcu") - at_meta["rcu"]) / per
    agg_writes = run["agg_writes"]
    like_cost, agg_cost = hot.cost_model("hot", run["like_bytes"], run["meta_bytes"], done, agg_writes)
    lags, missing = hot.lag_samples(drive.stamps, [(t, n) for t, n, _ in run["reads"]], drive.start + warm)
    acknowledged = set(drive.results)
    return SpreadRow(
        spread=spread,
        model=label,
        load=load,
        clients=clients,
        rate=drive.rate,
        likes=done,
        gave_up=drive.gave_up,
        write_throttles=writes,
        read_throttles=reads,
        like_wcu=like_wcu,
        agg_wcu=agg_wcu,
        like_rcu=like_rcu,
        cost=like_cost + agg_cost,
        agg_writes=agg_writes,
        agg_other=run["agg_other"],
        meta_bytes=run["meta_bytes"],
        lags=lags,
        lag_missing=missing,
        exact=settled_exact(run, acknowledged),
        retry=run["retry"],
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def spread_table(rows: list[SpreadRow], scale: float) -> str:
    base = next((r.rate for r in rows if r.spread == SPREADS[0] and r.model != "no model"), None)
    wcu = WCU_PER_PARTITION / scale
    lines = [
        "| spread | limits | load | clients | sustained likes/s | vs spread 8 | WCU ceiling (keys x WCU/s) | likes (gave up) "
        "| throttles per like: write / read | WCU/like model-counted: likes + META | WCU/like cost model | RCU/like (chain reads) | aggregator writes (likes per write; other answers) "
        "| META bytes | lag p50 / p99 ms (n) | retry queue: deferred / worker ran (done, failed) / DLQ | drained in s | counted once |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        per = max(1, r.likes)
        ratio = f"{r.rate / base:.1f}x" if base and r.model != "no model" else "-"
        ceiling = f"{r.spread * wcu:.0f}" if r.model != "no model" else "-"
        model = "-" if r.wcu is None else f"{r.like_wcu:.2f} + {r.agg_wcu:.3f} = {r.wcu:.3f}"
        writes = f"{r.agg_writes} ({r.likes / r.agg_writes:.0f}; {r.agg_other})" if r.agg_writes else "-"
        lag = f"{_ms(hot.percentile(r.lags, 50))} / {_ms(hot.percentile(r.lags, 99))} ({len(r.lags)})"
        if r.lag_missing:
            lag += f", {r.lag_missing} never seen"
        queue = "-" if r.retry is None else r.retry.summary()
        drained = "-" if r.retry is None else "did not drain" if r.retry.drained is None else f"{r.retry.drained:.1f}"
        lines.append(
            f"| {r.spread} | {r.model} | {r.load:.1f} | {r.clients} | {r.rate:.1f} | {ratio} | {ceiling} | {r.likes} ({r.gave_up}) "
            f"| {r.write_throttles / per:.2f} / {r.read_throttles / per:.2f} | {model} | {r.cost:.3f} | {'-' if r.like_rcu is None else f'{r.like_rcu:.2f}'} | {writes} | {r.meta_bytes} | {lag} | {queue} | {drained} | {r.exact} |"
        )
    return "\n".join(lines)


def spread_verdict(rows: list[SpreadRow], scale: float) -> list[str]:
    modelled = {r.spread: r for r in rows if r.model != "no model"}
    control = next((r for r in rows if r.model == "no model"), None)
    low, high = modelled.get(min(modelled, default=0)), modelled.get(max(modelled, default=0))
    if low is None or high is None or low is high:
        return []
    ratio = high.rate / low.rate if low.rate else float("inf")
    wcu = WCU_PER_PARTITION / scale
    out = [
        f"- Sustained likes/s, spread {low.spread} to {high.spread} under the same model: {low.rate:.1f} to {high.rate:.1f}, "
        f"**{ratio:.1f}x** (target >= 6x: {'met' if ratio >= 6 else 'missed'}); the WCU ceilings are {low.spread * wcu:.0f} and {high.spread * wcu:.0f}."
    ]
    cost = max(r.cost for r in modelled.values())
    counted = max(r.wcu or 0.0 for r in modelled.values())
    out.append(
        f"- WCU per like with the {hot.LAMBDA_WINDOW:g} s batching window, by the cost model (the like + the aggregator's applied META writes x "
        f"WCU(META as stored)): at most {cost:.3f} over the spreads (target <= 1.05: {'met' if cost <= 1.05 else 'missed'}); "
        f"model-counted at most {counted:.3f} (the model charges an UpdateItem by its expression values when it is larger than "
        f"the item it last saw Put, and the aggregator's values at 64 lanes, checkpoints and their conditions, exceed META)."
    )
    p99s = [hot.percentile(r.lags, 99) for r in modelled.values()]
    worst = max((p for p in p99s if p is not None), default=None)
    unseen = sum(r.lag_missing for r in modelled.values())
    out.append(
        f"- Tally lag p99: at most {_ms(worst)} ms (target <= 2000 ms: {'met' if worst is not None and worst <= 2.0 and not unseen else 'missed'})."
    )
    per = max(1, high.likes)
    if high.read_throttles > high.write_throttles:
        out.append(
            f"- What binds spread {high.spread}: reads ({high.read_throttles / per:.2f} read throttles per like against "
            f"{high.write_throttles / per:.2f} write throttles). A like on a grown post first reads the user's older chain lanes "
            f"(`Posts.locate`: a consistent GetItem each, 1 RCU), and the oldest lanes S0..S{SPREADS[0] - 1} take those reads "
            f"from nearly every new user: 7/8 of the likes read one of 8 keys, at {3 * wcu:g} RCU/s each here."
        )
    if control is not None:
        binds = (
            "the model binds"
            if control.rate >= 1.3 * high.rate
            else "**the machine may bind**: its own rate is not clearly above the model's"
        )
        out.append(
            f"- Control: spread {control.spread} without the model did {control.rate:.1f} likes/s (load {control.load:.1f}) against "
            f"{high.rate:.1f} under it and a ceiling of {high.spread * wcu:.0f}: {binds}."
        )
    out.append(
        "- Counted once: " + ", ".join(f"spread {r.spread}{' (no model)' if r.model == 'no model' else ''} {r.exact}" for r in rows) + "."
    )
    return out


# ----------------------------------------------------------------------------- the step
@dataclass
class Second:
    at: int  # s since the start
    offered: int
    liked: int
    gave_up: int
    write_throttles: int
    read_throttles: int
    spread: int
    throttled: int = 0  # likes answered this second that met at least one throttle (each retry of one meets its own)

    @property
    def throttles_per_like(self) -> float:
        throttles = self.write_throttles + self.read_throttles
        return throttles / (self.liked + self.gave_up) if self.liked + self.gave_up else float(throttles > 0) * float("inf")

    @property
    def throttled_share(self) -> float:
        """Likes that met a throttle, per like answered."""
        answered = self.liked + self.gave_up
        return self.throttled / answered if answered else 0.0


@dataclass
class Step:
    low: float
    high: float
    before: float
    after: float
    load: float
    burst: float
    seconds: list[Second] = field(default_factory=list)
    absorbed: float | None = None  # s from the step until throttles per like stay under 0.1; None: never
    absorbed_likes: float | None = None  # the same for the share of likes that met a throttle
    outcomes: Counter[str] = field(default_factory=Counter)
    exact: str = ""
    extra: int = 0  # users with a like item whose like was not acknowledged (gave up after its write went in)
    tally: int = 0
    grown: list[tuple[float, int]] = field(default_factory=list)  # (s since the step, spread)
    first_lanes: float | None = None  # s since the step when the largest spread's sweep had done lanes S0..S7
    settled: float | None = None  # s since the step when the largest spread was settled
    liked_items: int = 0
    lags: list[float] = field(default_factory=list)
    lag_missing: int = 0
    retry: Settlement | None = None  # the retry queue and its worker, after the run settled


ABSORBED = 0.1  # throttles per like the step must fall under
LAST = 10.0  # s at the end of the step whose throttles per like are reported


def last_throttles(seconds: list[Second], last: float = LAST) -> float:
    """Throttles per answered like over the step's last ``last`` seconds."""
    tail = seconds[-int(last) :]
    answered = sum(s.liked + s.gave_up for s in tail)
    throttles = sum(s.write_throttles + s.read_throttles for s in tail)
    return throttles / answered if answered else (float("inf") if throttles else 0.0)


def last_throttled(seconds: list[Second], last: float = LAST) -> tuple[float, float]:
    """Over the last ``last`` seconds: (likes that met a throttle per answered like, throttles per such like)."""
    tail = seconds[-int(last) :]
    answered, throttled = sum(s.liked + s.gave_up for s in tail), sum(s.throttled for s in tail)
    throttles = sum(s.write_throttles + s.read_throttles for s in tail)
    return (throttled / answered if answered else 0.0), (throttles / throttled if throttled else 0.0)


def time_to_absorb(
    seconds: list[Second], step_at: float, per_like: Callable[[Second], float] | None = None, *, hold: float = 0.0
) -> float | None:
    """Seconds from the step (at ``step_at`` s) until the end of the last second whose throttles
    per like (or ``per_like``) were at or over ``ABSORBED``, when every second after it is under
    (0: none was); ``None`` when the last second is still over, or when fewer than ``hold``
    seconds at the end are under (a second or two under the bound is no sign that it stays):
    not absorbed."""
    measure = per_like or (lambda s: s.throttles_per_like)
    after = [s for s in seconds if s.at >= int(step_at)]
    over = [s.at for s in after if measure(s) >= ABSORBED]
    if not over:
        return 0.0
    if not after or after[-1].at - over[-1] < max(1.0, hold):
        return None
    return over[-1] + 1 - step_at


def run_step(*, scale: float, low: float, high: float, before: float, after: float, workers: int, burst: float = 1.0) -> Step:
    """The step on a post created at spread 8 with growth on (``Likes(max_spread=MAX_SPREAD)``, 128), open loop."""
    from counters.core.errors import ContentionError
    from counters.store.post_items import MAX_SPREAD

    limits = {"scale": scale, "burst_seconds": burst}
    with fresh_local() as (ddb, endpoint):
        if hot.JVM_WARM:
            with hot_post(ddb, endpoint, spread=8, max_spread=8, limits=None, retry=False) as run:
                hot._drive(lambda i: _like(run["likes"], f"w{i}"), 8, hot.JVM_WARM, 0.0)
                run["expect"] = 0
        step = Step(low, high, before, after, os.getloadavg()[0], burst)
        with hot_post(ddb, endpoint, spread=8, max_spread=MAX_SPREAD, limits=limits) as run:
            likes, model = run["likes"], run["model"]
            lock = threading.Lock()
            answers: list[tuple[float, str, str, int]] = []  # (time, outcome, user, throttles it met)
            arrivals: list[float] = []

            def one(user: str) -> None:
                before = model.thread_throttles()
                try:
                    likes.toggling.like(POST, user)
                    outcome = "liked"
                except ContentionError:
                    outcome = "ContentionError (503/202, documented)"
                except Exception as exc:  # an undocumented answer: reported, never hidden
                    outcome = f"undocumented {type(exc).__name__}: {exc}"[:160]
                met = model.thread_throttles() - before
                with lock:
                    answers.append((time.perf_counter(), outcome, user, met))

            with ThreadPoolExecutor(workers) as pool:
                start = time.perf_counter()
                step_at, end = start + before, start + before + after
                due, k = start, 0
                while due < end:
                    wait = due - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    arrivals.append(due)
                    pool.submit(one, f"u{k}")
                    k += 1
                    due += 1.0 / (low if due < step_at else high)
            run["expect"] = sum(1 for _, o, _, _ in answers if o == "liked")
            model.detach()
    for n in range(int(before + after)):
        lo, hi = start + n, start + n + 1
        writes, reads = model.like_throttles(lo, hi)
        spreads = [s for t, _, s in run["reads"] if lo <= t < hi]
        step.seconds.append(
            Second(
                at=n,
                offered=sum(1 for t in arrivals if lo <= t < hi),
                liked=sum(1 for t, o, _, _ in answers if lo <= t < hi and o == "liked"),
                gave_up=sum(1 for t, o, _, _ in answers if lo <= t < hi and o != "liked"),
                write_throttles=writes,
                read_throttles=reads,
                spread=spreads[-1] if spreads else (step.seconds[-1].spread if step.seconds else 8),
                throttled=sum(1 for t, _, _, met in answers if lo <= t < hi and met),
            )
        )
    step.absorbed = time_to_absorb(step.seconds, before, hold=LAST)
    step.absorbed_likes = time_to_absorb(step.seconds, before, lambda s: s.throttled_share, hold=LAST)
    last = 8
    for t, _, s in run["reads"]:
        if s != last:
            step.grown.append((t - step_at, s))
            last = s
    top = max((s for _, s, _ in run["sweeps"]), default=8)
    step.first_lanes = next((t - step_at for t, s, n in run["sweeps"] if s == top and n >= 8), None)
    step.settled = next((t - step_at for t, s, n in run["sweeps"] if s == top and n == top // 2), None) if top > 8 else None
    step.outcomes = Counter(o for _, o, _, _ in answers)
    acknowledged = {u for _, o, u, _ in answers if o == "liked"}
    counted: Counted = run["counted"]
    step.exact = settled_exact(run, acknowledged)
    step.extra = len(run["holders"] - acknowledged)
    step.tally, step.liked_items = counted.tally, counted.liked
    acks = [t for t, o, _, _ in answers if o == "liked"]
    step.lags, step.lag_missing = hot.lag_samples(acks, [(t, n) for t, n, _ in run["reads"]])
    step.retry = run["retry"]
    return step


def _since(t: float | None) -> str:
    return "never" if t is None else f"{t:+.1f} s"


def step_lines(step: Step, scale: float) -> list[str]:
    wcu = WCU_PER_PARTITION / scale
    lines = [
        "| s | offered | liked | gave up | throttles per like (write + read) | likes that met a throttle, per like | spread |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in step.seconds:
        mark = " (step)" if s.at == int(step.before) else ""
        lines.append(
            f"| {s.at}{mark} | {s.offered} | {s.liked} | {s.gave_up} | {s.throttles_per_like:.2f} ({s.write_throttles} + {s.read_throttles}) "
            f"| {s.throttled_share:.3f} ({s.throttled}) | {s.spread} |"
        )
    absorbed = (
        f"**{step.absorbed:.0f} s**"
        if step.absorbed is not None
        else f"**not absorbed** within {step.after:g} s (under {ABSORBED:g} for {LAST:g} s to the end)"
    )
    absorbed_likes = f"{step.absorbed_likes:.0f} s" if step.absorbed_likes is not None else "never"
    share, each = last_throttled(step.seconds)
    undocumented = {o: n for o, n in step.outcomes.items() if o.startswith("undocumented")}
    grown = ", ".join(f"{s} at {t:+.1f} s" for t, s in step.grown) or "never"
    r = step.retry
    retry = (
        "none"
        if r is None
        else f"{r.deferred} commands deferred{f' ({r.refused} refused)' if r.refused else ''}, the worker received "
        f"{r.worker.received} ({r.worker.done} done, {r.worker.failed} failed{f', {r.worker.errors} invocation errors, {r.worker.timeouts} of them timeouts' if r.worker.errors else ''}; "
        f"longest invocation {r.worker.longest:.1f} s, largest message {r.worker.largest:,} bytes), "
        f"{r.dlq} in RetryDLQ, {r.stream_dlq} stream batches dropped; "
        + ("**did not drain**" if r.drained is None else f"drained {r.drained:.1f} s after the load")
    )
    return [
        *lines,
        "",
        f"- Model: scale {scale:g}, {step.burst:g} s of burst per key. Offered {step.low:g} likes/s (one key's capacity: {wcu:g}/s) for {step.before:g} s, then {step.high:g} likes/s "
        f"({step.high / (8 * wcu):g}x the 8-key ceiling of {8 * wcu:g}) for {step.after:g} s, open loop; load {step.load:.1f} at the start.",
        f"- Spread grew: {grown} (seconds from the step, as the tally reader saw META).",
        f"- Its sweep: lanes S0..S7 swept at {_since(step.first_lanes)}, the post settled at {_since(step.settled)}.",
        f"- Time to absorb (throttles per like under {ABSORBED:g} from then to the end): {absorbed} (target <= 60 s).",
        f"- Likes that met a throttle: under {ABSORBED:g} per like from {absorbed_likes} after the step; in the last {LAST:g} s "
        f"{share:.3f} per like, each meeting {each:.1f} throttles (its first call and the engine's retries, 125-250 ms then 250-500 ms apart, "
        f"against a key that refills one like's write in {1000 / wcu:.0f} ms under the model, 1 ms on AWS: docs/bench.md).",
        "- Answers: " + ", ".join(f"{n} {o}" for o, n in step.outcomes.most_common()) + f"; undocumented: {sum(undocumented.values())}.",
        f"- Throttles per like in the last {LAST:g} s: {last_throttles(step.seconds):.2f}. Tally lag p50 / p99: "
        f"{_ms(hot.percentile(step.lags, 50))} / {_ms(hot.percentile(step.lags, 99))} ms ({len(step.lags)} likes"
        f"{f', {step.lag_missing} never seen' if step.lag_missing else ''}).",
        f"- Retry queue: {retry}.",
        f"- Counted once after the stream drained and the retry queue emptied: {step.exact} (tally {step.tally}, "
        f"{step.liked_items} liked items; {step.extra} users hold a like whose answer was not a like).",
    ]


# ----------------------------------------------------------------------------- the section
def section(
    *,
    scale: float = SCALE,
    clients: int = CLIENTS,
    seconds: float = 15.0,
    warm: float = 3.0,
    spreads: tuple[int, ...] = SPREADS,
    control: bool = True,
    step: bool = True,
    before: float = 10.0,
    after: float = 60.0,
    workers: int = 64,
    high: float | None = None,
    step_burst: float = 1.0,
) -> list[str]:
    """The spread table and the step, as Markdown lines (``make bench``'s section)."""
    wcu = WCU_PER_PARTITION / scale
    label = f"model (scale {scale:g})"
    rows = []
    for spread in spreads:
        rows.append(measure_spread(spread, {"scale": scale}, label, clients, seconds, warm))
        print(spread_table(rows[-1:], scale).splitlines()[-1], file=sys.stderr, flush=True)
    if control:
        rows.append(measure_spread(max(spreads), None, "no model", clients, seconds, warm))
        print(spread_table(rows[-1:], scale).splitlines()[-1], file=sys.stderr, flush=True)
    lines = (
        []
        if not rows
        else [
            "",
            f"## One hot post at spread {', '.join(map(str, spreads))} under the limit model (bench/spread.py, {clients} clients, {seconds:g} s per row)",
            "",
            f"Distinct users like one post created `hot` and grown to the row's spread before the run; the model at scale {scale:g}: "
            f"{wcu:g} WCU/s and {3 * wcu:g} RCU/s per key, 1 s of burst, META's key at the service's own rates (its writes counted). "
            f"The LikeAggregatorFunction's handler runs from DynamoDB Local's stream with the template's {hot.LAMBDA_WINDOW:g} s batching window emulated. "
            f"First {warm:g} s left out; each row on a DynamoDB Local of its own. docs/bench.md explains the columns and the scale.",
            "",
            spread_table(rows, scale),
            "",
            *spread_verdict(rows, scale),
        ]
    )
    if step:
        high = 8 * 8 * wcu if high is None else high
        result = run_step(scale=scale, low=0.8 * wcu, high=high, before=before, after=after, workers=workers, burst=step_burst)
        title = "### A step absorbed by a growing spread" if rows else "## A step absorbed by a growing spread (bench/spread.py)"
        lines += ["", title, "", *step_lines(result, scale)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spread")
    parser.add_argument(
        "--scale", type=float, default=SCALE, help="divides DynamoDB's per-partition rates (default 400: 2.5 WCU/s per key)"
    )
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--seconds", type=float, default=15.0, help="per row of the table")
    parser.add_argument("--warm", type=float, default=3.0, help="seconds left out of the sustained rate")
    parser.add_argument("--spreads", default=",".join(map(str, SPREADS)))
    parser.add_argument("--no-control", action="store_true", help="skip the unmodelled row")
    parser.add_argument("--no-step", action="store_true")
    parser.add_argument("--step-only", action="store_true")
    parser.add_argument("--before", type=float, default=10.0, help="seconds of low offered load before the step")
    parser.add_argument("--after", type=float, default=60.0, help="seconds after the step")
    parser.add_argument("--workers", type=int, default=64, help="threads answering the step's arrivals")
    parser.add_argument("--high", type=float, help="likes/s after the step (default: 8x the 8-key ceiling)")
    parser.add_argument("--step-burst", type=float, default=1.0, help="the model's burst_seconds in the step (default 1)")
    args = parser.parse_args(argv)
    lines = section(
        scale=args.scale,
        clients=args.clients,
        seconds=args.seconds,
        warm=args.warm,
        spreads=() if args.step_only else tuple(int(s) for s in args.spreads.split(",")),
        control=not (args.no_control or args.step_only),
        step=not args.no_step,
        before=args.before,
        after=args.after,
        workers=args.workers,
        high=args.high,
        step_burst=args.step_burst,
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
