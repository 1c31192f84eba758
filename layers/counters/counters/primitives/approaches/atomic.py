"""Approach 1, atomic counter: one ``UpdateItem`` with ``ADD``, the threshold as a condition.

Cheapest (1 WCU per write of an item up to 1 KB) and the least accurate: DynamoDB keeps no
memory of who wrote, so nothing can tell a committed write from a lost one.

Guarantees
    * Thresholds: always held. The condition ``available >= q`` (or ``reserved >= q``) is
      checked and applied atomically, so concurrent writers can never breach it.
    * Ambiguous failure (5xx/timeout after sending): the outcome is unknown and cannot be
      learned. The caller's ``policy`` decides:
      ``under`` - never re-send; the call returns ``ambiguous`` (reason ``not_retried``).
      Each call applies **at most once**: the counter never over-counts, it may under-count
      (an ambiguous call that did not commit is lost).
      ``over`` - re-send until a definite answer. A call that returns ``applied`` applied
      **at least once**: the counter never under-counts a confirmed call, it may over-count
      (reason ``retried_after_unknown`` says it may have applied twice). If the re-send is
      rejected by the threshold, or the budget runs out, the call is ``ambiguous``.
    * Definite failures (throttling, conflict, not sent): retried with backoff; exact.
    * SDK retries: must be **off**. A botocore retry re-sends the ADD after a lost reply and
      applies it twice without anyone knowing (seed 02, "Working with the AWS SDK"); the
      constructor refuses a client whose retry budget is not 1 attempt
      (:data:`counters.core.client.CLIENT_CONFIG` has ``total_max_attempts=1``).
    * Client retries / redelivered requests: **not recognised**. The token is ignored; a
      redelivery applies again under either policy (``exact = False``).
    * Write sharding: supported. A split over shards is one transaction with a fresh
      ClientRequestToken re-sent after an unknown outcome, so the split itself is exact.
"""

from __future__ import annotations

from typing import Any, Literal

from counters.core.client import client
from counters.core.engine import Report, Stop, run, transact
from counters.core.items import to_item
from counters.core.outcome import Outcome, Result
from counters.primitives.approaches import (
    ADD_DELTA,
    Approach,
    Fields,
    Key,
    delta_values,
    guard,
    names,
    rejection,
    result,
)

Policy = Literal["over", "under"]


def sdk_attempts(ddb: Any) -> int | None:
    """The botocore retry budget of a client (``total_max_attempts``), when it says."""
    retries = getattr(getattr(ddb, "meta", None), "config", None)
    retries = getattr(retries, "retries", None) or {}
    return retries.get("total_max_attempts")


def assert_sdk_retries_off(ddb: Any) -> None:
    attempts = sdk_attempts(ddb)
    if attempts is not None and attempts != 1:
        raise ValueError(
            f"atomic counters need SDK retries off (total_max_attempts=1), this client has {attempts}: a botocore retry would apply twice"
        )


class Atomic(Approach):
    name = "atomic"
    exact = False
    needs_token = False
    shardable = True

    def __init__(self, table_name: str, *, policy: Policy = "under", **kwargs: Any) -> None:
        super().__init__(table_name, **kwargs)
        if policy not in ("over", "under"):
            raise ValueError("policy is 'over' (retry after an unknown outcome) or 'under' (do not)")
        self.policy: Policy = policy
        assert_sdk_retries_off(self._dynamodb or client())

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> Result:
        params = {
            "TableName": self.table_name,
            "Key": to_item(key),
            "UpdateExpression": ADD_DELTA,
            "ConditionExpression": guard(delta, bounded),
            "ExpressionAttributeNames": names(),
            "ExpressionAttributeValues": to_item(delta_values(delta)),
            "ReturnValues": "UPDATED_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

        def unknown(report: Report, _failure: object) -> Stop | None:
            # under: never re-send (at most once); over: re-send until a definite answer
            return Stop("not_retried") if self.policy == "under" else None

        report = run(self.dynamodb.update_item, params, policy=self.retry, write=True, on_unknown=unknown)
        capacity, attempts = report.capacity, report.attempts
        if report.outcome is Outcome.APPLIED:
            return result(Outcome.APPLIED, capacity, attempts, "retried_after_unknown" if report.unknown_seen else None)
        if report.stopped:
            return result(Outcome.AMBIGUOUS, capacity, attempts, report.value)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            reason, value = rejection(report.failure.old_item(0), delta)
            if report.unknown_seen:  # an earlier send may have committed: cannot say "not applied"
                return result(Outcome.AMBIGUOUS, capacity, attempts, "unknown_then_rejected", **value)
            return result(Outcome.REJECTED, capacity, attempts, reason, **value)
        if report.unknown_seen:
            return result(Outcome.AMBIGUOUS, capacity, attempts, "budget_exhausted")
        return result(Outcome.CONTENTION, capacity, attempts)

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> Result:
        items = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": to_item(key),
                    "UpdateExpression": ADD_DELTA,
                    "ConditionExpression": guard(part, True),
                    "ExpressionAttributeNames": names(),
                    "ExpressionAttributeValues": to_item(delta_values(part)),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            for key, part in parts
        ]
        report = transact(items, policy=self.retry, dynamodb=self._dynamodb)
        if report.outcome is Outcome.REJECTED:
            return result(Outcome.REJECTED, report.capacity, report.attempts, "threshold")
        if report.outcome is Outcome.CONTENTION and report.unknown_seen:
            # a send with an unknown outcome may have committed, and nothing remembers it
            return result(Outcome.AMBIGUOUS, report.capacity, report.attempts, "budget_exhausted")
        return result(report.outcome, report.capacity, report.attempts)


APPROACH = Atomic
