"""DynamoDB plumbing shared by every primitive: the client and item conversion.

The client
    One lazily created client per process. **SDK retries are off** (``total_max_attempts=1``):
    botocore would otherwise silently re-send non-idempotent writes (seed 02, "Working with
    the AWS SDK"), and the layer needs to see every failure to classify it. Retrying is done
    once, by :func:`counters.core.engine.run`, which knows (through its caller's hooks) whether a
    resend is safe. Endpoint, region and credentials come from the standard environment
    (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``...), which botocore
    honours natively.

What a failure means is :mod:`counters.core.failures`.
"""

from __future__ import annotations

import threading
import uuid
from decimal import Decimal
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config

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
