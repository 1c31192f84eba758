"""UpdateItem with classified, bounded retries: the single-item sibling of :func:`counters.tx.transact`.

A single-item write carries no ClientRequestToken, so the retry after an **unknown**
outcome (5xx, timeout) is the same request again and DynamoDB cannot recognise it. Use it
only for updates whose re-application is harmless *by construction*:

* a conditional update that a replay fails (the monotonic pointer: the replay finds the
  value already there and its condition rejects it: see :mod:`counters.pointer`);
* an update whose double application is an accepted cost (a ``fast`` sequence's ``ADD``
  burns one more value: a gap, never a duplicate: see :mod:`counters.sequence`).

The retry loop is :func:`counters.tx.retry_write` (the one transactions use, without the
token policy); backoff is the caller's :class:`~counters.dynamo.RetryPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from counters.dynamo import Classified, RetryPolicy, client
from counters.outcome import Capacity, Outcome
from counters.tx import retry_write


@dataclass
class WriteReport:
    """How an UpdateItem ended after retries."""

    outcome: Outcome
    """APPLIED, REJECTED (the condition failed: ``failure.old_item(0)`` is ALL_OLD) or CONTENTION."""
    attributes: dict[str, Any] | None = None
    """``Attributes`` of the successful response (raw DynamoDB JSON), per ``ReturnValues``."""
    capacity: Capacity = field(default_factory=Capacity)
    attempts: int = 0
    failure: Classified | None = None
    unknown_seen: bool = False
    """An attempt ended with an unknown outcome: it may have applied before the one reported."""


def update_item(params: dict[str, Any], *, policy: RetryPolicy, dynamodb: Any = None) -> WriteReport:
    """Run one UpdateItem (``params`` without ReturnConsumedCapacity), retrying transient failures."""
    ddb = dynamodb or client()
    report = WriteReport(Outcome.CONTENTION)
    response = retry_write(lambda: ddb.update_item(**params, ReturnConsumedCapacity="TOTAL"), report, policy)
    if response is not None:
        report.attributes = response.get("Attributes")
    return report
