"""Fault injection for boto3 clients through botocore's event hooks (no proxy, no mocks).

DynamoDB Local never raises TransactionConflict, never throttles and cannot fail after a
commit; moto's SQS never throttles or loses an answer. :class:`FaultInjector` adds exactly
those failures to a real client of either service (it hooks the events of the client's own
service), at a seeded rate, and counts what it injected:

``after_commit``  the call succeeded, then the caller receives a 500 (InternalServerError /
                  SQS InternalFailure): for a write the ambiguous case (it is in the table or
                  the queue, the caller cannot know); for a read, a lost answer
``resend``        the call succeeded, then botocore sends the identical request again and
                  the caller receives the *second* response (an SDK retry after a lost reply;
                  for SendMessage the message is queued twice)
``conflict``      DynamoDB only, cancelled before sending: TransactionConflict
                  (TransactionCanceledException with that reason for TransactWriteItems and
                  TransactGetItems, TransactionConflictException otherwise); never drawn for SQS
``throttle``      cancelled before sending: ThrottlingError reason / ThrottlingException
                  (SQS: RequestThrottled)
``unavailable``   a 500 before sending: not applied, but the caller cannot know that
``replicated_conflict``  DynamoDB only, cancelled before sending: ReplicatedWriteConflictException
                  (MRSC: "a write to an item that is being modified in another Region fails",
                  "Key facts about MRSC" in bp-global-table-design); drawn only for the
                  single-item writes it is modelled on (PutItem, UpdateItem, DeleteItem,
                  BatchWriteItem). For the local stack's MRSC Regions, which run as separate
                  processes and cannot see each other's in-flight writes as testkit.regions does
``mrsc_unsupported``  DynamoDB only: a ValidationException for the APIs an MRSC table refuses
                  (TransactWriteItems, TransactGetItems, UpdateTimeToLive); give it rate 1
``late``          the request is held and the caller receives a 500 at once (its outcome is
                  unknown); the identical request lands later: right after the same thread's next
                  call on this client (for an optimistic write: after its re-read), or at
                  ``detach``. A timed-out request still in flight, which SDK retries being off does
                  not rule out; unlike ``resend`` the caller sees the unknown outcome

Reads are faulted like writes when a rule has no ``operations`` (GetItem, Query, Scan,
TransactGetItems, ReceiveMessage...). Queue *delivery* faults (a message delivered twice, or
again while its first delivery still runs) are not client calls: see :mod:`devstack.sqs`.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KINDS = ("after_commit", "resend", "conflict", "throttle", "unavailable", "replicated_conflict", "mrsc_unsupported", "late")
TRANSACTIONS = frozenset({"TransactWriteItems", "TransactGetItems"})
SINGLE_ITEM_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"})
MRSC_UNSUPPORTED = frozenset({*TRANSACTIONS, "UpdateTimeToLive"})


@dataclass
class Rule:
    kind: str
    operations: frozenset[str] | None
    rate: float
    limit: int | None
    fired: int = 0
    at_least: int = 0  # its first opportunities fire until it has fired this often; then ``rate`` decides


class _FakeHttp:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.content = b""
        self.raw = None


def _error(status: int, code: str, message: str, **extra: Any) -> tuple[_FakeHttp, dict[str, Any]]:
    parsed = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 0}, **extra}
    return _FakeHttp(status), parsed


def _body(request_dict: dict[str, Any]) -> dict[str, Any]:
    body = request_dict.get("body") or b"{}"
    try:
        return json.loads(body)
    except (TypeError, ValueError):
        return {}


class FaultInjector:
    """Attach to a client; ``add()`` rules; ``injected`` counts what fired, by kind."""

    def __init__(self, client: Any, seed: int = 0) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.rules: list[Rule] = []
        self.injected: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.by_operation: Counter[tuple[str, str]] = Counter()
        """(operation, kind) -> how many times it was injected."""
        self._held: dict[int, list[Any]] = {}
        """thread id -> [operation model, request dict, request context, armed] of a ``late`` request."""
        self.landed: Callable[[], None] | None = None
        """Run right after a ``late`` request lands, on the caller's thread, before its next call
        returns (a seeded schedule for "another writer commits after our late send")."""
        self._delivering = threading.local()
        self.service = client.meta.service_model.service_id.hyphenize()  # "dynamodb", "sqs": the event names' service part
        events = client.meta.events
        events.register_first(f"before-call.{self.service}", self._before_call, unique_id=f"faults-before-{id(self)}")
        events.register_first(f"after-call.{self.service}", self._after_call, unique_id=f"faults-after-{id(self)}")
        events.register_first(f"needs-retry.{self.service}", self._needs_retry, unique_id=f"faults-retry-{id(self)}")

    def add(
        self, kind: str, *, operations: set[str] | None = None, rate: float = 1.0, limit: int | None = None, at_least: int = 0
    ) -> FaultInjector:
        """``at_least``: a floor by construction, not by the seed: the rule fires on its first
        opportunities until it has fired that often, then at ``rate``."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {KINDS}")
        self.rules.append(Rule(kind, frozenset(operations) if operations else None, rate, limit, at_least=at_least))
        return self

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def detach(self) -> None:
        self.landed = None
        for thread in list(self._held):
            self._land(thread)
        events = self.client.meta.events
        events.unregister(f"before-call.{self.service}", unique_id=f"faults-before-{id(self)}")
        events.unregister(f"after-call.{self.service}", unique_id=f"faults-after-{id(self)}")
        events.unregister(f"needs-retry.{self.service}", unique_id=f"faults-retry-{id(self)}")

    @property
    def dynamodb(self) -> bool:
        return self.service == "dynamodb"

    def _applies(self, rule: Rule, operation: str) -> bool:
        if rule.operations and operation not in rule.operations:
            return False
        if rule.kind in ("conflict", "replicated_conflict", "mrsc_unsupported") and not self.dynamodb:
            return False  # a queue has no transactions to conflict with, and no Regions
        if rule.kind == "replicated_conflict" and operation not in SINGLE_ITEM_WRITES:
            return False
        if rule.kind == "mrsc_unsupported" and operation not in MRSC_UNSUPPORTED:
            return False
        return rule.limit is None or rule.fired < rule.limit

    def _fire(self, rule: Rule, operation: str) -> str:
        rule.fired += 1
        self.injected[rule.kind] += 1
        self.by_operation[(operation, rule.kind)] += 1
        return rule.kind

    def _draw(self, operation: str, kinds: tuple[str, ...]) -> str | None:
        with self._lock:
            # Floors (``at_least``): a rule short of its floor fires on this call; while any rule
            # that applies is short, nothing else is drawn at random (no random fault takes an
            # opportunity a floor still needs). Certain rules (rate 1) still fire in their turn.
            short = any(r.fired < r.at_least and self._applies(r, operation) for r in self.rules)
            for rule in self.rules:
                if rule.kind not in kinds or not self._applies(rule, operation):
                    continue
                if rule.fired < rule.at_least:
                    return self._fire(rule, operation)
                if short and rule.rate < 1.0:
                    continue
                if self.rng.random() < rule.rate:
                    return self._fire(rule, operation)
        return None

    @property
    def _internal_code(self) -> str:
        return "InternalServerError" if self.dynamodb else "InternalFailure"

    # -- before sending: failures that leave the table untouched --------------------------
    def _land(self, thread: int) -> None:
        """Send the request ``late`` held for ``thread`` (its answer goes nowhere)."""
        with self._lock:
            held = self._held.pop(thread, None)
        if held is None:
            return
        self._delivering.on = True
        try:
            self.client._make_request(held[0], held[1], held[2])
        except Exception:  # noqa: BLE001, S110 - it landed or it did not; nobody hears its answer
            pass
        finally:
            self._delivering.on = False
        if self.landed is not None:
            self.landed()

    def _before_call(self, model: Any, params: dict[str, Any], context: Any = None, **_: Any) -> Any:
        operation = model.name
        if getattr(self._delivering, "on", False):
            return None
        with self._lock:
            self.calls[operation] += 1
        if threading.get_ident() not in self._held and self._draw(operation, ("late",)) is not None:
            with self._lock:
                self._held[threading.get_ident()] = [model, params, context, False]
            return _error(500, self._internal_code, "injected: no answer (the request lands later)")
        kind = self._draw(operation, ("mrsc_unsupported", "replicated_conflict", "conflict", "throttle", "unavailable"))
        if kind is None:
            return None
        if kind == "mrsc_unsupported":
            what = "Transactions are" if operation in TRANSACTIONS else "Time to Live (TTL) is"
            return _error(400, "ValidationException", f"{what} not supported for global tables with multi-Region strong consistency")
        if kind == "replicated_conflict":
            return _error(
                400, "ReplicatedWriteConflictException", "injected: one or more items are being modified by a request in another Region"
            )
        if kind == "unavailable":
            return _error(500, self._internal_code, "injected: internal server error (not applied)")
        if not self.dynamodb:
            return _error(400, "RequestThrottled", "injected: request throttled")
        if operation in TRANSACTIONS:
            n = len(_body(params).get("TransactItems", [])) or 1
            reason = "TransactionConflict" if kind == "conflict" else "ThrottlingError"
            reasons = [{"Code": "None"}] * n
            reasons[self.rng.randrange(n)] = {"Code": reason, "Message": f"injected {reason}"}
            return _error(400, "TransactionCanceledException", f"Transaction cancelled [injected {reason}]", CancellationReasons=reasons)
        if kind == "conflict":
            return _error(400, "TransactionConflictException", "injected: transaction conflict")
        return _error(400, "ThrottlingException", "injected: rate exceeded")

    # -- after a successful call: the ambiguous failures -----------------------------------
    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if getattr(self._delivering, "on", False):
            return
        held = self._held.get(threading.get_ident())
        if held is not None:
            if held[3]:
                self._land(threading.get_ident())  # after the thread's next call: the held request lands now
            else:
                held[3] = True  # the held call's own answer (the 500)
                return
        if http_response is None or getattr(http_response, "status_code", 500) >= 300:
            return
        if self._draw(model.name, ("after_commit",)) is None:
            return
        parsed.clear()
        parsed.update(
            {
                "Error": {"Code": self._internal_code, "Message": "injected: failed after commit"},
                "ResponseMetadata": {"HTTPStatusCode": 500},
            }
        )
        http_response.status_code = 500

    def _needs_retry(self, response: Any, operation: Any, attempts: int, caught_exception: Any = None, **_: Any) -> Any:
        if caught_exception is not None or response is None:
            return None
        http = response[0]
        if http.status_code >= 300 or attempts > 1 or getattr(self._delivering, "on", False):
            return None
        if self._draw(operation.name, ("resend",)) is None:
            return None
        return 0  # "sleep 0 seconds, then retry": botocore re-sends the identical request
