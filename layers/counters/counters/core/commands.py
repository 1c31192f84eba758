"""Commands: a mutating request as data, so it can be deferred and replayed.

A service that runs out of in-line retries raises [`ContentionError`][counters.core.errors.ContentionError]
carrying a [`Command`][counters.core.commands.Command] (operation name, typed payload, the request's id). The service also
registers, per operation, a [`Replayable`][counters.core.commands.Replayable] (the payload dataclass and the executor) that
[`counters.deferral`][counters.deferral] uses to replay the command from the retry queue; the replay answers a
[`Verdict`][counters.core.commands.Verdict], or raises: [`Replayable.run`][counters.core.commands.Replayable.run] turns a final error into ``REJECTED`` and lets
any other one propagate (redelivered). This module is below the services (they build commands);
the queue and the operation records that carry them are in [`counters.deferral`][counters.deferral].
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, field
from typing import NamedTuple

from counters.core.errors import CounterError
from counters.core.json import JSONObject
from counters.core.records import dataclass

MAX_MESSAGE_BYTES = 200_000  # SQS allows 256 KiB; stay well below


class PoisonMessage(ValueError):
    """A queue message that can never succeed (malformed, unknown operation): DLQ at once."""


_last_ns = 0
_ids_lock = threading.Lock()


def new_request_id() -> str:
    """The id of one mutating request (32 hex): its operation id if it is ever deferred.

    The first 16 hex digits are the time the function took the request (ns since the epoch,
    fixed width, never repeating or going back within a process), the last 16 are random. Ids
    therefore sort in the order the function received their requests: a like's stamp is (API
    time in ms, request id), and when two requests share the API's millisecond (API Gateway
    gives no finer time; ``sam local start-api`` 1.170.0 gives every request the same time,
    aws/aws-sam-cli#9279) the one received later still wins, as stored stamps compare
    (``changedAt``, ``changedBy``) in that order ([`counters.store.toggles.stored_is_older`][counters.store.toggles.stored_is_older])."""
    global _last_ns
    with _ids_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        received = _last_ns
    return f"{received:016x}{secrets.randbits(64):016x}"


@dataclass(frozen=True)
class Command:
    """One deferred mutating request: the operation, its payload, the request's id."""

    op: str
    payload: JSONObject
    operation_id: str = field(default_factory=new_request_id)
    created_at: int = field(default_factory=lambda: int(time.time()))
    version: int = 1

    def to_message(self) -> str:
        """The command as a queue message body (JSON); ``ValueError`` if it exceeds SQS's message size."""
        body = json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)
        if len(body.encode()) > MAX_MESSAGE_BYTES:
            raise ValueError("command too large for a queue message")
        return body

    @classmethod
    def from_message(cls, body: str) -> Command:
        """The command a queue message body carries (the inverse of [`to_message`][counters.core.commands.Command.to_message])."""
        try:
            data = json.loads(body)
            command = cls(
                op=data["op"],
                payload=data["payload"],
                operation_id=data["operation_id"],
                created_at=int(data["created_at"]),
                version=int(data.get("version", 1)),
            )
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise PoisonMessage(f"malformed command: {exc}") from exc
        if (
            command.version != 1
            or not isinstance(command.payload, dict)
            or not all(isinstance(v, str) and v for v in (command.op, command.operation_id))
        ):
            raise PoisonMessage("malformed command")
        return command


class Verdict(NamedTuple):
    """What a replay did: the final status and result, and whether its own write recorded them."""

    status: str
    """APPLIED (this request made the change), DUPLICATE (another one had) or REJECTED; CONTINUED:
    not final, the rest is in ``then``."""
    result: Mapping[str, object]
    """The answer the request would have had: a service's typed result (a `TypedDict`, e.g.
    [PublicReservation][counters.services.reservations.model.PublicReservation]) or an error's JSON;
    the deferral layer stores it as JSON ([json_object][counters.core.json.json_object])."""
    recorded: bool | None = None
    """True: the replay's transaction recorded the outcome itself; False: it found the
    operation already final (a redelivery); None: record it now."""
    then: Command | None = None
    """The rest of the work, for a command no request waits on (status ``CONTINUED``, e.g. a
    grown post's sweep that stopped before the function's timeout): the retry worker queues it
    before it acknowledges this one."""


def never() -> bool:
    """A ``should_stop`` that never asks to stop (no deadline: tests, scripts)."""
    return False


class Replayable(NamedTuple):
    """One operation the retry worker can replay: its payload type and its executor."""

    payload: type
    """A frozen dataclass of the payload's fields; its ``__post_init__`` raises ValueError on bad values."""
    execute: Callable[..., Verdict]
    """Called with an instance of ``payload`` and the command (and with ``stoppable``, the
    worker's ``should_stop``). Untyped arguments (``...``): a service registers replayables of
    different payload types in one ``dict[str, Replayable]``; ``Replayable[P]`` would need an
    existential type there, so the pairing is checked at run time (``payload(**fields)``)."""
    stoppable: bool = False
    """The executor takes ``should_stop`` (its third argument) and, asked to stop, answers
    ``CONTINUED`` with the rest of the work as [`Verdict.then`][counters.core.commands.Verdict.then]."""

    def run(self, command: Command, should_stop: Callable[[], bool] = never) -> Verdict:
        """Replay ``command``. The one place a replay's error becomes an outcome, for every
        operation: a final error ([`CounterError.final`][counters.core.errors.CounterError.final]) ends it ``REJECTED`` with the error's
        code and message; any other error propagates, so SQS redelivers the message (and after
        ``maxReceiveCount`` it lands in the DLQ). Executors never catch errors to reject."""
        try:
            payload = self.payload(**command.payload)
        except (TypeError, ValueError) as exc:
            raise PoisonMessage(f"{command.op}: {exc}") from exc
        try:
            return self.execute(payload, command, should_stop) if self.stoppable else self.execute(payload, command)
        except CounterError as exc:
            if not exc.final:
                raise
            return Verdict("REJECTED", {"error": exc.code, "message": exc.message})


def require(ok: bool, message: str) -> None:
    """For payload ``__post_init__``: a bad field makes the message poison."""
    if not ok:
        raise ValueError(message)
