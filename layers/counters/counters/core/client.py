"""DynamoDB plumbing shared by every primitive: the client and item conversion.

The client
    One lazily created client per process. **SDK retries are off** (``total_max_attempts=1``):
    botocore would otherwise silently re-send non-idempotent writes (seed 02, "Working with
    the AWS SDK"), and the layer needs to see every failure to classify it. Retrying is done
    once, by :func:`counters.core.engine.run`, which knows (through its caller's hooks) whether a
    resend is safe. Endpoint, region and credentials come from the standard environment
    (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``...), which botocore
    honours natively. The layer builds its clients on botocore directly: boto3 adds nothing a
    low-level client needs, and importing it (with s3transfer) costs a third of a cold start.

Items
    :func:`to_item` / :func:`from_item` convert between Python values and DynamoDB attribute
    values, as boto3's ``TypeSerializer``/``TypeDeserializer`` do (floats refused, numbers exact
    in DynamoDB's 38-digit context), except that numbers come back as ``int`` when whole and
    ``float`` otherwise, never ``Decimal``, and binary values as ``bytes``.

What a failure means is :mod:`counters.core.failures`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

import botocore.session
from botocore.config import Config

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},  # SDK retries OFF: see module doc
    connect_timeout=2,
    read_timeout=5,
    tcp_keepalive=True,
    max_pool_connections=64,
)

CLIENT_LOCK = threading.RLock()
"""Held while a client is created: botocore sessions are not thread-safe."""
_client: Any = None
_loader: Any = None


def botocore_session() -> Any:
    """A new botocore session (call with :data:`CLIENT_LOCK` held) sharing one data loader, so
    each service model is parsed once per process while endpoint, region and credentials are
    read from the environment afresh for every client (a shared session would keep the first
    credentials it resolved)."""
    global _loader
    session = botocore.session.get_session()
    if _loader is None:
        _loader = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _loader)
    return session


def client() -> Any:
    """The process-wide DynamoDB client (created on first use, honours endpoint env vars)."""
    global _client
    if _client is None:
        with CLIENT_LOCK:
            if _client is None:
                from counters.core.engine import guard

                _client = botocore_session().create_client("dynamodb", config=CLIENT_CONFIG)
                guard(_client.meta.events, "dynamodb")
    return _client


def reset_client() -> None:
    """Forget the cached client (tests that change endpoint variables call this)."""
    global _client
    with CLIENT_LOCK:
        _client = None


# DynamoDB numbers: 38 digits of precision, exponents -130..125; anything inexact is an error.
_NUMBERS = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])


def _number(value: int | Decimal) -> str:
    return str(_NUMBERS.create_decimal(value))


def serialize(value: Any) -> dict[str, Any]:
    """One Python value -> one DynamoDB attribute value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, (int, Decimal)):
        return {"N": _number(value)}
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use int or Decimal types instead.")
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, (bytes, bytearray)):
        return {"B": bytes(value)}
    if isinstance(value, Set):
        if not value:
            raise TypeError("an empty set is not a DynamoDB value")
        if all(isinstance(v, str) for v in value):
            return {"SS": list(value)}
        if all(isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in value):
            return {"NS": [_number(v) for v in value]}
        if all(isinstance(v, (bytes, bytearray)) for v in value):
            return {"BS": [bytes(v) for v in value]}
        raise TypeError("a set must hold only strings, only numbers or only bytes")
    if isinstance(value, (list, tuple)):
        return {"L": [serialize(v) for v in value]}
    if isinstance(value, Mapping):
        return {"M": {str(k): serialize(v) for k, v in value.items()}}
    raise TypeError(f"unsupported type {type(value)!r} for value {value!r}")


def _plain_number(text: str) -> int | float:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else float(number)


def deserialize(value: dict[str, Any]) -> Any:
    """One DynamoDB attribute value -> one Python value."""
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return _plain_number(data)
    if kind == "BOOL":
        return data
    if kind == "NULL":
        return None
    if kind == "B":
        return bytes(data)
    if kind == "M":
        return {k: deserialize(v) for k, v in data.items()}
    if kind == "L":
        return [deserialize(v) for v in data]
    if kind == "SS":
        return set(data)
    if kind == "NS":
        return {_plain_number(v) for v in data}
    if kind == "BS":
        return {bytes(v) for v in data}
    raise TypeError(f"unknown DynamoDB type {kind!r}")


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """Python values -> DynamoDB attribute values."""
    return {k: serialize(v) for k, v in values.items()}


def from_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """DynamoDB attribute values -> Python values; numbers (nested ones too) come back as
    ``int`` when whole, ``float`` otherwise, never ``Decimal``."""
    if item is None:
        return None
    return {k: deserialize(v) for k, v in item.items()}


def new_token() -> str:
    """A fresh ClientRequestToken (36 chars, the API's maximum)."""
    return str(uuid.uuid4())
