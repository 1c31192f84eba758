"""Approach 1, atomic counter: one ``UpdateItem`` with ``ADD``, the threshold as a condition.

Cheapest (1 WCU per write of an item up to 1 KB) and the least accurate: DynamoDB keeps no
memory of who wrote, so nothing can tell a committed write from a lost one.

Guarantees:
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
      ([`counters.core.client.CLIENT_CONFIG`][counters.core.client.CLIENT_CONFIG] has ``total_max_attempts=1``).
    * Client retries / redelivered requests: **not recognised**. The token is ignored; a
      redelivery applies again under either policy (``exact = False``).
    * Write sharding: supported. A split over shards is one transaction with a fresh
      ClientRequestToken re-sent after an unknown outcome, so the split itself is exact.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from counters.core.engine import Report, Stop
from counters.core.failures import Classified
from counters.core.outcome import Outcome
from counters.primitives.approaches import Approach, Reason, TakeResult, rejection, result
from counters.store.resources import ResourceStore, found
from counters.store.resources_counters import Fields, Key, adjust

Policy = Literal["over", "under"]


def sdk_attempts(ddb: object) -> int | None:
    """The botocore retry budget of a client (``total_max_attempts``), when it says."""
    retries = getattr(getattr(ddb, "meta", None), "config", None)
    retries = getattr(retries, "retries", None) or {}
    attempts: int | None = retries.get("total_max_attempts")
    return attempts


def assert_sdk_retries_off(ddb: object) -> None:
    """``ValueError`` unless the client makes one attempt per call: a botocore retry of an ``ADD`` would apply twice."""
    attempts = sdk_attempts(ddb)
    if attempts is not None and attempts != 1:
        raise ValueError(
            f"atomic counters need SDK retries off (total_max_attempts=1), this client has {attempts}: a botocore retry would apply twice"
        )


class Atomic(Approach):
    """Approach 1: one ``UpdateItem`` with ``ADD``; see the module."""

    name = "atomic"
    shardable = True
    traits = ("no", "no (policy ``over``/``under``)")

    def __init__(self, store: ResourceStore, *, policy: Policy = "under") -> None:
        super().__init__(store)
        if policy not in ("over", "under"):
            raise ValueError("policy is 'over' (retry after an unknown outcome) or 'under' (do not)")
        self.policy: Policy = policy
        assert_sdk_retries_off(store.dynamodb)

    @classmethod
    def promise(cls, **options: Any) -> str:
        """Its policy: ``under`` (at most once) or ``over`` (at least once)."""
        return str(options.get("policy", "under"))

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """One conditional ``ADD``; an unknown outcome is re-sent or not as ``policy`` says (``under``: never)."""

        def unknown(report: Report, _failure: Classified) -> Stop | None:
            # under: never re-send (at most once); over: re-send until a definite answer
            return Stop(Reason.NOT_RETRIED) if self.policy == "under" else None

        report = self.store.write_counter(adjust(self.table_name, key, delta, bounded).returning("UPDATED_NEW"), on_unknown=unknown)
        capacity, attempts = report.capacity, report.attempts
        if report.outcome is Outcome.APPLIED:
            return result(Outcome.APPLIED, capacity, attempts, Reason.RETRIED_AFTER_UNKNOWN if report.unknown_seen else None)
        if report.stopped:
            return result(Outcome.AMBIGUOUS, capacity, attempts, report.value if isinstance(report.value, StrEnum) else None)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            reason, facts = rejection(found(report.failure))
            if report.unknown_seen:  # an earlier send may have committed: cannot say "not applied"
                return result(Outcome.AMBIGUOUS, capacity, attempts, Reason.UNKNOWN_THEN_REJECTED, facts)
            return result(Outcome.REJECTED, capacity, attempts, reason, facts)
        if report.unknown_seen:
            return result(Outcome.AMBIGUOUS, capacity, attempts, Reason.BUDGET_EXHAUSTED)
        return result(Outcome.CONTENTION, capacity, attempts)

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> TakeResult:
        """The parts' ``ADD`` s in one transaction; an unknown outcome is AMBIGUOUS (nothing remembers it)."""
        taken = self.store.take([adjust(self.table_name, key, part) for key, part in parts])
        if taken.outcome is Outcome.REJECTED:
            return result(Outcome.REJECTED, taken.capacity, taken.attempts, Reason.THRESHOLD)
        if taken.outcome is Outcome.CONTENTION and taken.unknown_seen:
            # a send with an unknown outcome may have committed, and nothing remembers it
            return result(Outcome.AMBIGUOUS, taken.capacity, taken.attempts, Reason.BUDGET_EXHAUSTED)
        return result(taken.outcome, taken.capacity, taken.attempts)


APPROACH = Atomic
