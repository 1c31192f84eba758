"""The retry engine: every DynamoDB and SQS call of the layer runs through [`run`][counters.core.engine.run].

SDK retries are off ([`counters.core.client.CLIENT_CONFIG`][counters.core.client.CLIENT_CONFIG]), so a call made anywhere else has
no retry at all. [`run`][counters.core.engine.run] is the layer's only attempt loop. It owns:

* **classification** ([`counters.core.failures.classify`][counters.core.failures.classify]): condition failed / conflict /
  throttled / not sent / unknown outcome; anything else is re-raised untouched;
* **backoff** with full jitter between attempts (equal jitter after a throttle: never sooner than half its ceiling), within one [`RetryPolicy`][counters.core.failures.RetryPolicy] budget;
* **the token rule** for TransactWriteItems: after an *unknown* outcome the next attempt
  re-sends the **same** ClientRequestToken (a committed first attempt is then replayed,
  never re-applied); after a *definite* non-application a fresh one is drawn, unless the
  caller pinned it or an earlier attempt's outcome was unknown (then only that token can
  recognise its commit, so it is kept to the end);
* **hooks** for what a caller does when a condition fails (``on_condition``) or an outcome
  is unknown (``on_unknown``): stop with a verdict ([`Stop`][counters.core.engine.Stop]), re-send other
  parameters ([`Resend`][counters.core.engine.Resend], e.g. OCC's next round, planned after the backoff), or let the
  engine decide (``None``: a condition failure is final, an unknown outcome is re-sent);
* **one report type** ([`Report`][counters.core.engine.Report]);
* **a deadline** ([`deadline`][counters.core.engine.deadline]): inside it, no attempt (a first call, a retry, a page) is sent
  at or after the deadline: [`DeadlineReached`][counters.core.errors.DeadlineReached] is raised instead.

A test seam keeps it that way: with ``TALLY_ENGINE_GUARD=1`` in the environment, the
layer's clients refuse any call not issued from inside [`run`][counters.core.engine.run] (the test suite turns it
on for every process it starts).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import field
from typing import NamedTuple, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from counters.core import configuration, tracing
from counters.core.client import GUARD_ENV, DynamoDBClient, OutsideEngine, Params, Response, client, engine_call, guard, new_token
from counters.core.errors import ContentionError, DeadlineReached
from counters.core.failures import Classified, Failure, RetryPolicy, classify
from counters.core.items import Item
from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass

ERRORS = (ClientError, BotoCoreError)
__all__ = ["GUARD_ENV", "Operation", "OutsideEngine", "deadline", "guard", "read", "run", "transact"]
CONTENDED = frozenset({Failure.CONFLICT, Failure.THROTTLED})

Operation = Callable[..., Response]
"""A bound botocore operation (``client.update_item``...), called with keyword [`Params`][counters.core.client.Params]."""


class Stop(NamedTuple):
    """A hook's verdict: end the call now; ``value`` is kept on the report (``object``: the hook
    and the caller that reads it back agree on its type; the caller narrows it)."""

    value: object = None


class Resend(NamedTuple):
    """A hook's verdict: back off, then send again with these parameters (``None``: the same).

    ``refresh``, if given, is called after the backoff, just before the next attempt (never
    when the budget has run out or ``before`` refuses it), and its verdict replaces this one:
    a write conditioned on what was read is then planned from a state read after the backoff,
    not from one as old as the backoff (OCC's next round)."""

    params: Params | None = None
    refresh: Callable[[], Stop | Resend] | None = None


Hook = Callable[["Report", Classified], "Stop | Resend | None"]
Clock = Callable[[], float]

_deadline: contextvars.ContextVar[tuple[Clock, float] | None] = contextvars.ContextVar("tally_call_deadline", default=None)


@contextmanager
def deadline(at: float | None, clock: Clock = time.monotonic) -> Iterator[None]:
    """Inside this block, [`run`][counters.core.engine.run] sends no attempt once ``clock()`` reaches ``at``: it raises
    [`DeadlineReached`][counters.core.errors.DeadlineReached] instead (``None``: no deadline). The check is
    made before every attempt, retries and a query's next page included, so a caller with a time
    budget (the audit) never starts a call after it, whatever the call or the retries in it."""
    marker = _deadline.set(None if at is None else (clock, at))
    try:
        yield
    finally:
        _deadline.reset(marker)


@contextmanager
def stop_when(should_stop: Callable[[], bool]) -> Iterator[None]:
    """[`deadline`][counters.core.engine.deadline] given as a predicate: inside this block, no attempt
    is sent once ``should_stop()`` is true ([`DeadlineReached`][counters.core.errors.DeadlineReached]
    instead). For work told when to stop rather than by when (the retry worker's remaining time)."""
    with deadline(1.0, lambda: 1.0 if should_stop() else 0.0):
        yield


def past_deadline() -> bool:
    """Whether the deadline of the enclosing [`deadline`][counters.core.engine.deadline] block (if any) has passed."""
    current = _deadline.get()
    return current is not None and current[0]() >= current[1]


@dataclass
class Report:
    """How one logical call ended after every attempt."""

    outcome: Outcome = Outcome.CONTENTION
    """APPLIED (``response`` is the answer), REJECTED (a condition failed: see ``failure``),
    or CONTENTION (the budget ran out, or ``before`` refused another attempt)."""
    response: Response | None = None
    failure: Classified | None = None
    """The last classified failure."""
    attempts: int = 0
    contended_retries: int = 0
    """Attempts made again because the one before was refused by a conflict or a throttle (the
    pressure on an item; a condition failure or an unknown outcome is not counted)."""
    unknown_seen: bool = False
    """An attempt ended with an unknown outcome: it may have applied before the one reported."""
    stopped: bool = False
    """A hook said [`Stop`][counters.core.engine.Stop], or ``before`` refused another attempt."""
    value: object = None
    """What a hook's [`Stop`][counters.core.engine.Stop] carried."""
    capacity: Capacity = field(default_factory=Capacity)
    token: str | None = None
    """The ClientRequestToken of the last attempt (transactions)."""
    params: Params = field(default_factory=dict)
    """The parameters of the last attempt."""

    @property
    def attributes(self) -> Item | None:
        """``Attributes`` of the successful response (UpdateItem/PutItem ``ReturnValues``)."""
        return (self.response or {}).get("Attributes")

    @property
    def item(self) -> Item | None:
        """``Item`` of a successful GetItem."""
        return (self.response or {}).get("Item")


@tracing.traced  # one span per logical call when TALLY_TRACING=otel (counters.core.tracing); else a plain call
def run(
    operation: Operation,
    params: Params,
    *,
    policy: RetryPolicy,
    capacity: Capacity | None = None,
    write: bool = False,
    token: str | bool = False,
    before: Callable[[], bool] | None = None,
    on_condition: Hook | None = None,
    on_unknown: Hook | None = None,
    rounds: RetryPolicy | None = None,
) -> Report:
    """Call ``operation(**params)`` until it answers, a condition rejects it, a hook stops it,
    or ``policy`` runs out.

    ``rounds``: when ``on_condition`` re-sends ([`Resend`][counters.core.engine.Resend], e.g. a gapless sequence's next
    value after a lost race), that starts a new round: it draws on ``rounds`` (budget and backoff)
    and the new round has ``policy``'s whole budget for transient failures. Without ``rounds`` such
    a re-send is one more attempt under ``policy``.

    ``token``: ``False`` sends no ClientRequestToken; ``True`` sends one under the token rule
    (fresh after a definite failure); a string pins that token for every attempt.
    ``before`` may veto each attempt (e.g. a retry window closing). ``capacity`` (shared with
    the caller) accumulates every attempt's ConsumedCapacity; the report has its own otherwise.
    """
    report = Report(capacity=capacity if capacity is not None else Capacity())
    measured = _service(operation) == "dynamodb"  # every DynamoDB call reports what it consumed
    report.params = {**params, "ReturnConsumedCapacity": "TOTAL"} if measured else dict(params)
    if token:
        report.token = token if isinstance(token, str) else new_token()
    refresh: Callable[[], Stop | Resend] | None = None
    attempt, round_ = 0, 1  # attempts in this round (``policy``'s budget), rounds (``rounds``')
    while True:
        attempt += 1
        if before is not None and not before():
            report.stopped = True
            return report
        if refresh is not None:
            fresh, refresh = refresh(), None
            if isinstance(fresh, Stop):
                report.stopped, report.value = True, fresh.value
                return report
            if fresh.params is not None:
                report.params = {**fresh.params, "ReturnConsumedCapacity": "TOTAL"} if measured else dict(fresh.params)
        report.attempts += 1
        if report.failure is not None and report.failure.kind in CONTENDED:
            report.contended_retries += 1  # this attempt retries one refused by a conflict or a throttle
        if report.token is not None:
            report.params["ClientRequestToken"] = report.token
        if past_deadline():
            code = report.failure.code if report.failure else None
            raise DeadlineReached(f"the deadline passed before attempt {report.attempts}; not sent", cause_code=code)
        try:
            response = _send(operation, report.params)
        except ERRORS as exc:
            report.capacity.add_response(getattr(exc, "response", None), write=write)
            failure = classify(exc)
            configuration.note(operation, exc, failure)
            if failure is None:
                mistake = configuration.mistake(operation, exc, report.params)
                if mistake is not None:
                    raise mistake from exc
                raise
            report.failure = failure
            tracing.attempt_failed(report.attempts, failure)
            verdict: Stop | Resend | None
            if failure.kind is Failure.CONDITION:
                verdict = on_condition(report, failure) if on_condition is not None else None
                if verdict is None:
                    report.outcome = Outcome.REJECTED
                    return report
                if token is True and isinstance(verdict, Resend) and not report.unknown_seen:
                    report.token = new_token()  # definitely not applied, and re-sent otherwise: a fresh token
            else:
                if failure.kind is Failure.UNKNOWN:
                    report.unknown_seen = True
                    verdict = on_unknown(report, failure) if on_unknown is not None else None
                else:
                    verdict = None
                if token is True and failure.kind is not Failure.UNKNOWN and not report.unknown_seen:
                    report.token = new_token()  # definitely not applied: a fresh token
            if isinstance(verdict, Stop):
                report.stopped, report.value = True, verdict.value
                return report
            if isinstance(verdict, Resend):
                if verdict.params is not None:
                    report.params = {**verdict.params, "ReturnConsumedCapacity": "TOTAL"} if measured else dict(verdict.params)
                refresh = verdict.refresh
                if rounds is not None and failure.kind is Failure.CONDITION:
                    if round_ >= rounds.max_attempts:
                        return report
                    rounds.backoff(round_)
                    round_, attempt = round_ + 1, 0
                    continue
            if attempt >= policy.max_attempts:
                unreachable = configuration.unreachable(operation, failure, report.attempts)
                if unreachable is not None:
                    raise unreachable from exc
                return report
            policy.backoff(attempt, throttled=failure.kind is Failure.THROTTLED)
            continue
        configuration.note(operation, None, None)
        report.capacity.add_response(response, write=write)
        report.outcome, report.response, report.failure = Outcome.APPLIED, response, None
        return report


def _service(operation: Operation) -> str:
    model = getattr(getattr(getattr(operation, "__self__", None), "meta", None), "service_model", None)
    return getattr(model, "service_name", "dynamodb")


def _send(operation: Operation, params: Params) -> Response:
    """One attempt, marked as the engine's (hooks run outside the mark: their calls go through ``run`` too)."""
    with engine_call():
        return operation(**params)


# -- the shapes every caller needs ---------------------------------------------------------------
def read(operation: Operation, policy: RetryPolicy, capacity: Capacity | None = None, **params: object) -> Response:
    """A read (GetItem, Query, TransactGetItems...) retried on throttling, conflicts and 5xx;
    [`ContentionError`][counters.core.errors.ContentionError] (503, retryable) when the budget runs out."""
    report = run(operation, params, policy=policy, capacity=capacity)
    if report.response is None:
        code = report.failure.code if report.failure else "unknown"
        raise ContentionError(f"DynamoDB is busy ({code}); retry the request", cause_code=code)
    return report.response


BATCH_GET = 100
"""BatchGetItem's most keys in one call."""


class KeyBatch(Protocol):
    """A BatchGetItem as the store shapes it ([`BatchGet`][counters.store.batch.BatchGet]): its
    request for some keys, and a response's (found items, unprocessed keys)."""

    def params(self, keys: Sequence[Item]) -> Params:
        """The BatchGetItem parameters for ``keys`` (DynamoDB JSON, at most ``BATCH_GET``)."""
        ...

    def answer(self, response: Mapping[str, object]) -> tuple[list[Item], list[Item]]:
        """(the items found, the keys left unprocessed) of one response."""
        ...


def read_keys(
    operation: Operation,
    batch: KeyBatch,
    keys: Sequence[Item],
    policy: RetryPolicy,
    capacity: Capacity | None = None,
) -> list[Item]:
    """Every item found under ``keys`` (as DynamoDB returns them, in no order): ``batch``'s
    BatchGetItem of ``BATCH_GET`` keys a call, each call a [`read`][counters.core.engine.read].
    The keys DynamoDB leaves unprocessed are asked again after a backoff, within
    ``policy.max_attempts`` calls; still left then: [`ContentionError`][counters.core.errors.ContentionError] (503, retryable), never
    an absence."""
    found: list[Item] = []
    for at in range(0, len(keys), BATCH_GET):
        pending = list(keys[at : at + BATCH_GET])
        for attempt in range(1, policy.max_attempts + 1):
            got, pending = batch.answer(read(operation, policy, capacity, **batch.params(pending)))
            found += got
            if not pending:
                break
            policy.backoff(attempt, throttled=True)  # keys left unprocessed: the table's capacity ran out
        else:
            raise ContentionError("DynamoDB left keys of a BatchGetItem unprocessed; retry the request", cause_code="UnprocessedKeys")
    return found


def transact(
    items: list[Params],
    *,
    policy: RetryPolicy,
    dynamodb: DynamoDBClient | None = None,
    token: str | None = None,
    capacity: Capacity | None = None,
) -> Report:
    """``items`` as one TransactWriteItems under the token rule (``token`` pins it)."""
    ddb = dynamodb or client()
    return run(ddb.transact_write_items, {"TransactItems": items}, policy=policy, capacity=capacity, write=True, token=token or True)
