"""bench/retrying.py's rule that a run is over only when the stream is drained and the retry queue
is empty (polled until quiet, with a hang guard), on fakes and an injected clock: no time passes."""

from __future__ import annotations

from typing import Any

import pytest

from bench.retrying import DRAIN_LIMIT, CountingPool, Settled, Settlement, WorkerCounts, drain_until_quiet
from bench.spread import settled_exact
from devstack.runtime import FunctionPool


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Queue:
    """A retry queue whose depth (visible + in flight) falls to 0 after ``k`` looks, or never (``k=None``)."""

    def __init__(self, k: int | None) -> None:
        self.k, self.looks = k, 0

    def __call__(self) -> int:
        self.looks += 1
        assert self.looks < 10_000, "polled past the hang guard (600 s at 0.1 s is 6,000 looks)"
        return 1 if self.k is None or self.looks <= self.k else 0


class Stream:
    """The aggregator's stream activity: every look at it finds a poll that began now (the clock's
    time), with ``invoked`` invocations during it and ``held`` records held after it."""

    def __init__(self, clock: Clock, invoked: int = 0, held: int = 0, behind: float = 0.0) -> None:
        self.clock, self.invoked, self.held, self.behind = clock, invoked, held, behind
        self.ended = 0

    def invocations(self) -> int:
        return self.ended

    def last_poll(self) -> tuple[float, int, int]:
        return self.clock.now - self.behind, self.invoked, self.held


def drain(quiet: Any, clock: Clock, limit: float = DRAIN_LIMIT) -> float | None:
    return drain_until_quiet(quiet, every=0.1, limit=limit, clock=clock, sleep=clock.sleep)


def test_the_wait_returns_once_the_queue_has_emptied_and_a_later_poll_of_the_stream_was_quiet() -> None:
    clock = Clock()
    queue = Queue(k=5)
    took = drain(Settled(Stream(clock), queue, clock), clock)
    assert queue.looks == 6  # 5 looks with a message, the 6th empty: then one look at the stream
    assert took == pytest.approx(0.1 * 6)


def test_a_queue_that_never_empties_is_reported_by_the_hang_guard() -> None:
    clock = Clock()
    queue = Queue(k=None)
    assert drain(Settled(Stream(clock), queue, clock), clock, limit=600) is None
    assert clock.now >= 600
    assert queue.looks > 5000  # it kept polling until the guard, never gave up early


def test_a_poll_that_began_before_the_queue_was_seen_empty_is_no_verdict() -> None:
    clock = Clock()
    settled = Settled(Stream(clock, behind=1.0), Queue(k=0), clock)  # the last completed poll began 1 s ago
    assert not settled()  # the queue is empty at 0.0: marked
    clock.sleep(0.9)
    assert not settled()  # that poll began at -0.1, before the mark: no verdict, the mark stays
    assert settled.mark is not None
    clock.sleep(0.2)
    assert settled()  # it began at 0.1, after the mark, and was quiet


@pytest.mark.parametrize("activity", [{"invoked": 1}, {"held": 3}], ids=["invoked", "held"])
def test_a_poll_that_invoked_the_aggregator_or_held_records_is_not_quiet(activity: dict[str, int]) -> None:
    clock = Clock()
    settled = Settled(Stream(clock, **activity), Queue(k=0), clock)
    assert drain(settled, clock, limit=5) is None


def test_an_invocation_that_ended_after_the_queue_was_seen_empty_is_not_quiet() -> None:
    clock = Clock()
    stream = Stream(clock)
    settled = Settled(stream, Queue(k=0), clock)
    assert not settled()  # marked: no invocation ended yet
    stream.ended += 1  # one ended since (it may have deferred a message after the queue was looked at)
    assert not settled()
    assert not settled()  # marked again, with the new count
    assert settled()


def test_a_message_in_a_dlq_or_a_run_that_did_not_drain_is_not_exact() -> None:
    class Exact:
        def exact(self, acknowledged: set[str], holders: set[str]) -> str:
            return "exact"

    run: dict[str, Any] = {"counted": Exact(), "holders": set(), "retry": Settlement(2.0, 3, 0, WorkerCounts(3, 3, 0, 0), 0, 0)}
    assert settled_exact(run, set()) == "exact"
    run["retry"] = Settlement(2.0, 3, 0, WorkerCounts(8, 3, 5, 0), 1, 0)
    assert settled_exact(run, set()) == "1 messages in RetryDLQ"
    run["retry"] = Settlement(None, 3, 0, WorkerCounts(), 0, 2)
    assert settled_exact(run, set()) == f"did not drain in {DRAIN_LIMIT:.0f} s; 2 stream batches dropped"


def test_the_worker_counts_messages_received_done_and_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([("ok", {"batchItemFailures": [{"itemIdentifier": "b"}]}), ("timeout", {"errorType": "Sandbox.Timedout"})])
    monkeypatch.setattr(FunctionPool, "invoke", lambda self, event: next(answers))
    pool = CountingPool(None, concurrency=1)
    event = {"Records": [{"messageId": "a"}, {"messageId": "b"}, {"messageId": "c"}]}
    pool.invoke(event)
    pool.invoke(event)
    assert (pool.counts.received, pool.counts.done, pool.counts.failed, pool.counts.errors, pool.counts.timeouts) == (6, 2, 4, 1, 1)


CALLED: list[str] = []


def called() -> None:
    CALLED.append("setup")


def test_devstacks_setup_hook_calls_the_named_callable_for_that_function_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from devstack import runtime

    monkeypatch.setenv("DEVSTACK_SETUP", '{"RetryWorkerFunction": "tests.unit.test_bench_retrying:called"}')
    CALLED.clear()
    runtime._setup("LikesFunction")
    assert CALLED == []
    runtime._setup("RetryWorkerFunction")
    assert CALLED == ["setup"]
