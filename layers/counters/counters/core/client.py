"""DynamoDB plumbing shared by every primitive: the client, error classification, backoff.

The client
    One lazily created client per process. **SDK retries are off** (``total_max_attempts=1``):
    botocore would otherwise silently re-send non-idempotent writes (seed 02, "Working with
    the AWS SDK"), and the layer needs to see every failure to classify it. Retrying is done
    once, by :func:`counters.core.engine.run`, which knows (through its caller's hooks) whether a
    resend is safe. Endpoint, region and credentials come from the standard environment
    (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``...), which botocore
    honours natively.

Classification
    Every failure becomes one :class:`Failure` kind. Transaction cancellations are classified
    by ``CancellationReasons[i].Code``, never by message text.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},  # SDK retries OFF: see module doc
    connect_timeout=2,
    read_timeout=5,
    tcp_keepalive=True,
    max_pool_connections=64,
)

_client_lock = threading.Lock()
_client: Any = None


def client() -> Any:
    """The process-wide DynamoDB client (created on first use, honours endpoint env vars)."""
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                from counters.core.engine import guard

                _client = boto3.session.Session().client("dynamodb", config=CLIENT_CONFIG)
                guard(_client.meta.events, "dynamodb")
    return _client


def reset_client() -> None:
    """Forget the cached client (tests that change endpoint variables call this)."""
    global _client
    with _client_lock:
        _client = None


_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """Python values -> DynamoDB attribute values."""
    return {k: _serializer.serialize(v) for k, v in values.items()}


def from_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """DynamoDB attribute values -> Python values; numbers (nested ones too) come back as
    ``int`` when whole, ``float`` otherwise, never ``Decimal``."""
    if item is None:
        return None
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


def new_token() -> str:
    """A fresh ClientRequestToken (36 chars, the API's maximum)."""
    return str(uuid.uuid4())


class Failure(StrEnum):
    """What a failed call tells us about whether it applied."""

    CONDITION = "condition"
    """A condition failed: definitely not applied."""
    CONFLICT = "conflict"
    """TransactionConflict: not applied; retry."""
    THROTTLED = "throttled"
    """Throttling / capacity: not applied; retry with backoff."""
    NOT_SENT = "not_sent"
    """Could not reach DynamoDB: not applied; retry."""
    UNKNOWN = "unknown"
    """5xx, timeout after sending, transaction in progress: it MAY have applied."""


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
UNKNOWN_CODES = frozenset(
    {
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionInProgressException",  # a same-token request is still running: may commit
    }
)


@dataclass(frozen=True)
class Classified:
    kind: Failure
    code: str
    reasons: tuple[dict[str, Any], ...] = ()
    """The transaction's CancellationReasons, in TransactItems order (empty otherwise)."""

    def failed_conditions(self) -> list[int]:
        """Indexes of the transaction actions whose condition failed."""
        return [i for i, r in enumerate(self.reasons) if r.get("Code") == "ConditionalCheckFailed"]

    def old_item(self, index: int) -> dict[str, Any] | None:
        """The item returned by ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` for an action."""
        if index < len(self.reasons):
            return self.reasons[index].get("Item")
        return None


def classify(exc: BaseException) -> Classified | None:
    """Classify a botocore failure; ``None`` means "not ours to handle": re-raise it."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        if code == "TransactionCanceledException":
            reasons = tuple(exc.response.get("CancellationReasons") or ())
            codes = {r.get("Code") for r in reasons}
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
            item = exc.response.get("Item")
            return Classified(Failure.CONDITION, code, ({"Code": "ConditionalCheckFailed", "Item": item},))
        if code == "TransactionConflictException":
            return Classified(Failure.CONFLICT, code)
        if code in THROTTLE_CODES:
            return Classified(Failure.THROTTLED, code)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in UNKNOWN_CODES or status >= 500:
            return Classified(Failure.UNKNOWN, code or str(status))
        return None
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):
        return Classified(Failure.NOT_SENT, type(exc).__name__)
    if isinstance(exc, (ReadTimeoutError, ConnectionClosedError)):
        return Classified(Failure.UNKNOWN, type(exc).__name__)
    if isinstance(exc, BotoCoreError):
        return None
    return None


@dataclass
class RetryPolicy:
    """Capped exponential backoff with full jitter (AWS Architecture Blog's "full jitter").

    ``max_attempts`` counts every call, the first included. ``sleep`` and ``rng`` are
    injectable so tests run without waiting and reproducibly.
    """

    max_attempts: int = 6
    base_delay: float = 0.02
    max_delay: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """The in-line budget from ``INLINE_RETRY_ATTEMPTS`` (template parameter), default 6."""
        return cls(max_attempts=max(1, int(os.environ.get("INLINE_RETRY_ATTEMPTS") or 6)))

    def backoff(self, attempt: int) -> float:
        """Sleep before attempt ``attempt + 1``; returns the delay slept."""
        delay = self.rng.uniform(0, min(self.max_delay, self.base_delay * (2 ** (attempt - 1))))
        self.sleep(delay)
        return delay
