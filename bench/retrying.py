"""The retry queue and the retry worker for bench/spread.py, as the deployed stack has them, and the
rule that a run is over only when everything it started has settled.

The queue (:class:`Retrying`)
    In a process of its own (the writers' threads would starve an SQS server of the GIL): the
    local stack's SQS stand-in (devstack.sqs: moto's server, the template's queues with their
    visibility timeout and RedrivePolicy, a ``QueuePoller`` feeding RetryQueue to
    RetryWorkerFunction as its event source mapping does), the worker's real handler in a
    devstack ``FunctionPool`` (a process per execution environment, killed past the function's
    timeout). A message the worker reports as failed comes back after RetryQueue's visibility
    timeout (90 s); after ``maxReceiveCount`` (5) receives SQS moves it to RetryDLQ. The worker
    replays whatever command it finds (its own registry of replayables): nothing here names one.
    With ``limits``, the worker's DynamoDB client carries the bench's limit model
    (:func:`worker_model`, installed by devstack's ``DEVSTACK_SETUP`` hook): buckets of its own, at
    the same rates as the writers' and the aggregator's, each process's (one model per process).

Settled (:class:`Settled`, :func:`drain_until_quiet`)
    After the load stops, a run waits until the stream is drained and the retry queue is empty,
    by polling, never by a fixed sleep: the queue shows no message visible, in flight or delayed
    at some instant t (so the worker's writes all happened before t), then a poll of the
    aggregator's stream that began after t delivered nothing and held nothing, and no
    invocation of the aggregator ended between just before t and then (so none deferred a new
    message). ``drain_until_quiet`` polls that until it holds, or gives up after a long limit
    (600 s) and says so: a hang guard, not a bound the run is expected to meet.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, fields, replace
from typing import Any, Protocol

from devstack.runtime import FunctionPool

WORKER = "RetryWorkerFunction"
RETRY_QUEUE, RETRY_DLQ, STREAM_DLQ = "RetryQueue", "RetryDLQ", "LikeAggregatorDLQ"
LIMITS_ENV = "BENCH_WORKER_LIMITS"
"""The worker's limit model (JSON: LaneModel's arguments), read by :func:`worker_model`."""
DRAIN_LIMIT = 600.0
"""The hang guard: a run that has not settled after this many seconds reports "did not drain"."""
DRAIN_EVERY = 0.1


# ----------------------------------------------------------------------------- settled
class StreamActivity(Protocol):
    def invocations(self) -> int:
        """Invocations of the aggregator that have ended."""

    def last_poll(self) -> tuple[float, int, int]:
        """The last completed poll of the stream: (began, on the monotonic clock; invocations
        during it; records held after it)."""


class Settled:
    """One check of "the stream is drained and the retry queue is empty" (module doc), called
    repeatedly: ``False`` until a whole round has held."""

    def __init__(self, stream: StreamActivity, queue_depth: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.queue_depth, self.clock = stream, queue_depth, clock
        self.mark: tuple[int, float] | None = None  # (invocations ended, when the queue was seen empty)

    def __call__(self) -> bool:
        if self.mark is None:
            ended, at = self.stream.invocations(), self.clock()
            if self.queue_depth() == 0:
                self.mark = (ended, at)
            return False
        ended, at = self.mark
        began, invoked, held = self.stream.last_poll()
        if began < at:
            return False  # wait for a poll that began after the queue was seen empty
        self.mark = None
        return invoked == 0 and held == 0 and self.stream.invocations() == ended


def drain_until_quiet(
    quiet: Callable[[], bool],
    *,
    every: float = DRAIN_EVERY,
    limit: float = DRAIN_LIMIT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """Poll ``quiet`` every ``every`` s until it answers ``True``: the seconds it took; ``None``
    when it has not after ``limit`` s (the hang guard: "did not drain")."""
    began = clock()
    while not quiet():
        if clock() - began >= limit:
            return None
        sleep(every)
    return clock() - began


# ----------------------------------------------------------------------------- the queue and the worker
@dataclass
class WorkerCounts:
    """What the retry worker's event source mapping did: messages received (a message received
    again counts again), acknowledged, reported failed (back after the visibility timeout), and
    invocations that failed whole (an error or the function's timeout: the batch comes back)."""

    received: int = 0
    done: int = 0
    failed: int = 0
    errors: int = 0
    timeouts: int = 0  # of those errors, invocations killed at the function's timeout
    longest: float = 0.0  # s, the longest invocation
    largest: int = 0  # bytes, the largest message body


@dataclass
class Settlement:
    """The retry side of a run, read after it settled."""

    drained: float | None  # seconds from the end of the load until settled; None: did not drain
    deferred: int  # merge-likes (or any command) the aggregator queued
    refused: int  # deferrals the queue did not take (the batch was reported instead)
    worker: WorkerCounts
    dlq: int  # messages on RetryDLQ
    stream_dlq: int  # stream batches described on LikeAggregatorDLQ (dropped after their attempts)

    def problems(self) -> list[str]:
        out = [] if self.drained is not None else [f"did not drain in {DRAIN_LIMIT:.0f} s"]
        if self.dlq:
            out.append(f"{self.dlq} messages in RetryDLQ")
        if self.stream_dlq:
            out.append(f"{self.stream_dlq} stream batches dropped")
        return out

    def summary(self) -> str:
        w = self.worker
        ran = f"{w.received} ({w.done} done, {w.failed} failed{f', {w.errors} invocation errors ({w.timeouts} timeouts)' if w.errors else ''})"
        return f"{self.deferred}{f' (+{self.refused} refused)' if self.refused else ''} / {ran} / {self.dlq}"


class Retrying:
    """RetryQueue and RetryWorkerFunction (module doc) in a process of their own, for ``table``."""

    def __init__(self, table: str, dynamodb_endpoint: str, limits: dict[str, Any] | None, *, params: dict[str, str], meta_pk: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.done, self.out = ctx.Event(), ctx.Queue()
        model = None if limits is None else {"table": table, "meta_pk": meta_pk, **limits}
        # not a daemon: its function's workers are processes of its own (stop() ends it, or kills it)
        self.process = ctx.Process(target=_retrying, args=(table, dynamodb_endpoint, model, params, self.done, self.out))
        self.endpoint = ""
        self.refs: dict[str, str] = {}
        self.sqs: Any = None

    def start(self) -> None:
        from devstack.sqs import sqs_client

        self.process.start()
        got = self.out.get(timeout=120)
        if got[0] != "ready":
            raise RuntimeError(f"the retry queue's process did not start: {got}")
        self.endpoint, self.refs = got[1], got[2]
        self.sqs = sqs_client(self.endpoint)

    def depth(self, logical: str = RETRY_QUEUE) -> int:
        """Messages visible + in flight + delayed on a queue."""
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.refs[logical], AttributeNames=names)["Attributes"]
        return sum(int(attrs.get(n, 0)) for n in names)

    def stop(self) -> WorkerCounts:
        """Stop the poller, the worker and the emulator: what the worker did (nothing, if it never started)."""
        if self.process.pid is None:
            return WorkerCounts()
        self.done.set()
        try:
            counts = self.out.get(timeout=120) if self.process.is_alive() else None
        except queue.Empty:
            counts = None
        finally:
            self.process.join(30)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        return WorkerCounts(*counts) if isinstance(counts, tuple) and len(counts) == len(fields(WorkerCounts)) else WorkerCounts()


def _retrying(table: str, dynamodb_endpoint: str, model: dict[str, Any] | None, params: dict[str, str], done: Any, out: Any) -> None:
    """The process: moto's SQS server, the template's queues, RetryQueue's poller and the worker."""
    from devstack.sqs import QueuePoller, SqsEmulator, create_queues, sqs_client
    from devstack.template import read_stack

    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = dynamodb_endpoint
    os.environ["DEVSTACK_QUIET_METRICS"] = "1"  # no EMF line per invocation on the bench's output
    emulator = SqsEmulator().start()
    try:
        os.environ["AWS_ENDPOINT_URL_SQS"] = emulator.endpoint
        sqs = sqs_client(emulator.endpoint)
        refs, attrs = create_queues(sqs, table)
        stack = read_stack(table, params=params, refs=refs, attrs=attrs)
        source = next(s for s in stack.queue_sources if s.function == WORKER)
        fn = stack.functions[WORKER]
        fn = replace(fn, environment={**fn.environment, "POWERTOOLS_LOG_LEVEL": "WARNING"})  # no line per replay
        if model is not None:
            os.environ["DEVSTACK_SETUP"] = json.dumps({WORKER: "bench.retrying:worker_model"})
            os.environ[LIMITS_ENV] = json.dumps(model)
        pool = CountingPool(fn, concurrency=1)
        pool.warm()
        poller = QueuePoller(sqs, refs[source.queue], attrs[f"{source.queue}.Arn"], pool, source.batch_size, source.report_failures)
        poller.start()
        out.put(("ready", emulator.endpoint, refs))
        done.wait()
        poller.stop()
        pool.close()
        out.put(astuple(pool.counts))
    except BaseException as exc:
        out.put(("failed", repr(exc)))
        raise
    finally:
        emulator.stop()


class CountingPool(FunctionPool):
    """A FunctionPool that counts what the queue's poller hands it (:class:`WorkerCounts`)."""

    def __init__(self, fn: Any, concurrency: int = 1) -> None:
        super().__init__(fn, concurrency)
        self.counts = WorkerCounts()

    def invoke(self, event: dict[str, Any]) -> tuple[str, Any]:
        began = time.monotonic()
        status, payload = super().invoke(event)
        records = event.get("Records", [])
        n = len(records)
        self.counts.received += n
        self.counts.longest = max(self.counts.longest, time.monotonic() - began)
        self.counts.largest = max([self.counts.largest, *(len(r.get("body", "")) for r in records)])
        if status != "ok":
            self.counts.errors += 1
            self.counts.timeouts += status == "timeout"
            self.counts.failed += n
        else:
            failed = len(payload.get("batchItemFailures") or []) if isinstance(payload, dict) else 0
            self.counts.failed += failed
            self.counts.done += n - failed
        return status, payload


_MODEL: Any = None


def worker_model() -> None:
    """``DEVSTACK_SETUP``'s callable in the worker's process: the bench's limit model on the layer's
    DynamoDB client (bench.spread.LaneModel, META at the service's rates), from :data:`LIMITS_ENV`."""
    global _MODEL
    from bench.spread import LaneModel
    from counters.core import client as dynamo

    spec = json.loads(os.environ[LIMITS_ENV])
    _MODEL = LaneModel(dynamo.client(), table=spec.pop("table"), meta_pk=spec.pop("meta_pk"), **spec)
