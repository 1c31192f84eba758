"""Failure classification and the transaction runner's token policy (no network)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ReadTimeoutError,
    ResponseStreamingError,
    SSLError,
)

from counters.core.engine import transact
from counters.core.failures import Failure, RetryPolicy, classify
from counters.core.outcome import Capacity, Outcome


def client_error(code: str, status: int = 400, reasons: list[dict[str, Any]] | None = None, **extra: Any) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}, **extra}
    if reasons is not None:
        response["CancellationReasons"] = reasons
    return ClientError(response, "TransactWriteItems")


@pytest.mark.parametrize(
    ("codes", "kind"),
    [
        (["None", "ConditionalCheckFailed"], Failure.CONDITION),
        (["ConditionalCheckFailed", "TransactionConflict"], Failure.CONFLICT),  # transient wins: re-evaluated on retry
        (["ThrottlingError", "None"], Failure.THROTTLED),
        (["ProvisionedThroughputExceeded"], Failure.THROTTLED),
    ],
)
def test_cancellations_are_classified_by_reason_codes(codes: list[str], kind: Failure) -> None:
    failure = classify(client_error("TransactionCanceledException", reasons=[{"Code": c} for c in codes]))
    assert failure is not None and failure.kind is kind


def test_classification_never_reads_the_message() -> None:
    # A message that *says* conflict, with reasons that say condition: the codes decide.
    exc = ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "TransactionConflict TransactionConflict"},
            "CancellationReasons": [{"Code": "ConditionalCheckFailed"}],
        },
        "TransactWriteItems",
    )
    assert classify(exc).kind is Failure.CONDITION  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (client_error("ConditionalCheckFailedException"), Failure.CONDITION),
        (client_error("TransactionConflictException"), Failure.CONFLICT),
        (client_error("ReplicatedWriteConflictException"), Failure.CONFLICT),  # MRSC: not applied, retryable
        (client_error("ProvisionedThroughputExceededException"), Failure.THROTTLED),
        (client_error("ThrottlingException"), Failure.THROTTLED),
        (client_error("RequestLimitExceeded"), Failure.THROTTLED),
        (client_error("InternalServerError", 500), Failure.UNKNOWN),
        (client_error("ServiceUnavailable", 503), Failure.UNKNOWN),
        (client_error("TransactionInProgressException"), Failure.UNKNOWN),
        # on the wire after the request may have been sent: it may have applied
        (ReadTimeoutError(endpoint_url="http://x"), Failure.UNKNOWN),
        (ConnectionClosedError(endpoint_url="http://x"), Failure.UNKNOWN),
        (HTTPClientError(error="connection reset by peer"), Failure.UNKNOWN),
        (ResponseStreamingError(error="incomplete read"), Failure.UNKNOWN),
        (SSLError(endpoint_url="http://x", error="bad record mac"), Failure.UNKNOWN),
        # the connection could not be opened: nothing was sent
        (ConnectTimeoutError(endpoint_url="http://x"), Failure.NOT_SENT),
        (EndpointConnectionError(endpoint_url="http://x"), Failure.NOT_SENT),
    ],
)
def test_plain_errors(exc: Exception, kind: Failure) -> None:
    assert classify(exc).kind is kind  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "code", ["ValidationException", "ResourceNotFoundException", "IdempotentParameterMismatchException", "AccessDeniedException"]
)
def test_bugs_and_config_errors_are_not_ours_to_retry(code: str) -> None:
    assert classify(client_error(code)) is None
    assert classify(client_error("TransactionCanceledException", reasons=[{"Code": "ValidationError"}])) is None


class ScriptedClient:
    """Answers transact_write_items from a script; records every call's token."""

    def __init__(self, script: list[Exception | None]) -> None:
        self.script = list(script)
        self.tokens: list[str] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.tokens.append(kwargs["ClientRequestToken"])
        assert kwargs["ReturnConsumedCapacity"] == "TOTAL"
        step = self.script.pop(0)
        if step is not None:
            raise step
        return {"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}]}


def no_sleep() -> RetryPolicy:
    slept: list[float] = []
    policy = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.04, sleep=slept.append)
    policy.slept = slept  # type: ignore[attr-defined]
    return policy


CONFLICT = client_error("TransactionCanceledException", reasons=[{"Code": "TransactionConflict"}])
UNKNOWN = client_error("InternalServerError", 500)
CONDITION = client_error("TransactionCanceledException", reasons=[{"Code": "ConditionalCheckFailed"}])


def test_unknown_outcome_is_retried_with_the_same_token() -> None:
    ddb = ScriptedClient([UNKNOWN, UNKNOWN, None])
    report = transact([{}], policy=no_sleep(), dynamodb=ddb)
    assert report.outcome is Outcome.APPLIED and report.unknown_seen
    assert len(set(ddb.tokens)) == 1 and len(ddb.tokens) == 3


def test_a_read_timeout_is_an_unknown_outcome_resent_with_the_same_token_and_never_a_lost_write() -> None:
    """A read timeout comes after the request was sent: DynamoDB may have committed it. The
    engine re-sends the same ClientRequestToken (a committed first attempt is then replayed, not
    applied again), asks the caller's "was it us?" hook, and when the budget runs out answers
    CONTENTION with ``unknown_seen`` (the caller answers "retry the same request": 503, or 202 for
    what can be deferred), never REJECTED or an exception that would read as "not applied"."""
    from counters.core.engine import run

    timeout = ReadTimeoutError(endpoint_url="http://x")
    ddb = ScriptedClient([timeout, ConnectionClosedError(endpoint_url="http://x"), None])
    report = transact([{}], policy=no_sleep(), dynamodb=ddb)
    assert (report.outcome, report.unknown_seen, len(ddb.tokens), len(set(ddb.tokens))) == (Outcome.APPLIED, True, 3, 1)
    asked: list[str] = []
    ddb = ScriptedClient([timeout] * 4)
    report = run(
        ddb.transact_write_items,
        {"TransactItems": [{}]},
        policy=no_sleep(),
        token=True,
        on_unknown=lambda r, f: asked.append(f.code),  # type: ignore[func-returns-value]
    )
    assert (report.outcome, report.unknown_seen, report.failure.kind if report.failure else None) == (
        Outcome.CONTENTION,
        True,
        Failure.UNKNOWN,
    )
    assert asked == ["ReadTimeoutError"] * 4 and len(set(ddb.tokens)) == 1


def test_definite_failures_draw_a_new_token() -> None:
    ddb = ScriptedClient([CONFLICT, CONFLICT, None])
    report = transact([{}], policy=no_sleep(), dynamodb=ddb)
    assert report.outcome is Outcome.APPLIED and not report.unknown_seen
    assert len(set(ddb.tokens)) == 3


def test_pinned_token_is_kept_through_every_failure() -> None:
    ddb = ScriptedClient([CONFLICT, UNKNOWN, None])
    transact([{}], policy=no_sleep(), dynamodb=ddb, token="pinned")
    assert ddb.tokens == ["pinned"] * 3


def test_condition_failure_stops_at_once_and_budget_bounds_retries() -> None:
    ddb = ScriptedClient([CONFLICT, CONDITION])
    report = transact([{}], policy=no_sleep(), dynamodb=ddb)
    assert (report.outcome, report.attempts) == (Outcome.REJECTED, 2)
    policy = no_sleep()
    ddb = ScriptedClient([CONFLICT] * 4)
    report = transact([{}], policy=policy, dynamodb=ddb)
    assert (report.outcome, report.attempts) == (Outcome.CONTENTION, 4)
    assert len(policy.slept) == 3 and all(0 <= s <= 0.04 for s in policy.slept)  # type: ignore[attr-defined]


def test_unrecognised_errors_are_re_raised() -> None:
    ddb = ScriptedClient([client_error("ValidationException")])
    with pytest.raises(ClientError):
        transact([{}], policy=no_sleep(), dynamodb=ddb)


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    slept: list[float] = []
    policy = RetryPolicy(base_delay=0.1, max_delay=0.5, sleep=slept.append)
    policy.rng.seed(1)
    for attempt in range(1, 8):
        policy.backoff(attempt)
    caps = [min(0.5, 0.1 * 2 ** (a - 1)) for a in range(1, 8)]
    assert all(0 <= s <= cap for s, cap in zip(slept, caps, strict=True))
    assert len(set(slept)) == len(slept)  # jittered, not constant


def test_after_a_throttle_the_backoff_waits_at_least_half_its_ceiling() -> None:
    """Equal jitter after a throttle (the AWS SDK for Java's DynamoDB default): a throttled key is
    never asked again within a few ms, as full jitter would (0 ms at worst)."""
    slept: list[float] = []
    policy = RetryPolicy(base_delay=0.02, max_delay=0.5, throttle_base_delay=0.25, sleep=slept.append)
    policy.rng.seed(1)
    for attempt in range(1, 6):
        policy.backoff(attempt, throttled=True)
    caps = [min(0.5, 0.25 * 2 ** (a - 1)) for a in range(1, 6)]
    assert all(cap / 2 <= s <= cap for s, cap in zip(slept, caps, strict=True)), slept
    assert len(set(slept)) == len(slept)  # still jittered


def test_capacity_folds_single_and_transaction_shapes() -> None:
    cap = Capacity()
    cap.add_response({"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}}, write=False)
    cap.add_response({"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}]}, write=True)
    cap.add_response(None, write=True)
    assert (cap.read_units, cap.write_units, cap.calls) == (0.5, 4.0, 3)


class FlakyReads:
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        assert kwargs["ReturnConsumedCapacity"] == "TOTAL"
        if self.calls <= self.failures:
            raise client_error("ProvisionedThroughputExceededException")
        return {"Item": {"PK": {"S": "x"}}, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}}


def test_reads_are_retried_on_throttling_then_surface_as_contention() -> None:
    from counters.core.engine import read
    from counters.core.errors import ContentionError

    ddb, cap = FlakyReads(failures=2), Capacity()
    assert read(ddb.get_item, no_sleep(), cap, TableName="t", Key={})["Item"] == {"PK": {"S": "x"}}
    assert (ddb.calls, cap.read_units) == (3, 0.5)
    with pytest.raises(ContentionError):
        read(FlakyReads(failures=10).get_item, no_sleep(), TableName="t", Key={})
