"""The layer's AWS clients: one DynamoDB and one SQS client per process, made here and nowhere else.

**SDK retries are off** (``total_max_attempts=1``): botocore would otherwise silently re-send
non-idempotent writes (seed 02, "Working with the AWS SDK"), and the layer needs to see every
failure to classify it. Retrying is done once, by [`counters.core.engine.run`][counters.core.engine.run], which knows
(through its caller's hooks) whether a resend is safe. Endpoint, region and credentials come from
the standard environment (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL_SQS``,
``AWS_ENDPOINT_URL``, ``AWS_REGION``...), which botocore honours natively. The clients are built on
botocore directly: boto3 adds nothing a low-level client needs, and importing it (with s3transfer)
costs a third of a cold start.

The guard (a test seam): with ``TALLY_ENGINE_GUARD=1`` in the environment, every client made here
refuses a call not issued from inside [`counters.core.engine.run`][counters.core.engine.run] ([`engine_call`][counters.core.client.engine_call] marks
those), so a call that would have no retry fails the tests. Item conversion is
[`counters.core.items`][counters.core.items]; what a failure means is [`counters.core.failures`][counters.core.failures].
"""

from __future__ import annotations

import contextvars
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import botocore.session
from botocore.config import Config
from botocore.exceptions import NoRegionError

if TYPE_CHECKING:  # types only: botocore-stubs
    from botocore.client import ClientMeta
    from botocore.hooks import BaseEventHooks
    from botocore.loaders import Loader
    from botocore.model import OperationModel

Params = dict[str, Any]
"""The keyword parameters of one botocore call (``TableName``, ``Key``, ``TransactItems``...).
``Any``: their shape is the operation's in the service model, which botocore reads at run time;
botocore-stubs do not type it per operation (that would take mypy-boto3-dynamodb's TypedDicts,
not a dependency of the layer)."""
Response = dict[str, Any]
"""What one botocore call answers (``Item``, ``Attributes``, ``ConsumedCapacity``...), untyped for
the same reason as [`Params`][counters.core.client.Params]; the store turns it into typed facts."""


class DynamoDBClient(Protocol):
    """The DynamoDB operations the layer calls, on botocore's client (botocore builds the client's
    class from the service model at run time, so botocore-stubs type it only as ``BaseClient``)."""

    @property
    def meta(self) -> ClientMeta:
        """botocore's client metadata (its Region, its endpoint)."""

    def get_item(self, **params: object) -> Response:  # botocore validates them at run time
        """GetItem."""

    def put_item(self, **params: object) -> Response:
        """PutItem."""

    def update_item(self, **params: object) -> Response:
        """UpdateItem."""

    def delete_item(self, **params: object) -> Response:
        """DeleteItem."""

    def query(self, **params: object) -> Response:
        """Query."""

    def scan(self, **params: object) -> Response:
        """Scan."""

    def batch_get_item(self, **params: object) -> Response:
        """BatchGetItem."""

    def transact_get_items(self, **params: object) -> Response:
        """TransactGetItems."""

    def transact_write_items(self, **params: object) -> Response:
        """TransactWriteItems."""


class SQSClient(Protocol):
    """The SQS operations the layer calls (see [`DynamoDBClient`][counters.core.client.DynamoDBClient])."""

    @property
    def meta(self) -> ClientMeta:
        """botocore's client metadata (its Region, its endpoint)."""

    def send_message(self, **params: object) -> Response:  # botocore validates them at run time
        """SendMessage."""


CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},  # SDK retries OFF: see module doc
    connect_timeout=2,
    read_timeout=5,
    tcp_keepalive=True,
    max_pool_connections=64,
)
"""Every client's botocore configuration: one attempt per call (the engine retries), short timeouts, keep-alive."""
GUARD_ENV = "TALLY_ENGINE_GUARD"

CLIENT_LOCK = threading.RLock()
"""Held while a client is created: botocore sessions are not thread-safe."""
_dynamodb: DynamoDBClient | None = None
_sqs: SQSClient | None = None
_loader: Loader | None = None
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("tally_engine_call", default=False)


def botocore_session() -> botocore.session.Session:
    """A new botocore session (call with [`CLIENT_LOCK`][counters.core.client.CLIENT_LOCK] held) sharing one data loader, so
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


def _raise_mistake(service: str, exc: BaseException) -> None:
    """Outside Lambda, a client that cannot be made for a setup reason raises the error naming the
    fix ([`counters.core.configuration.client_mistake`][counters.core.configuration.client_mistake]); otherwise this returns."""
    from counters.core.configuration import client_mistake  # imported only on the error

    mistake = client_mistake(service, exc)
    if mistake is not None:
        raise mistake from exc


def client() -> DynamoDBClient:
    """The process-wide DynamoDB client (created on first use, honours endpoint env vars)."""
    global _dynamodb
    if _dynamodb is None:
        with CLIENT_LOCK:
            if _dynamodb is None:
                try:
                    made: DynamoDBClient = botocore_session().create_client("dynamodb", config=CLIENT_CONFIG)  # type: ignore[assignment, unused-ignore]  # stubs: BaseClient (without them Any); the class has these operations at run time
                except (NoRegionError, ValueError) as exc:
                    _raise_mistake("dynamodb", exc)
                    raise
                guard(made.meta.events, "dynamodb")
                _dynamodb = made
    return _dynamodb


def sqs_client() -> SQSClient:
    """The process-wide SQS client (honours ``AWS_ENDPOINT_URL_SQS`` / ``AWS_ENDPOINT_URL``)."""
    global _sqs
    if _sqs is None:
        with CLIENT_LOCK:
            if _sqs is None:
                try:
                    made: SQSClient = botocore_session().create_client("sqs", config=CLIENT_CONFIG)  # type: ignore[assignment, unused-ignore]  # as for DynamoDB above
                except (NoRegionError, ValueError) as exc:
                    _raise_mistake("sqs", exc)
                    raise
                guard(made.meta.events, "sqs")
                _sqs = made
    return _sqs


def reset_client() -> None:
    """Forget the DynamoDB client (tests that change endpoint variables call this)."""
    global _dynamodb
    with CLIENT_LOCK:
        _dynamodb = None


def reset_sqs_client() -> None:
    """Forget the SQS client."""
    global _sqs
    with CLIENT_LOCK:
        _sqs = None


def reset_clients() -> None:
    """Forget every client: the next call makes new clients and new connections (a process
    restored from a snapshot must not reuse the snapshot's connections)."""
    reset_client()
    reset_sqs_client()


def new_token() -> str:
    """A fresh ClientRequestToken (36 chars, the API's maximum)."""
    return str(uuid.uuid4())


# -- the guard (a test seam) --------------------------------------------------------------------
class OutsideEngine(RuntimeError):
    """A DynamoDB/SQS call was issued outside the retry engine (only raised with the guard on)."""


@contextmanager
def engine_call() -> Iterator[None]:
    """Marks one attempt as the engine's ([`counters.core.engine.run`][counters.core.engine.run] wraps each send in it)."""
    marker = _inside.set(True)
    try:
        yield
    finally:
        _inside.reset(marker)


def _refuse_outside(model: OperationModel | None = None, **_: object) -> None:
    if not _inside.get():
        name = getattr(model, "name", "?")
        raise OutsideEngine(f"{name} was called outside the retry engine (counters.core.engine.run): it would have no retry")


def guard(events: BaseEventHooks, service: str) -> None:
    """Make a client (its ``meta.events``) refuse calls issued outside the engine when
    ``TALLY_ENGINE_GUARD=1``."""
    if os.environ.get(GUARD_ENV) == "1":
        events.register_first(f"before-call.{service}", _refuse_outside, unique_id="tally-engine-guard")
