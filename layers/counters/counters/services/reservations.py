"""Resources with a capacity and reservations against it, on any approach of seed 02.

The items (resource ``RES#<id>``/``META``, shards ``RES#<id>#<n>``/``SHARD``, reservation records
``RSV#<reservationId>``/``RSV``), their requests and the calls are in
:mod:`counters.store.resources`; the deferred commands in :mod:`.reservation_commands`. This
service orchestrates.

The reservation id is ``uuid5(resourceId, Idempotency-Key)`` when a key is given (so a
redelivered request maps to the same reservation, and the id doubles as the approach's
request token), a random uuid otherwise.

Take (``reserve``): the reservation record is read first (a replay of a known key is answered
from it: same quantity -> the same reservation, other quantity -> 422); then the approach
applies the quantity (through :mod:`counters.primitives.sharding` when sharded); then - for every
approach but ``marker``, whose transaction wrote the record already - the record is Put with
``attribute_not_exists``. That conditional Put decides which of two concurrent duplicates
answers 201 and which 200. If the caller dies between the counter write and the record, the
count holds a reservation without a record: for the token-remembering approaches a retry of
the same key writes the missing record (the approach answers ``duplicate``).

``atomic`` and ``occ`` remember nothing, so with a key the record **claims the key first**: a
conditional Put of a ``PENDING`` record, then the apply, then ``PENDING -> CONFIRMED`` with the
allocation. Twenty concurrent requests with one key and different quantities: one claims, the
others are answered from the claim (422 for another quantity) and never touch the counter, so
a 422 means nothing was taken. A rejected or contended apply drops its claim; an ambiguous one
marks the record ``UNKNOWN`` (the documented bound of those approaches: it may hold the
quantity, and it cannot be released); a claim left ``PENDING`` by a caller that died is read
as ``UNKNOWN`` after :data:`CLAIM_SECONDS`.

Every record carries the ``requestId`` of the request that wrote it, so a re-drive of the same
request (the retry worker, or an attempt whose answer was lost) tells "mine" (201 / APPLIED)
from "an earlier request's" (200 / DUPLICATE).

Holds never expire: a ``CONFIRMED`` record has no TTL (a TTL deleting it would strand its
quantity: release would answer 404 and the count would keep it forever). Only a ``RELEASED``
record gets one (``expiresAt``, :data:`RELEASED_TTL_SECONDS` by default).

Give back (``release``): one transaction on every strategy - the record's status
``CONFIRMED -> RELEASED`` (conditioned on ``CONFIRMED``; it records ``releasedBy``, the
request's id, and starts the TTL) plus the approach's give-back on each counter item of the
allocation - so the quantity returns exactly once whatever retries.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from counters.core.caller import Caller
from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, new_request_id
from counters.core.errors import (
    AlreadyExists,
    AmbiguousOutcome,
    ContentionError,
    IdempotencyKeyReused,
    InsufficientCapacity,
    IntegrityError,
    InvalidRequest,
    NotFound,
    SlotsFull,
)
from counters.core.failures import RetryPolicy
from counters.core.json import JSONObject
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings, SettingsError, env
from counters.primitives import sharding
from counters.primitives.approaches import NAMES, Approach, Reason, create
from counters.services.reservation_commands import ReleasePayload, ReservePayload, SettleClaimPayload, release_command, reserve_command
from counters.store.resources import MAX_SHARDS, Counter, Record, Resource, ResourceStore, Status, record_put, resource_key

NAMESPACE = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
CONFIRMED, RELEASED, PENDING, UNKNOWN = Status.CONFIRMED, Status.RELEASED, Status.PENDING, Status.UNKNOWN
RELEASED_TTL_SECONDS = 30 * 24 * 3600
"""How long a released record is kept (it answers replays of the release and of its key)."""
CLAIM_SECONDS = 120
"""A claim still PENDING after this long was left by a caller that died (functions time out sooner)."""
INSUFFICIENT = (Reason.THRESHOLD, sharding.ShardReason.SOLD_OUT)

Body = JSONObject
"""A public JSON body."""


def reservation_id(resource_id: str, idempotency_key: str, owner: str | None = None) -> str:
    """Deterministic per (resource, key) - and per owner when authorization is on, so one
    user's key never answers with another user's reservation."""
    scope = f"{resource_id}\n{idempotency_key}" if owner is None else f"{resource_id}\n{owner}\n{idempotency_key}"
    return str(uuid.uuid5(NAMESPACE, scope))


@dataclass
class Reservation:
    """The answer to a take: ``created`` (201) or a replay (200), the public body, the result."""

    created: bool
    body: Body
    result: Result | None = None


@dataclass(frozen=True, kw_only=True)
class ReservationSettings(Settings):
    """``ATOMIC_POLICY``: what ``atomic`` does after an unknown outcome (``under`` never re-sends, ``over`` re-sends)."""

    atomic_policy: str = env("ATOMIC_POLICY", "under")

    def __post_init__(self) -> None:
        if self.atomic_policy not in ("under", "over"):
            raise SettingsError("ATOMIC_POLICY must be under or over")


class Reservations:
    """Create resources, take and give back reservations exactly (per the strategy's guarantee)."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        atomic_policy: str = "under",
        history: int = 32,
        max_tokens: int = 250,
        released_ttl_seconds: int = RELEASED_TTL_SECONDS,
        rng: random.Random | None = None,
    ) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()
        self.store = ResourceStore(table_name, dynamodb=dynamodb, retry=self.retry)
        self.options: dict[str, dict[str, Any]] = {
            "atomic": {"policy": atomic_policy},
            "occ_history": {"history": history},
            "set": {"max_tokens": max_tokens},
        }
        self.released_ttl_seconds = released_ttl_seconds
        self.rng = rng or random.Random()
        self._approaches: dict[str, Approach] = {}

    @classmethod
    def from_settings(cls, settings: ReservationSettings) -> Reservations:
        return cls(settings.table_name, retry=settings.retry, atomic_policy=settings.atomic_policy)

    def approach(self, name: str) -> Approach:
        if name not in self._approaches:
            self._approaches[name] = create(name, self.table_name, dynamodb=self._dynamodb, retry=self.retry, **self.options.get(name, {}))
        return self._approaches[name]

    # -- resources -------------------------------------------------------------------------------
    def create_resource(self, resource_id: str, *, capacity: int, strategy: str, shards: int = 1) -> Body:
        if strategy not in NAMES:
            raise InvalidRequest(f"strategy must be one of {', '.join(NAMES)}")
        approach = self.approach(strategy)
        if shards > 1 and not approach.shardable:
            raise InvalidRequest(f"strategy {strategy!r} does not support shards > 1 (shardable: atomic, crt, marker)")
        if not 1 <= shards <= MAX_SHARDS or capacity < 0:
            raise InvalidRequest(f"shards must be 1..{MAX_SHARDS} and capacity >= 0")
        meta: dict[str, object] = {
            **resource_key(resource_id),
            "resourceId": resource_id,
            "capacity": capacity,
            "strategy": strategy,
            "shards": shards,
            "createdAt": int(time.time()),
        }
        resource = Resource(resource_id, capacity, strategy, shards)
        counters: list[tuple[dict[str, str], dict[str, object]]] = []
        if shards == 1:
            meta.update(approach.initial_attributes(capacity))
        else:
            for key, share in zip(resource.counter_keys, sharding.split_capacity(capacity, shards), strict=True):
                counters.append((key, {"resourceId": resource_id, "capacity": share, **approach.initial_attributes(share)}))
        outcome = self.store.create(meta, counters)
        if outcome is Outcome.REJECTED:
            raise AlreadyExists(f"resource {resource_id!r} already exists")
        if outcome is not Outcome.APPLIED:
            raise ContentionError()
        return self._public_resource(resource, 0, capacity)

    def resource(self, resource_id: str) -> Resource:
        found = self.store.resource(resource_id)
        if found is None:
            raise NotFound(f"resource {resource_id!r} not found")
        return found

    def get_resource(self, resource_id: str) -> Body:
        """The resource; a sharded one reads as the sum of one consistent snapshot of its shards."""
        resource = self.resource(resource_id)
        counters = [resource.counter or Counter()] if resource.shards == 1 else self.store.snapshot(resource.counter_keys, Capacity())
        return self._public_resource(resource, sum(c.reserved for c in counters), sum(c.available for c in counters))

    @staticmethod
    def _public_resource(resource: Resource, reserved: int, available: int) -> Body:
        return {
            "resourceId": resource.resource_id,
            "capacity": resource.capacity,
            "reserved": reserved,
            "available": available,
            "strategy": resource.strategy,
            "shards": resource.shards,
        }

    # -- reservations ----------------------------------------------------------------------------
    def reserve(
        self,
        resource_id: str,
        quantity: int,
        idempotency_key: str | None = None,
        *,
        owner: str | None = None,
        request_id: str | None = None,
    ) -> Reservation:
        """Take ``quantity``; ``owner`` (the verified caller, None with authorization off) is
        recorded, and only they (or an admin) may read or release the reservation (anyone
        else is answered as if it did not exist)."""
        if quantity < 1:
            raise InvalidRequest("quantity must be >= 1")
        resource = self.resource(resource_id)
        approach = self.approach(resource.strategy)
        if approach.needs_token and not idempotency_key:
            raise InvalidRequest(f"the Idempotency-Key header is required for strategy {resource.strategy!r}")
        request_id = request_id or new_request_id()
        rid = reservation_id(resource_id, idempotency_key, owner) if idempotency_key else str(uuid.uuid4())
        record: dict[str, object] = {
            "reservationId": rid,
            "resourceId": resource_id,
            "strategy": resource.strategy,
            "requestId": request_id,
        }
        if owner is not None:
            record["owner"] = owner
        if idempotency_key:
            record["idempotencyKey"] = idempotency_key
            existing = self.store.record(rid)
            if existing is not None:
                return self._replay(existing, quantity, request_id)
            if not approach.needs_token:  # nothing else remembers the key: claim it before taking anything
                claimed, stored = self._put_record(rid, record, quantity, None, status=PENDING)
                if not claimed:
                    return self._replay(stored, quantity, request_id)
        if resource.shards == 1:
            result = approach.apply(resource.counter_keys[0], quantity, token=rid, record=record)
            if result.outcome.succeeded:  # unsharded: the one counter item holds it, whoever applied it
                result.value = {
                    "allocation": {resource.counter_keys[0]["PK"]: quantity},
                    **(result.value if isinstance(result.value, dict) else {}),
                }
        else:
            result = sharding.take(approach, resource.counter_keys, quantity, token=rid, record=record, rng=self.rng)
        claimed = bool(idempotency_key) and not approach.needs_token
        try:
            return self._answer(approach, resource, rid, quantity, record, result, claimed)
        except Exception:
            if claimed and result.outcome in (Outcome.REJECTED, Outcome.CONTENTION):
                self.store.drop_claim(rid)  # nothing was taken: free the key
            raise

    def _answer(
        self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, object], result: Result, claimed: bool
    ) -> Reservation:
        value: dict[str, object] = result.value if isinstance(result.value, dict) else {}
        if result.outcome is Outcome.REJECTED:
            if result.reason in INSUFFICIENT:
                raise InsufficientCapacity(
                    f"resource {resource.resource_id!r} has {value.get('available', 'too little')} left; asked for {quantity}"
                )
            if result.reason == Reason.SET_FULL:
                raise SlotsFull()
            if result.reason == Reason.TOKEN_MISMATCH:
                raise IdempotencyKeyReused()
            if result.reason == Reason.MISSING:
                raise NotFound(f"resource {resource.resource_id!r} not found")
            raise IntegrityError(f"unexpected rejection {result.reason!r}")
        if result.outcome is Outcome.CONTENTION:
            raise ContentionError(
                f"resource {resource.resource_id!r} is busy; retry the same request (same Idempotency-Key)",
                command=reserve_command(approach, resource.resource_id, quantity, record),
            )
        if result.outcome is Outcome.AMBIGUOUS:
            if claimed:
                self._settle_claim(rid, UNKNOWN, None)
            raise AmbiguousOutcome(
                f"reservation {rid} may or may not hold {quantity} of {resource.resource_id!r} "
                f"(strategy {resource.strategy!r} cannot tell after a failure with an unknown outcome)"
            )
        request_id = str(record["requestId"])
        if approach.writes_record:  # the marker is the record
            if result.outcome is Outcome.APPLIED:
                return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
            found = value.get("marker")
            marker = found if isinstance(found, Record) else None
            status = marker.status if marker is not None else CONFIRMED
            return Reservation(marker is not None and marker.request_id == request_id, public_reservation(rid, quantity, status), result)
        taken = value.get("allocation")
        allocation: dict[str, int] | None = taken if isinstance(taken, dict) else None
        if claimed:
            self._settle_claim(rid, CONFIRMED, allocation, request_id=request_id)
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        if allocation is None:
            existing = self.store.record(rid)
            if existing is not None:
                return self._replay(existing, quantity, request_id, result)
            raise ContentionError(
                "the original request with this Idempotency-Key is still completing; retry it",
                command=reserve_command(approach, resource.resource_id, quantity, record),
            )
        created, stored = self._put_record(rid, record, quantity, allocation)
        if created:  # the record's conditional Put is the arbiter: exactly one twin answers 201
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        return self._replay(stored, quantity, request_id, result)

    def _replay(self, existing: Record, quantity: int, request_id: str, result: Result | None = None) -> Reservation:
        """Answer from the stored record: this request's own (``created``), or an earlier one's."""
        if existing.quantity != quantity:
            raise IdempotencyKeyReused()
        rid, status = existing.reservation_id, existing.status
        if status is PENDING and existing.created_at > time.time() - CLAIM_SECONDS:
            raise ContentionError("the original request with this Idempotency-Key is still completing; retry it")
        if status in (PENDING, UNKNOWN):
            raise AmbiguousOutcome(f"reservation {rid} may or may not hold {quantity}: its request's outcome is unknown")
        return Reservation(existing.request_id == request_id, public_reservation(rid, quantity, status), result)

    def _put_record(
        self, rid: str, record: dict[str, object], quantity: int, allocation: dict[str, int] | None, *, status: Status = CONFIRMED
    ) -> tuple[bool, Record]:
        """Put the record unless one exists; returns (created by this request, the stored record).
        No TTL: a hold never expires (only a released record does)."""
        put = record_put(self.table_name, rid, quantity, allocation, record, status)
        answer = self.store.put_record(put, str(record["requestId"]))
        if answer is None or answer[1] is None:
            raise ContentionError("could not store the reservation record; retry the same request (same Idempotency-Key)")
        return answer[0], answer[1]

    def _settle_claim(self, rid: str, status: Status, allocation: dict[str, int] | None, *, request_id: str | None = None) -> None:
        """PENDING -> CONFIRMED (with the allocation) or UNKNOWN; ``allocation`` None and
        CONFIRMED: nothing was taken, drop the claim (best effort: a claim left behind reads as
        UNKNOWN after CLAIM_SECONDS). Conditioned on PENDING, so a settled claim is never settled
        twice (a re-send after an unknown outcome fails harmlessly).

        Taken but the confirmation busy: only this request knows the allocation (atomic/occ
        remember no request, so a re-send cannot find it), so the confirmation itself is
        deferred (``settle_claim``, replayed by the retry worker): 202 with an operation, and
        re-sends of the key answer 200 once it is applied. Without a retry queue: 503."""
        if status is CONFIRMED and allocation is None:
            self.store.drop_claim(rid)
            return
        if self.store.settle_claim(rid, status, allocation) is Outcome.CONTENTION:
            command = None
            if status is CONFIRMED and allocation is not None:
                payload: JSONObject = {"reservationId": rid, "allocation": dict(allocation)}
                command = Command("settle_claim", payload, request_id or new_request_id())
            raise ContentionError(
                f"reservation {rid} was taken but its confirmation is busy; it completes from the retry queue", command=command
            )

    def get_reservation(self, resource_id: str, rid: str, *, caller: Caller | None = None) -> Body:
        record = self.store.record(rid)
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.resource_id != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.owner, "read this reservation", missing)
        body: Body = {**public_reservation(rid, record.quantity, record.status), "resourceId": resource_id, "createdAt": record.created_at}
        if record.released_at is not None:
            body["releasedAt"] = record.released_at
        return body

    def release(self, resource_id: str, rid: str, *, caller: Caller | None = None, request_id: str | None = None) -> Reservation:
        """Give the quantity back exactly once; a second release is a no-op (``created`` False).
        With a ``caller``, only the reservation's owner (or an admin) may: checked on the read
        that precedes every write (the owner never changes), so a refusal writes nothing; it
        answers 404 as for a missing reservation."""
        resource = self.resource(resource_id)
        record = self.store.record(rid)
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.resource_id != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.owner, "release this reservation", missing)
        request_id = request_id or new_request_id()
        quantity = record.quantity
        if record.status is RELEASED:  # this request's own release (a re-drive), or an earlier one
            return Reservation(record.released_by == request_id, public_reservation(rid, quantity, RELEASED))
        if record.status is UNKNOWN:
            raise IntegrityError(
                f"reservation {rid!r} may or may not hold {quantity} ({resource.strategy} cannot tell): it cannot be released"
            )
        if record.status is not CONFIRMED:
            self._replay(record, quantity, request_id)  # PENDING: still completing (503), or left by a caller that died
        approach = self.approach(resource.strategy)
        gives = [approach.release_update(resource.key_for(pk), part, rid) for pk, part in (record.allocation or {}).items()]
        taken = self.store.release(rid, request_id, self.released_ttl_seconds, gives)
        result = Result(taken.outcome, capacity=taken.capacity, attempts=taken.attempts)
        if taken.outcome is Outcome.APPLIED:
            return Reservation(True, public_reservation(rid, quantity, RELEASED), result)
        if taken.outcome is Outcome.REJECTED:
            if taken.record_failed:  # released meanwhile: by this request's lost attempt, or another
                mine = taken.record is not None and taken.record.released_by == request_id
                return Reservation(mine, public_reservation(rid, quantity, RELEASED), result)
            raise IntegrityError(f"reservation {rid!r} is confirmed but its counter cannot give {quantity} back")
        # Safe to re-drive on every strategy: the record's CONFIRMED -> RELEASED guard gives back once.
        raise ContentionError(f"reservation {rid!r} is busy; retry the release", command=release_command(resource_id, rid, request_id))

    # -- deferred commands (SQS-driven retries; the payloads are in reservation_commands) --------
    def replayables(self) -> dict[str, Replayable]:
        """The deferred reserve/release commands the retry worker replays."""
        return {
            "reserve": Replayable(ReservePayload, self._replay_reserve),
            "release": Replayable(ReleasePayload, self._replay_release),
            "settle_claim": Replayable(SettleClaimPayload, self._replay_settle_claim),
        }

    def _replay_settle_claim(self, p: SettleClaimPayload, command: Command) -> Verdict:
        """A claim whose take applied, confirmed with its allocation (see :meth:`_settle_claim`)."""
        record = self.store.record(p.reservationId)
        if record is None:
            return Verdict("REJECTED", {"error": "not_found", "message": f"reservation {p.reservationId!r} not found"})
        if record.status == PENDING:
            self._settle_claim(p.reservationId, CONFIRMED, p.allocation)  # conditioned on PENDING: a redelivery changes nothing
            return Verdict("APPLIED", public_reservation(p.reservationId, record.quantity, CONFIRMED))
        if record.status in (CONFIRMED, RELEASED) and record.allocation == p.allocation:
            # confirmed already: by this request (its in-line confirmation committed, its answer lost) or another's
            mine = record.request_id == command.operation_id
            return Verdict("APPLIED" if mine else "DUPLICATE", public_reservation(p.reservationId, record.quantity, record.status))
        return Verdict("REJECTED", {"error": "conflict", "message": f"reservation {p.reservationId!r} is {record.status}"})

    def _replay_reserve(self, p: ReservePayload, command: Command) -> Verdict:
        try:
            answer = self.reserve(p.resourceId, p.quantity, p.idempotencyKey, owner=p.owner, request_id=command.operation_id)
        except (InsufficientCapacity, SlotsFull, IdempotencyKeyReused, NotFound, InvalidRequest) as exc:
            return Verdict("REJECTED", {"error": exc.code, "message": exc.message})
        return Verdict("APPLIED" if answer.created else "DUPLICATE", answer.body)

    def _replay_release(self, p: ReleasePayload, command: Command) -> Verdict:
        try:
            answer = self.release(p.resourceId, p.reservationId, request_id=command.operation_id)
        except NotFound as exc:
            return Verdict("REJECTED", {"error": exc.code, "message": exc.message})
        return Verdict("APPLIED" if answer.created else "DUPLICATE", {**answer.body, "changed": answer.created})


def public_reservation(rid: str, quantity: int, status: Status) -> Body:
    return {"reservationId": rid, "quantity": quantity, "status": str(status)}
