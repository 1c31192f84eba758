"""What a failed call tells about whether it applied, and how long to wait before the next attempt.

Every failure becomes one [`Failure`][counters.core.failures.Failure] kind. Transaction cancellations are classified by
``CancellationReasons[i].Code``, never by message text. [`RetryPolicy`][counters.core.failures.RetryPolicy] is the backoff
(capped exponential: full jitter, equal jitter after a throttle) that [`counters.core.engine.run`][counters.core.engine.run] applies.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from enum import StrEnum
from typing import Any, NamedTuple, TypedDict

from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from counters.core import items
from counters.core.records import dataclass


class Failure(StrEnum):
    """What a failed call tells us about whether it applied."""

    CONDITION = "condition"
    """A condition failed: definitely not applied."""
    CONFLICT = "conflict"
    """TransactionConflict, or (MRSC global tables) ReplicatedWriteConflict: not applied; retry."""
    THROTTLED = "throttled"
    """Throttling / capacity: not applied; retry with backoff."""
    NOT_SENT = "not_sent"
    """Could not connect (no connection, connect timeout): the request never left; retry."""
    UNKNOWN = "unknown"
    """5xx, a read timeout or a connection lost after sending, transaction in progress: it MAY
    have applied."""


THROTTLE_CODES = frozenset(
    {
        # error codes of plain calls
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "RequestThrottled",  # SQS
        # CancellationReasons codes
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
    }
)
CONFLICT_CODES = frozenset(
    {
        "TransactionConflictException",
        # An MRSC global table refuses a write to an item that a request in another Region is
        # modifying: not applied, retryable (the DynamoDB service model marks it retryable).
        "ReplicatedWriteConflictException",
    }
)
UNKNOWN_CODES = frozenset(
    {
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionInProgressException",  # a same-token request is still running: may commit
    }
)


class CancellationReason(TypedDict, total=False):
    """One action's entry in a transaction's ``CancellationReasons`` (or the single-item
    equivalent a ``ConditionalCheckFailedException`` is classified as)."""

    Code: str
    """``ConditionalCheckFailed``, ``TransactionConflict``, a throttle code, or ``None``."""
    Message: str
    Item: items.Item
    """The item as it was, with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``."""


def _reason(raw: Mapping[str, Any]) -> CancellationReason:
    """One raw reason (botocore's response is untyped: ``Any``) -> its typed fields."""
    reason = CancellationReason()
    if "Code" in raw:
        reason["Code"] = str(raw["Code"])
    if "Message" in raw:
        reason["Message"] = str(raw["Message"])
    if raw.get("Item") is not None:
        reason["Item"] = dict(raw["Item"])
    return reason


class Classified(NamedTuple):
    """One failure classified: its kind, its error code and, for a cancelled transaction, the reasons."""

    kind: Failure
    code: str
    reasons: tuple[CancellationReason, ...] = ()
    """The transaction's CancellationReasons, in TransactItems order (empty otherwise): read them by
    action name through [`counters.store.expr.Transaction.cancellation`][counters.store.expr.Transaction.cancellation], never by position."""


def classify(exc: BaseException) -> Classified | None:
    """Classify a botocore failure; ``None`` means "not ours to handle": re-raise it."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        if code == "TransactionCanceledException":
            reasons = tuple(_reason(r) for r in exc.response.get("CancellationReasons") or ())
            codes: set[str] = {str(r.get("Code")) for r in reasons}
            # Transient reasons first: a condition evaluated while another action conflicted
            # is re-evaluated on retry, so the transient cause decides.
            if "TransactionConflict" in codes:
                return Classified(Failure.CONFLICT, "TransactionConflict", reasons)
            if codes & THROTTLE_CODES:
                return Classified(Failure.THROTTLED, next(iter(codes & THROTTLE_CODES)), reasons)
            if "ConditionalCheckFailed" in codes:
                return Classified(Failure.CONDITION, "ConditionalCheckFailed", reasons)
            return None  # ValidationError, ItemCollectionSizeLimitExceeded...: a bug, re-raise
        if code == "ConditionalCheckFailedException":
            return Classified(Failure.CONDITION, code, (_reason({"Code": "ConditionalCheckFailed", "Item": exc.response.get("Item")}),))
        if code in CONFLICT_CODES:
            return Classified(Failure.CONFLICT, code)
        if code in THROTTLE_CODES:
            return Classified(Failure.THROTTLED, code)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in UNKNOWN_CODES or status >= 500:
            return Classified(Failure.UNKNOWN, code or str(status))
        return None
    if isinstance(exc, NOT_SENT_ERRORS):
        return Classified(Failure.NOT_SENT, type(exc).__name__)
    if isinstance(exc, (HTTPClientError, BotoConnectionError)):
        # Anything else on the wire may have happened after the request was sent: a read timeout
        # (ReadTimeoutError), the connection closed or reset under the answer (ConnectionClosedError,
        # HTTPClientError), the answer cut short (ResponseStreamingError), TLS failing mid-stream
        # (SSLError). DynamoDB may have applied it: unknown, never "not applied".
        return Classified(Failure.UNKNOWN, type(exc).__name__)
    return None  # ParamValidationError, NoCredentialsError...: a bug or a configuration error, re-raise


NOT_SENT_ERRORS = (EndpointConnectionError, ConnectTimeoutError)
"""The only transport errors raised before a byte of the request was sent (botocore raises them
when the connection cannot be opened): definitely not applied. ``ConnectTimeoutError`` is a
subclass of botocore's ``ConnectionError``, hence the order in [`classify`][counters.core.failures.classify]."""


@dataclass
class RetryPolicy:
    """Capped exponential backoff: full jitter (AWS Architecture Blog's "full jitter"), and after a
    throttle equal jitter, which never retries sooner than half its ceiling.

    The split is the AWS SDK for Java's DynamoDB default (``PredefinedBackoffStrategies``:
    ``SDKDefaultBackoffStrategy(25 ms, 500 ms throttled, 20 s)``, "guarantees a minimum delay for
    throttled exceptions"). A throttled key is out of tokens: asked again within a few ms it
    refuses again, and each refusal is a request the partition still has to turn away. Measured in
    ``make bench``'s step ([docs/bench.md](../bench.md)): at 0-20 ms after a throttle, a like that met one met 4.1
    throttles in all; from 125 ms, 1.7.

    ``max_attempts`` counts every call, the first included. ``sleep`` and ``rng`` are
    injectable so tests run without waiting and reproducibly.
    """

    max_attempts: int = 6
    base_delay: float = 0.02
    max_delay: float = 0.5
    throttle_base_delay: float = 0.25
    """The ceiling of the first delay after a throttle (doubling, at most ``max_delay``): 125-250 ms."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def patient(self, attempts: int, max_delay: float = 1.0) -> RetryPolicy:
        """This policy with at least ``attempts`` attempts, backing off up to ``max_delay`` (the same
        ``sleep`` and ``rng``): for work no request's latency waits on and that fails whole when one
        of its many calls runs out of attempts (a grown post's sweep, an audit's probes). A caller
        with a time budget bounds it with [`counters.core.engine.deadline`][counters.core.engine.deadline]."""
        return replace(self, max_attempts=max(self.max_attempts, attempts), max_delay=max(self.max_delay, max_delay))

    def backoff(self, attempt: int, *, throttled: bool = False) -> float:
        """Sleep before attempt ``attempt + 1``; returns the delay slept. ``throttled``: the attempt
        was throttled (equal jitter from ``throttle_base_delay``), else full jitter."""
        if throttled:
            ceiling = min(self.max_delay, self.throttle_base_delay * 2.0 ** (attempt - 1))
            delay: float = ceiling / 2 + self.rng.uniform(0, ceiling / 2)
        else:
            delay = self.rng.uniform(0, min(self.max_delay, self.base_delay * (2 ** (attempt - 1))))
        self.sleep(delay)
        return delay
