"""``python -m bench.hot``: one hot post under DynamoDB's limits, modelled (testkit.limits).

The ``standard`` baseline of the "hot posts" work: many distinct users like ONE post
(``Likes.like``: one TransactWriteItems, the like item + the META ADD, 4 WCU: 2 on META's key
and 2 on the like item's, a spread key ``POST#<id>#S<n>`` for posts created since ``spread``, META's
own key before) from N threads, for a fixed time, against DynamoDB Local, with and without
:class:`testkit.limits.LimitModel` on the layer's client. A single-item PutItem on one partition
key (1 WCU) is the control: its ceiling with the model is the model's per-partition rate, which
shows that the model, not DynamoDB Local or the machine, is what binds.

Rows
    * ``no model``: DynamoDB Local's own speed on this machine (no limits, no conflicts);
    * ``model``: the default model (``transaction_ms`` of the service x ``scale`` held per
      transaction, so overlapping likes on META conflict as they would on the service);
    * ``model, no hold``: capacity only (``transaction_ms=0, hold_during_call=False``: no
      conflict can happen): where the WCU ceiling alone puts a like (1000/scale / 2 likes/s on
      META's key; / 4 when the like item shares that key).

Standard vs hot (:func:`run_posts`, also a section of ``make bench``): the same likes on one post
created ``standard`` and one created ``hot``, under one model (``--posts-scale``, default 50), with
a reader of the tally and, for ``hot``, the LikeAggregatorFunction's handler run from DynamoDB
Local's stream (:func:`measure_post`): likes/s and their ratio, WCU per like (reported, counted by
the model, cost model; the aggregator's share apart), RCU per tally read, tally lag p50/p99, the
audit. docs/bench.md explains the columns.

Sustained rate: completions after the first ``--warm`` seconds (the bucket starts full with
``burst_seconds`` of capacity) divided by the time they took. Every call goes through the
layer's retry engine (``RetryPolicy()``: 6 attempts, 20..500 ms full-jitter backoff); a like
whose budget runs out is a ``ContentionError`` (the API's 503/202), counted as ``gave up``.
Not part of the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client
from devstack.streams import subscription
from devstack.template import read_stack
from testkit.limits import WCU_PER_PARTITION, LimitModel, item_size, write_units

SCALE = 20.0
"""DynamoDB's 1,000 WCU/s per partition / 20 = 50 WCU/s: 12.5 likes/s and 50 PutItem/s on one
key, far below what DynamoDB Local does on 2 cores (~150-200 likes/s, ~200 PutItem/s in
docs/bench-results.md), so the model's limit binds, not the machine."""


POSTS_SCALE = 50.0
"""The standard vs hot table's scale: 20 WCU/s per partition key. A hot post spreads its likes
over 8 keys (160 likes/s at 1 WCU), which must stay below what DynamoDB Local does on 2 cores
(~240-300 hot likes/s without the model) for the model, not the machine, to bind; at 20 the
hot ceiling (400/s) is above it. Standard stays model-bound at any of these scales."""


def describe(scale: float, transaction_ms: float) -> str:
    from counters.services.likes.model import SPREAD

    w, r = WCU_PER_PARTITION / scale, 3000 / scale
    return (
        f"the model at scale {scale:g}: {w:g} WCU/s and {r:g} RCU/s per partition key, 1 s of burst, a transaction holds "
        f"its items {transaction_ms * scale:g} ms ({transaction_ms:g} ms x {scale:g}); a standard like's WCU ceiling is "
        f"{w / 2:g}/s (2 WCU on META's key per like, in a transaction, before any conflict), a hot like's "
        f"{SPREAD * w:g}/s (1 WCU on each of {SPREAD} spread keys)."
    )


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


@dataclass
class Drive:
    """What ``clients`` threads calling one operation for a fixed time did."""

    rate: float  # sustained ops/s after the warm-up
    results: list[Any]
    gave_up: int
    stamps: list[float]  # perf_counter time of every acknowledgement (a completed call), in order
    start: float


def _drive(op: Callable[[int], Any], clients: int, seconds: float, warm: float) -> Drive:
    """Run ``op(i)`` from ``clients`` threads for ``seconds``: the sustained rate, the results, how many gave up."""
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
            with lock:
                stamps.append(time.perf_counter())
                results.append(r)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = [s for s in stamps if s >= start + warm]
    rate = len(after) / (after[-1] - (start + warm)) if len(after) > 1 else 0.0
    return Drive(rate, results, gave_up, stamps, start)


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
            likes.posts.create_post(author_id="bench", body="hot", post_id="hot")
        model = LimitModel(layer, **limits_kwargs) if limits_kwargs is not None else None
        if case == "like":

            def op(i: int) -> Any:
                return likes.toggling.like("hot", f"u{i}").result

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
        drive = _drive(op, clients, seconds, warm)
        rate, results, gave_up = drive.rate, drive.results, drive.gave_up
        if model is not None:
            model.detach()
        done = len(results)
        reported = sum(r.capacity.write_units for r in results) / max(1, done)
        if case == "like":
            a = likes.audits.audit("hot")
            audit = f"{a.stored} = {a.counted}" if a.stored == a.counted else f"DRIFT {a.stored} vs {a.counted}"
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


# ----------------------------------------------------------------------------- standard vs hot, one post
AGGREGATOR = "LikeAggregatorFunction"
READ_EVERY = 0.05
"""The tally reader's period, s: a consistent GetItem of the post's META every ~50 ms."""
JVM_WARM = 3.0
"""Seconds of unmeasured likes on a fresh DynamoDB Local before a standard-vs-hot row."""
LOCAL_POLL = 0.2
"""How often the local stack's stream poller reads the stream (``StreamPoller.start``'s default)."""
LAMBDA_WINDOW = subscription(AGGREGATOR).batching_window
"""The template's ``MaximumBatchingWindowInSeconds``. The local poller reads the stream again as soon as
a batch is handled (it drains until a read comes back empty), so its batches are what arrived while
the last one ran. The hot row is also run with Lambda's window emulated: after a batch shorter than
``BatchSize`` the invoker waits out the rest of the window before returning, so the next read gets
what that second brought (Lambda invokes at once when the batch is full, and so does this)."""
DRAIN_TIMEOUT = 30.0
"""How long to wait, after the writers stop, for the tally to reach the acknowledged likes."""


def lag_samples(acks: list[float], reads: list[tuple[float, int]], since: float = float("-inf")) -> tuple[list[float], int]:
    """lag(n) = the time of the first read whose tally is >= n minus the time the acknowledged
    count reached n (the n-th acknowledgement), for every n acknowledged at or after ``since``.

    ``acks``: acknowledgement times (each +1; any order); ``reads``: (time, tally) (any order).
    Returns (lags in seconds, in n order; how many of those n no read ever reached). A lag may be
    negative: a read can see a write committed before its caller got the answer.
    """
    acked = sorted(acks)
    seen = sorted(reads)
    lags: list[float] = []
    missing = 0
    j, best, when = 0, -1, 0.0  # reads consumed; the highest tally seen so far and the time it was first seen
    for n, at in enumerate(acked, start=1):
        while best < n and j < len(seen):
            if seen[j][1] > best:
                best, when = seen[j][1], seen[j][0]
            j += 1
        if at < since:
            continue
        if best >= n:
            lags.append(when - at)
        else:
            missing += 1
    return lags, missing


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def cost_model(mode: str, like_bytes: int, meta_bytes: int, likes: int, aggregator_writes: int) -> tuple[float, float]:
    """What DynamoDB bills per like, from the items' sizes: (the like's own write, the aggregator's share).

    ``standard``: one TransactWriteItems, the like item and META, each 2x its WCU (prepare +
    commit). ``hot``: the like item's one write, plus the aggregator's conditional UpdateItems
    on META (each sized by META) spread over the likes they counted.
    """
    if mode == "standard":
        return 2.0 * (write_units(like_bytes) + write_units(meta_bytes)), 0.0
    return float(write_units(like_bytes)), aggregator_writes * write_units(meta_bytes) / max(1, likes)


@dataclass
class PostRow:
    """One post liked by distinct users from ``clients`` threads, in one mode, under one limit setting."""

    mode: str
    model: str
    clients: int
    rate: float
    likes: int  # acknowledged
    gave_up: int
    throttles: int
    conflicts: int
    like_wcu_reported: float  # per like
    agg_wcu_reported: float
    like_wcu_model: float | None  # per like, counted by the limit model (None: no model)
    agg_wcu_model: float | None
    like_wcu_cost: float
    agg_wcu_cost: float
    agg_writes: int  # the aggregator's applied META writes
    agg_retries: int  # the aggregator's attempts beyond one per post and batch (throttles, conflicts)
    like_retries: int  # the acknowledged likes' attempts beyond their first
    reads: int
    rcu_reported: float  # per tally read
    rcu_model: float | None
    lags: list[float]
    lag_missing: int
    drained: float | None  # s from the last acknowledgement until a read showed every acknowledged like
    audit: str
    lanes: int = 1  # partition keys the likes were written under
    load: float = 0.0  # the 1-minute load average when the row started
    window: float = 0.0  # s: Lambda's batching window, emulated (0: the local poller as it is)

    @property
    def name(self) -> str:
        return f"hot, {self.window:g} s batching window" if self.mode == "hot" and self.window else self.mode

    @property
    def wcu_reported(self) -> float:
        return self.like_wcu_reported + self.agg_wcu_reported

    @property
    def wcu_model(self) -> float | None:
        return None if self.like_wcu_model is None or self.agg_wcu_model is None else self.like_wcu_model + self.agg_wcu_model

    @property
    def wcu_cost(self) -> float:
        return self.like_wcu_cost + self.agg_wcu_cost


def _aggregator_module(table: str, refs: dict[str, str] | None = None) -> tuple[Any, Any]:
    """functions/like_aggregator/app.py (testkit.functions: imported once), with the template's
    environment for ``table`` (``refs``: the queues' URLs by logical id) set; returns (module, the
    environment to leave with ``_restore``)."""
    from testkit.functions import environment, handler_module, template_function

    fn = template_function(AGGREGATOR, table, refs=refs)
    # POWERTOOLS_METRICS_DISABLED: the EMF lines are not printed (the invoker clears them per call)
    env = environment(fn, {"POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"})
    env.__enter__()  # before the import (Metrics reads its namespace then); Powertools reads the rest per call
    return handler_module(fn), env


def stream_aggregator(
    table: str,
    endpoint: str,
    window: float,
    applied: list[Any],
    *,
    poller_window: bool = False,
    refs: dict[str, str] | None = None,
    sqs: Any = None,
) -> tuple[Any, Any]:
    """The LikeAggregatorFunction's handler (the template's environment for ``table``) on a
    ``StreamPoller`` of ``table``'s stream (the template's subscription, not started), its service's
    answers appended to ``applied``; ``window``: Lambda's batching window emulated in the invoker
    (:data:`LAMBDA_WINDOW`; 0: the local poller as it is). ``poller_window``: the poller holds a
    batch short of ``BatchSize`` for the template's ``MaximumBatchingWindowInSeconds`` instead
    (``window`` unused). The invoker's emulation takes what one GetRecords page brought, which
    caps the aggregator near 100 records a second when a page holds ~100 records (measured by
    bench/spread.py: ~96 likes per META write and 12 s of lag at 138 likes/s); the poller's own
    window reads page after page until the batch is full or the window ends, as Lambda does.
    ``refs`` (the queues' URLs by logical id) and ``sqs`` (a client of their emulator, as
    bench/retrying.py runs it): the handler defers to RetryQueue (``RETRY_QUEUE_URL``) and a batch
    that runs out of attempts is described on LikeAggregatorDLQ (the mapping's OnFailure); without
    them the handler has no queue and fails a batch it cannot finish.
    Returns (poller, the environment to leave with ``_restore``)."""
    from counters.streams import like_aggregator
    from devstack.runtime import LambdaContext
    from devstack.streams import StreamPoller, subscriptions

    module, saved = _aggregator_module(table, refs)
    settings = module.function.settings_type.from_env()
    service = like_aggregator(settings.table_name, retry=settings.retry)
    apply = service.apply

    def recorded(changes: Any) -> Any:
        out = apply(changes)
        applied.extend(out)
        return out

    service.apply = recorded  # the handler's own code calls it; this only keeps what it returns
    module.function.configure(settings, service)

    # the window is the bench's own (``window``, emulated in the invoker): the poller delivers at once
    subs = [s if poller_window else dataclasses.replace(s, batching_window=0.0) for s in subscriptions() if s.function == AGGREGATOR]
    window = 0.0 if poller_window else window

    def invoke(event: dict[str, Any]) -> tuple[str, Any]:
        began = time.perf_counter()
        try:
            return "ok", module.lambda_handler(event, LambdaContext.for_function(AGGREGATOR, 512, 30))
        except Exception as exc:  # a raised error restarts the batch, as Lambda does
            return "error", repr(exc)
        finally:
            module.metrics.clear_metrics()  # disabled metrics are kept, not flushed: they would pile up
            if window and len(event["Records"]) < subs[0].batch_size:  # see LAMBDA_WINDOW
                time.sleep(max(0.0, window - (time.perf_counter() - began)))

    return StreamPoller(table, endpoint, {AGGREGATOR: invoke}, subs, destinations=refs, sqs=sqs), saved


def _restore(env: Any) -> None:
    if env is not None:  # a standard post runs no aggregator: no environment was entered
        env.__exit__(None, None, None)


def _like_bytes(ddb: Any, table: str) -> int:
    """The largest like item's size (DynamoDB's rules), from a scan of the bench's own table."""
    largest, kwargs = 0, {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        largest = max([largest, *(item_size(i) for i in page["Items"] if i["SK"]["S"].startswith("LIKE#"))])
        if "LastEvaluatedKey" not in page:
            return largest
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def measure_post(
    ddb: Any,
    endpoint: str,
    mode: str,
    label: str,
    limits_kwargs: dict[str, Any] | None,
    clients: int,
    seconds: float,
    warm: float,
    window: float = 0.0,
) -> PostRow:
    """Distinct users like one post of ``mode`` for ``seconds``; a reader polls its tally; for a
    hot post the LikeAggregatorFunction's handler runs from DynamoDB Local's stream (the local
    stack's poller, the template's subscription), its writes through the same limited client."""
    from counters.core import client as dynamo
    from counters.core.engine import read
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.core.outcome import Capacity, Outcome
    from counters.services.likes import Likes
    from counters.store.items import to_item
    from counters.store.post_items import post_key

    load = os.getloadavg()[0]
    table = f"post-{uuid.uuid4().hex[:8]}"
    create_table(ddb, read_stack(table))
    dynamo.reset_client()
    layer = dynamo.client()
    likes = Likes(table)
    post = "p"
    likes.posts.create_post(author_id="bench", body="one post, many likers", post_id=post, mode=mode)
    likes.posts.like_state(post, "nobody")  # the post's mode, read and cached before the model: its reads are the reader's
    applied: list[Any] = []
    poller: Any = None
    saved: Any = None  # the aggregator's environment (hot mode only), left by _restore
    if mode == "hot":
        poller, saved = stream_aggregator(table, endpoint, window, applied)
    model = LimitModel(layer, **limits_kwargs) if limits_kwargs is not None else None
    reads: list[tuple[float, int]] = []
    read_capacity = Capacity()
    stop = threading.Event()
    policy = RetryPolicy()
    key = to_item(post_key(post))

    def reader() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            try:
                got = read(layer.get_item, policy, read_capacity, TableName=table, Key=key, ConsistentRead=True)
            except ContentionError:
                continue
            now = time.perf_counter()
            reads.append((now, int(got["Item"].get("likeTally", {"N": "0"})["N"])))
            stop.wait(max(0.0, READ_EVERY - (now - began)))

    reading = threading.Thread(target=reader, name="tally-reader", daemon=True)
    try:
        reading.start()
        if poller is not None:
            poller.start(interval=LOCAL_POLL)
        drive = _drive(lambda i: likes.toggling.like(post, f"u{i}").result, clients, seconds, warm)
        stopped = time.perf_counter()
        done = len(drive.results)
        while time.perf_counter() < stopped + DRAIN_TIMEOUT and not (reads and reads[-1][1] >= done):
            time.sleep(READ_EVERY)
        stop.set()
        reading.join()
        if poller is not None:
            poller.stop()
    finally:
        stop.set()
        if model is not None:
            model.detach()
        _restore(saved)
    try:
        lags, missing = lag_samples(drive.stamps, reads, drive.start + warm)
        caught = [t for t, tally in reads if tally >= done]
        drained = caught[0] - max(drive.stamps) if caught and drive.stamps else None
        a = likes.audits.audit(post)
        audit = f"{a.stored} = {a.counted}" if a.stored == a.counted else f"DRIFT {a.stored} vs {a.counted}"
        if a.counted != done:
            audit += f" ({done} acknowledged)"
        like_bytes = _like_bytes(ddb, table)
        meta = ddb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    finally:
        dynamo.reset_client()
        ddb.delete_table(TableName=table)
    agg_writes = sum(1 for x in applied if x.result.outcome is Outcome.APPLIED)
    like_cost, agg_cost = cost_model(mode, like_bytes, item_size(meta), done, agg_writes)
    per = max(1, done)
    like_model = agg_model = rcu_model = None
    lanes = 1
    if model is not None:
        consumed = model.consumed()
        at_meta = consumed.get(model.partition(table, key["PK"]), {"wcu": 0.0, "rcu": 0.0})
        total = model.total("wcu")
        if mode == "hot":
            like_model, agg_model = (total - at_meta["wcu"]) / per, at_meta["wcu"] / per
        else:
            like_model, agg_model = total / per, 0.0
        rcu_model = at_meta["rcu"] / max(1, len(reads))
        lanes = sum(1 for (t, _, pk), used in consumed.items() if t == table and used["wcu"] and pk != model.partition(table, key["PK"])[2])
        lanes = lanes if mode == "hot" else 1
    return PostRow(
        mode=mode,
        model=label,
        clients=clients,
        rate=drive.rate,
        likes=done,
        gave_up=drive.gave_up,
        throttles=sum(model.throttles.values()) if model else 0,
        conflicts=sum(model.conflicts.values()) if model else 0,
        like_wcu_reported=sum(r.capacity.write_units for r in drive.results) / per,
        agg_wcu_reported=sum(x.result.capacity.write_units for x in applied) / per,
        like_wcu_model=like_model,
        agg_wcu_model=agg_model,
        like_wcu_cost=like_cost,
        agg_wcu_cost=agg_cost,
        agg_writes=agg_writes,
        agg_retries=sum(x.result.attempts for x in applied) - len(applied),
        like_retries=sum(r.attempts - 1 for r in drive.results),
        reads=len(reads),
        rcu_reported=read_capacity.read_units / max(1, len(reads)),
        rcu_model=rcu_model,
        lags=lags,
        lag_missing=missing,
        drained=drained,
        audit=audit,
        lanes=lanes,
        load=load,
        window=window,
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def post_table(rows: list[PostRow]) -> str:
    """standard and hot side by side: one row per (mode, limits)."""
    standard = {r.model: r.rate for r in rows if r.mode == "standard"}
    lines = [
        "| post mode | limits | load | clients | sustained likes/s | vs standard, same limits | likes (gave up) | retries per like | throttles / conflicts per like "
        "| WCU/like reported: likes + aggregator | WCU/like model-counted | WCU/like cost model | aggregator writes (likes per write; retries) "
        "| RCU per tally read: reported / model | tally reads | lag p50 / p99 ms (n) | tally = likes, ms after the last like | tally = likes (audit) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        per = max(1, r.likes)
        base = standard.get(r.model)
        ratio = f"{r.rate / base:.1f}x" if r.mode != "standard" and base else "-"
        model = "-" if r.wcu_model is None else f"{r.like_wcu_model:.2f} + {r.agg_wcu_model:.2f} = {r.wcu_model:.2f}"
        writes = f"{r.agg_writes} ({r.likes / r.agg_writes:.0f}; {r.agg_retries} retried)" if r.agg_writes else "-"
        rcu = f"{r.rcu_reported:.1f} / " + ("-" if r.rcu_model is None else f"{r.rcu_model:.1f}")
        lag = f"{_ms(percentile(r.lags, 50))} / {_ms(percentile(r.lags, 99))} ({len(r.lags)})"
        if r.lag_missing:
            lag += f", {r.lag_missing} never seen"
        lines.append(
            f"| {r.name} | {r.model} | {r.load:.1f} | {r.clients} | {r.rate:.1f} | {ratio} | {r.likes} ({r.gave_up}) | {r.like_retries / per:.2f} "
            f"| {r.throttles / per:.2f} / {r.conflicts / per:.2f} "
            f"| {r.like_wcu_reported:.2f} + {r.agg_wcu_reported:.2f} = {r.wcu_reported:.2f} | {model} "
            f"| {r.like_wcu_cost:.2f} + {r.agg_wcu_cost:.2f} = {r.wcu_cost:.2f} | {writes} | {rcu} | {r.reads} | {lag} "
            f"| {_ms(r.drained)} | {r.audit} |"
        )
    return "\n".join(lines)


def verdict(rows: list[PostRow], scale: float) -> list[str]:
    """What the table says against the issue's targets, and what binds each row."""

    def first(mode: str, free: bool) -> PostRow | None:
        return next((r for r in rows if r.mode == mode and (r.model == "no model") == free and not r.window), None)

    std, hot, std_free, hot_free = first("standard", False), first("hot", False), first("standard", True), first("hot", True)
    windowed = next((r for r in rows if r.mode == "hot" and r.window), None)
    if std is None or hot is None:
        return []
    wcu = WCU_PER_PARTITION / scale
    ratio = hot.rate / std.rate if std.rate else float("inf")
    ceiling = hot.lanes * wcu / max(1.0, hot.like_wcu_cost)
    p99 = percentile(hot.lags, 99)
    out = [
        f"- Sustained likes/s on one post under the same model: hot {hot.rate:.1f}, standard {std.rate:.1f}: "
        f"**{ratio:.1f}x** (target >= 10x: {'met' if ratio >= 10 else 'missed'}).",
        f"- WCU per hot like: {hot.wcu_reported:.2f} reported by DynamoDB Local, {hot.wcu_model:.2f} counted by the model, "
        f"{hot.wcu_cost:.2f} by the cost model (target <= 1.5: {'met' if (hot.wcu_model or 0) <= 1.5 and hot.wcu_cost <= 1.5 else 'missed'}); "
        f"standard: {std.wcu_model:.2f} counted, {std.wcu_cost:.2f} by the cost model.",
        f"- Tally lag of the hot post: p50 {_ms(percentile(hot.lags, 50))} ms, p99 {_ms(p99)} ms "
        f"(target <= 2000 ms on the local stack: {'met' if p99 is not None and p99 <= 2.0 and not hot.lag_missing else 'missed'}).",
    ]
    if windowed is not None:
        out.append(
            f"- With Lambda's {windowed.window:g} s batching window emulated (the template's; bigger batches, fewer META writes): "
            f"lag p50 {_ms(percentile(windowed.lags, 50))} ms, p99 {_ms(percentile(windowed.lags, 99))} ms; "
            f"{windowed.wcu_model if windowed.wcu_model is not None else windowed.wcu_reported:.2f} WCU per like "
            f"({windowed.likes / max(1, windowed.agg_writes):.0f} likes per aggregator write); {windowed.rate:.1f} likes/s."
        )
    if std_free is not None:
        per = max(1, std.likes)
        binds = "the model binds" if std.rate < 0.5 * std_free.rate else "the machine may bind: the model's limit is not clearly below it"
        out.append(
            f"- What binds standard: {std.rate:.1f} likes/s under the model ({std.throttles / per:.1f} throttles and "
            f"{std.conflicts / per:.2f} conflicts per like) against {std_free.rate:.1f} without it: {binds}."
        )
    if hot_free is not None:
        throttled = hot.throttles / max(1, hot.likes)
        pushed_back = (hot.like_retries + hot.gave_up) / max(1, hot.likes)  # the likes' own retries: the model throttled them
        if pushed_back >= 0.05 and hot.rate >= 0.8 * ceiling:
            binds = f"the model binds: the rate is at its ceiling and the likes were throttled ({pushed_back:.2f} retries per like)"
            if hot_free.rate >= 1.2 * hot.rate:
                binds += f"; the machine did {hot_free.rate / hot.rate:.1f}x more without it"
            else:
                binds += (
                    f"; the no-model row did only {hot_free.rate / hot.rate:.2f}x that (load {hot_free.load:.1f} against "
                    f"{hot.load:.1f}): the machine's own ceiling was not clearly above the model's at that moment"
                )
        else:
            binds = (
                f"**the machine binds**, not the model ({pushed_back:.2f} retries per like, {throttled:.2f} throttles of any call; without the "
                f"model it did {hot_free.rate / max(0.1, hot.rate):.2f}x the rate under it): the ratio above is then a lower bound"
            )
        out.append(
            f"- What binds hot: the model's ceiling is {hot.lanes} spread keys x {wcu:g} WCU/s / "
            f"{hot.like_wcu_cost:g} WCU = {ceiling:.0f} likes/s (less when the users fall unevenly on the keys); measured "
            f"{hot.rate:.1f} under the model and {hot_free.rate:.1f} without it: {binds}."
        )
    return out


def _post_row(endpoint: str | None, mode: str, label: str, kwargs: dict[str, Any] | None, run: dict[str, Any]) -> PostRow:
    """One row on ``endpoint``, or (``None``) on a DynamoDB Local of its own, warmed with the row's mode first."""
    if endpoint is not None:
        return measure_post(dynamodb_client(endpoint), endpoint, mode, label, kwargs, **run)
    with DynamoDBLocal() as ddb_local:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
        ddb = dynamodb_client(ddb_local.endpoint)
        if JVM_WARM:  # DynamoDB Local's JIT (and the stream path's first calls): unmeasured
            measure_post(ddb, ddb_local.endpoint, mode, "warm-up", None, run["clients"], JVM_WARM, 0.0)
        return measure_post(ddb, ddb_local.endpoint, mode, label, kwargs, **run)


def run_posts(
    endpoint: str | None, *, scale: float, transaction_ms: float, clients: int, seconds: float, warm: float, window: bool = True
) -> list[PostRow]:
    """standard and hot, each without the model and under the default model (conflicts held); ``window``: hot under
    the model once more with Lambda's batching window emulated (:data:`LAMBDA_WINDOW`).

    ``endpoint`` None: every row on a DynamoDB Local of its own. One instance gets slower after a
    row of many likes (measured: 433 hot likes/s on a fresh one, then 158/s on the next row at the
    same load), which would make each row's numbers depend on the rows before it."""
    model = {"scale": scale, "transaction_ms": transaction_ms}
    label = f"model (scale {scale:g}, hold {transaction_ms * scale:g} ms)"
    cases: list[tuple[str, str, dict[str, Any] | None, float]] = [
        ("standard", "no model", None, 0.0),
        ("standard", label, model, 0.0),
        ("hot", label, model, 0.0),
        ("hot", "no model", None, 0.0),
    ]
    if window:
        cases.append(("hot", label, model, LAMBDA_WINDOW))
    rows = []
    for mode, name, kwargs, lambda_window in cases:
        run = {"clients": clients, "seconds": seconds, "warm": warm, "window": lambda_window}
        rows.append(_post_row(endpoint, mode, name, kwargs, run))
        print(post_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot")
    parser.add_argument("--scale", type=float, default=SCALE, help="divides DynamoDB's per-partition rates (default 20)")
    parser.add_argument("--transaction-ms", type=float, default=5.0, help="the service's transaction duration (held x scale)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=12.0, help="per row")
    parser.add_argument("--warm", type=float, default=3.0, help="seconds left out of the sustained rate (the burst)")
    parser.add_argument("--jvm-warm", type=float, default=6.0, help="seconds of unmeasured likes first (DynamoDB Local's JIT)")
    parser.add_argument("--endpoint", help="a running DynamoDB Local (default: start one)")
    parser.add_argument("--posts-only", action="store_true", help="only the standard vs hot table (not the like/PutItem rows)")
    parser.add_argument("--posts-scale", type=float, default=POSTS_SCALE, help="the scale of the standard vs hot table (default 50)")
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

    load = os.getloadavg()[0]
    rows: list[Row] = []
    if args.endpoint and not args.posts_only:
        rows = run_all(args.endpoint)
    elif not args.posts_only:
        with DynamoDBLocal() as ddb_local:
            rows = run_all(ddb_local.endpoint)
    posts = run_posts(  # with --endpoint on that DynamoDB Local, else each row on one of its own
        args.endpoint,
        scale=args.posts_scale,
        transaction_ms=args.transaction_ms,
        clients=args.clients,
        seconds=args.seconds,
        warm=args.warm,
    )
    w, r = 1000 / args.scale, 3000 / args.scale
    model_line = (
        ""
        if args.posts_only
        else f"Model: {w:g} WCU/s and {r:g} RCU/s per partition key (DynamoDB's 1,000 / 3,000 divided by {args.scale:g}), "
        f"1 s of burst; a like = 2 items x 2 WCU, 2 of them on META's key, so its WCU ceiling is {w / 2:g} likes/s "
        f"({w / 4:g} when the like item shares META's key, as for posts stored before spread keys); a PutItem's is {w:g}/s. "
    )
    print(
        f"\n{model_line}{os.cpu_count()} cores, {args.clients} clients, {args.seconds:g} s per row, first {args.warm:g} s left out; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.\n"
    )
    if rows:
        print(table(rows) + "\n")
    print(f"Standard vs hot on one post: {describe(args.posts_scale, args.transaction_ms)}\n")
    print(post_table(posts) + "\n")
    print("\n".join(verdict(posts, args.posts_scale)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
