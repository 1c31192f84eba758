"""The retry engine: one attempt loop, hooks, and the guard that keeps every call inside it."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from counters.core import client as dynamo
from counters.core import engine
from counters.core.engine import OutsideEngine, Resend, Stop, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome

NO_SLEEP = RetryPolicy(max_attempts=4, sleep=lambda _s: None)


def error(code: str, status: int = 400, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}, **extra}, "Op")


class Script:
    """An operation that fails with each scripted error in turn, then answers."""

    def __init__(self, *errors: ClientError) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.errors:
            raise self.errors.pop(0)
        return {"ok": True}


def test_transient_failures_are_retried_within_the_budget() -> None:
    op = Script(error("ThrottlingException"), error("InternalServerError", 500))
    report = run(op, {"TableName": "t"}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts, report.unknown_seen) == (Outcome.APPLIED, 3, True)
    op = Script(*[error("ThrottlingException")] * 4)
    report = run(op, {}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts, report.response) == (Outcome.CONTENTION, 4, None)


def test_a_throttle_is_backed_off_as_a_throttle_and_anything_else_is_not() -> None:
    """The engine tells the policy which attempts were throttled (their delay has a floor)."""
    calls: list[bool] = []

    class Recording(RetryPolicy):
        def backoff(self, attempt: int, *, throttled: bool = False) -> float:
            calls.append(throttled)
            return 0.0

    op = Script(error("ProvisionedThroughputExceededException"), error("TransactionConflictException"), error("InternalServerError", 500))
    assert run(op, {}, policy=Recording(max_attempts=4)).outcome is Outcome.APPLIED
    assert calls == [True, False, False]


def test_only_retries_after_a_conflict_or_a_throttle_are_contended() -> None:
    """``contended_retries``: the attempts that follow one refused by a conflict or a throttle
    (what promotes a post to hot); a condition re-planned by a hook, an unknown outcome, a
    failure with no attempt after it, are not."""
    conflict = error("TransactionConflictException")
    op = Script(conflict, error("ConditionalCheckFailedException"), error("InternalServerError", 500), error("ThrottlingException"))
    report = run(op, {}, policy=RetryPolicy(max_attempts=5, sleep=lambda _s: None), on_condition=lambda r, f: Resend())
    assert (report.outcome, report.attempts, report.contended_retries) == (Outcome.APPLIED, 5, 2)
    op = Script(error("ConditionalCheckFailedException"), error("InternalServerError", 500), conflict)
    report = run(op, {}, policy=RetryPolicy(max_attempts=3, sleep=lambda _s: None), on_condition=lambda r, f: Resend())
    assert (report.outcome, report.attempts, report.contended_retries) == (Outcome.CONTENTION, 3, 0)


def test_a_condition_failure_is_final_unless_a_hook_says_otherwise() -> None:
    op = Script(error("ConditionalCheckFailedException"))
    assert run(op, {}, policy=NO_SLEEP).outcome is Outcome.REJECTED
    op = Script(error("ConditionalCheckFailedException"), error("ConditionalCheckFailedException"))
    report = run(op, {"v": 1}, policy=NO_SLEEP, on_condition=lambda r, f: Resend({"v": r.attempts + 1}))
    assert report.outcome is Outcome.APPLIED and [c["v"] for c in op.calls] == [1, 2, 3]
    op = Script(error("InternalServerError", 500))
    report = run(op, {}, policy=NO_SLEEP, on_unknown=lambda r, f: Stop("verdict"))
    assert (report.stopped, report.value, len(op.calls)) == (True, "verdict", 1)


def test_a_refresh_plans_the_next_attempt_after_the_backoff_and_only_if_there_is_one() -> None:
    events: list[str] = []
    policy = RetryPolicy(max_attempts=3, sleep=lambda _s: events.append("sleep"))

    def refresh(v: int) -> Resend:
        events.append(f"refresh {v}")
        return Resend({"v": v})

    op = Script(*[error("ConditionalCheckFailedException")] * 3)
    report = run(op, {"v": 1}, policy=policy, on_condition=lambda r, f: Resend(refresh=lambda: refresh(r.attempts + 1)))
    assert [c["v"] for c in op.calls] == [1, 2, 3] and report.outcome is Outcome.CONTENTION
    assert events == ["sleep", "refresh 2", "sleep", "refresh 3"]  # after each backoff; none once the budget is spent
    op = Script(error("ConditionalCheckFailedException"))
    report = run(op, {}, policy=NO_SLEEP, on_condition=lambda r, f: Resend(refresh=lambda: Stop("seen after the backoff")))
    assert (report.stopped, report.value, len(op.calls)) == (True, "seen after the backoff", 1)


def test_the_token_rule_same_after_unknown_fresh_after_definite() -> None:
    op = Script(error("ThrottlingException"), error("InternalServerError", 500), error("ThrottlingException"))
    run(op, {}, policy=NO_SLEEP, token=True)
    tokens = [c["ClientRequestToken"] for c in op.calls]
    assert tokens[0] != tokens[1] and tokens[1] == tokens[2] == tokens[3]  # kept once an outcome was unknown
    op = Script(error("ThrottlingException"))
    run(op, {}, policy=NO_SLEEP, token="pinned")
    assert [c["ClientRequestToken"] for c in op.calls] == ["pinned", "pinned"]


def test_an_unrecognised_error_is_raised_untouched() -> None:
    with pytest.raises(ClientError, match="ValidationException"):
        run(Script(error("ValidationException")), {}, policy=NO_SLEEP)


@mock_aws
def test_the_guard_refuses_a_call_made_outside_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs with TALLY_ENGINE_GUARD=1: a bare call on the layer's client has no retry, so it fails."""
    monkeypatch.setenv(engine.GUARD_ENV, "1")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):  # moto, not a DynamoDB Local an earlier test started
        monkeypatch.delenv(name, raising=False)
    dynamo.reset_client()
    try:
        ddb = dynamo.client()
        boto3.client("dynamodb").create_table(
            TableName="guarded",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        with pytest.raises(OutsideEngine, match="GetItem was called outside the retry engine"):
            ddb.get_item(TableName="guarded", Key={"PK": {"S": "x"}})
        assert engine.read(ddb.get_item, NO_SLEEP, TableName="guarded", Key={"PK": {"S": "x"}}).get("Item") is None
    finally:
        dynamo.reset_client()


def test_a_replicated_write_conflict_is_retried_like_a_transaction_conflict() -> None:
    """MRSC global tables: ReplicatedWriteConflictException means "not applied, retry" (the
    service model marks it retryable), so the engine backs off and sends again; the write
    applies once, and the retries count as contended."""
    op = Script(error("ReplicatedWriteConflictException"), error("ReplicatedWriteConflictException"))
    report = run(op, {"TableName": "t"}, policy=NO_SLEEP)
    assert (report.outcome, report.attempts, report.unknown_seen, report.contended_retries) == (Outcome.APPLIED, 3, False, 2)
    report = run(Script(*[error("ReplicatedWriteConflictException")] * 4), {}, policy=NO_SLEEP)
    assert report.outcome is Outcome.CONTENTION and report.failure is not None and report.failure.code == "ReplicatedWriteConflictException"


class Timed(Script):
    """A :class:`Script` on a clock of the test's own (``now``): each call costs 1 s, and records when it started."""

    def __init__(self, *errors: ClientError) -> None:
        super().__init__(*errors)
        self.now, self.started = 0.0, list[float]()

    def clock(self) -> float:
        return self.now

    def __call__(self, **params: Any) -> dict[str, Any]:
        self.started.append(self.now)
        self.now += 1.0
        return super().__call__(**params)


def test_no_attempt_starts_at_or_after_the_deadline() -> None:
    """Inside ``engine.deadline``, every attempt is checked: a retry whose backoff ran past the
    deadline, or a first call made after it, is not sent (DeadlineReached, a retryable 503)."""
    from counters.core.errors import ContentionError, DeadlineReached

    op = Timed(*[error("ThrottlingException")] * 5)
    policy = RetryPolicy(max_attempts=6, sleep=lambda s: setattr(op, "now", op.now + 0.5))
    with engine.deadline(3.0, op.clock), pytest.raises(DeadlineReached) as refused:
        run(op, {}, policy=policy)
    assert op.started == [0.0, 1.5] and op.now == 3.0  # the third attempt would start at 3.0: not sent
    assert isinstance(refused.value, ContentionError) and refused.value.cause_code == "ThrottlingException"
    with engine.deadline(3.0, op.clock), pytest.raises(DeadlineReached):
        run(op, {}, policy=policy)  # already past it: nothing is sent
    assert op.started == [0.0, 1.5]
    with engine.deadline(None, op.clock):  # no deadline: the budget decides
        assert run(op, {}, policy=policy).outcome is Outcome.APPLIED
