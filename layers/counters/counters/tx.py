"""TransactWriteItems with classified, bounded retries and a deliberate token policy.

Token policy
    * After an **unknown** outcome (5xx, timeout) the next attempt re-sends the **same**
      ClientRequestToken: if the first attempt committed, DynamoDB answers the replay with
      success and changes nothing (within its 10-minute window), so the retry can never
      apply twice.
    * After a **definite** non-application (conflict, throttle, not sent) a new token is drawn,
      unless the caller pinned it or an earlier attempt's outcome was unknown (then only that
      token can recognise its commit, and it is kept to the end).
    * ``token=`` pins a caller-derived token for every attempt (the crt approach, SQS replays).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from counters.dynamo import DYNAMO_ERRORS, Classified, Failure, RetryPolicy, classify, client, new_token
from counters.outcome import Capacity, Outcome


@dataclass
class TxReport:
    """How a transaction ended after retries."""

    outcome: Outcome
    """APPLIED, REJECTED (a condition failed: see ``failure``) or CONTENTION."""
    capacity: Capacity = field(default_factory=Capacity)
    attempts: int = 0
    failure: Classified | None = None
    """The last classified failure (for REJECTED: which conditions failed)."""
    unknown_seen: bool = False
    """An attempt ended with an unknown outcome (so APPLIED may be a replay of it)."""
    token: str = ""


def transact(
    items: list[dict[str, Any]],
    *,
    policy: RetryPolicy,
    dynamodb: Any = None,
    token: str | None = None,
) -> TxReport:
    """Run ``items`` as one transaction, retrying transient failures within ``policy``."""
    ddb = dynamodb or client()
    pinned = token is not None
    report = TxReport(Outcome.CONTENTION, token=token or new_token())

    def send() -> dict[str, Any]:
        return ddb.transact_write_items(TransactItems=items, ClientRequestToken=report.token, ReturnConsumedCapacity="TOTAL")

    def after_transient(failure: Classified) -> None:
        # An unknown outcome keeps the token: the replay must be recognised. Once an attempt's
        # outcome was unknown, the token is the only thing that can recognise its commit: a
        # later conflict/throttle says nothing about it, so the token stays (a cancelled
        # transaction's token may be re-sent: it executes).
        if failure.kind is not Failure.UNKNOWN and not pinned and not report.unknown_seen:
            report.token = new_token()

    retry_write(send, report, policy, after_transient)
    return report


def retry_write(
    send: Callable[[], dict[str, Any]],
    report: Any,
    policy: RetryPolicy,
    after_transient: Callable[[Classified], None] | None = None,
) -> dict[str, Any] | None:
    """The one retry loop of the layer's writes: call ``send`` until it applies, a condition
    rejects it, or ``policy`` runs out; fills ``report`` (outcome, capacity, attempts, failure,
    unknown_seen) and returns the successful response (``None`` otherwise).
    ``after_transient`` sees each transient failure before the backoff (the token policy)."""
    for attempt in range(1, policy.max_attempts + 1):
        report.attempts = attempt
        try:
            response = send()
        except DYNAMO_ERRORS as exc:
            report.capacity.add_response(getattr(exc, "response", None), write=True)
            failure = classify(exc)
            if failure is None:
                raise
            report.failure = failure
            if failure.kind is Failure.CONDITION:
                report.outcome = Outcome.REJECTED
                return None
            if failure.kind is Failure.UNKNOWN:
                report.unknown_seen = True
            if after_transient is not None:
                after_transient(failure)
            if attempt < policy.max_attempts:
                policy.backoff(attempt)
            continue
        report.capacity.add_response(response, write=True)
        report.outcome = Outcome.APPLIED
        report.failure = None
        return response
    return None
