"""Resources with a capacity and reservations against it, on any approach of seed 02.

| item | PK | SK |
|---|---|---|
| resource | ``RES#<id>`` | ``META``: capacity, strategy, shards; the counter itself when unsharded |
| shard | ``RES#<id>#<n>`` | ``SHARD``: a share of the capacity (write sharding) |
| reservation | ``RSV#<reservationId>`` | ``RSV``: quantity, status, allocation, ``requestId`` (the marker of approach 5) |

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
from counters.core.client import client, from_item, to_item
from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.engine import Report, Stop, read, run, transact
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
from counters.core.failures import Classified, RetryPolicy
from counters.core.ids import valid_id
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings, SettingsError, env
from counters.primitives import sharding
from counters.primitives.approaches import AVAILABLE, NAMES, RESERVED, Approach, create, record_key

NAMESPACE = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
CONFIRMED, RELEASED = "CONFIRMED", "RELEASED"
PENDING, UNKNOWN = "PENDING", "UNKNOWN"  # atomic/occ with a key: claimed, not yet applied / outcome unknown
RELEASED_TTL_SECONDS = 30 * 24 * 3600
"""How long a released record is kept (it answers replays of the release and of its key)."""
CLAIM_SECONDS = 120
"""A claim still PENDING after this long was left by a caller that died (functions time out sooner)."""

# Condition fragments
IS_NEW = "attribute_not_exists(#pk)"  # never overwrite a resource, shard or reservation record
IS_CONFIRMED = "#status = :confirmed"  # a reservation gives its quantity back once
IS_PENDING = "#status = :pending"  # only the claim's own request settles it


def resource_key(resource_id: str) -> dict[str, str]:
    return {"PK": f"RES#{resource_id}", "SK": "META"}


def reservation_id(resource_id: str, idempotency_key: str, owner: str | None = None) -> str:
    """Deterministic per (resource, key) - and per owner when authorization is on, so one
    user's key never answers with another user's reservation."""
    scope = f"{resource_id}\n{idempotency_key}" if owner is None else f"{resource_id}\n{owner}\n{idempotency_key}"
    return str(uuid.uuid5(NAMESPACE, scope))


@dataclass
class Resource:
    resource_id: str
    capacity: int
    strategy: str
    shards: int

    @property
    def counter_keys(self) -> list[dict[str, str]]:
        if self.shards == 1:
            return [resource_key(self.resource_id)]
        return [sharding.shard_key(self.resource_id, n) for n in range(self.shards)]

    def key_for(self, pk: str) -> dict[str, str]:
        return next(key for key in self.counter_keys if key["PK"] == pk)


@dataclass
class Reservation:
    """The answer to a take: ``created`` (201) or a replay (200), the public body, the result."""

    created: bool
    body: dict[str, Any]
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
        dynamodb: Any = None,
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

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def approach(self, name: str) -> Approach:
        if name not in self._approaches:
            self._approaches[name] = create(name, self.table_name, dynamodb=self._dynamodb, retry=self.retry, **self.options.get(name, {}))
        return self._approaches[name]

    # -- resources -------------------------------------------------------------------------------
    def create_resource(self, resource_id: str, *, capacity: int, strategy: str, shards: int = 1) -> dict[str, Any]:
        if strategy not in NAMES:
            raise InvalidRequest(f"strategy must be one of {', '.join(NAMES)}")
        approach = self.approach(strategy)
        if shards > 1 and not approach.shardable:
            raise InvalidRequest(f"strategy {strategy!r} does not support shards > 1 (shardable: atomic, crt, marker)")
        if not 1 <= shards <= sharding.MAX_SHARDS or capacity < 0:
            raise InvalidRequest(f"shards must be 1..{sharding.MAX_SHARDS} and capacity >= 0")
        meta = {
            **resource_key(resource_id),
            "resourceId": resource_id,
            "capacity": capacity,
            "strategy": strategy,
            "shards": shards,
            "createdAt": int(time.time()),
        }
        resource = Resource(resource_id, capacity, strategy, shards)
        puts = []
        if shards == 1:
            puts.append({**meta, **approach.initial_attributes(capacity)})
        else:
            puts.append(meta)
            for key, share in zip(resource.counter_keys, sharding.split_capacity(capacity, shards), strict=True):
                puts.append({**key, "resourceId": resource_id, "capacity": share, **approach.initial_attributes(share)})
        items = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": to_item(item),
                    "ConditionExpression": IS_NEW,
                    "ExpressionAttributeNames": {"#pk": "PK"},
                }
            }
            for item in puts
        ]
        report = transact(items, policy=self.retry, dynamodb=self._dynamodb)
        if report.outcome is Outcome.REJECTED:
            raise AlreadyExists(f"resource {resource_id!r} already exists")
        if report.outcome is not Outcome.APPLIED:
            raise ContentionError()
        return self._public_resource(resource, 0, capacity)

    def resource(self, resource_id: str) -> tuple[Resource, dict[str, Any]]:
        item, _ = self._get(resource_key(resource_id))
        if item is None:
            raise NotFound(f"resource {resource_id!r} not found")
        return Resource(resource_id, int(item["capacity"]), item["strategy"], int(item["shards"])), item

    def get_resource(self, resource_id: str) -> dict[str, Any]:
        """The resource; a sharded one reads as the sum of one consistent snapshot of its shards."""
        resource, item = self.resource(resource_id)
        if resource.shards == 1:
            return self._public_resource(resource, int(item[RESERVED]), int(item[AVAILABLE]))
        shards = sharding.snapshot(self.dynamodb, self.table_name, resource.counter_keys, Capacity(), self.retry)
        return self._public_resource(resource, sum(int(s[RESERVED]) for s in shards), sum(int(s[AVAILABLE]) for s in shards))

    @staticmethod
    def _public_resource(resource: Resource, reserved: int, available: int) -> dict[str, Any]:
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
        resource, _ = self.resource(resource_id)
        approach = self.approach(resource.strategy)
        if approach.needs_token and not idempotency_key:
            raise InvalidRequest(f"the Idempotency-Key header is required for strategy {resource.strategy!r}")
        request_id = request_id or new_request_id()
        rid = reservation_id(resource_id, idempotency_key, owner) if idempotency_key else str(uuid.uuid4())
        record = {"reservationId": rid, "resourceId": resource_id, "strategy": resource.strategy, "requestId": request_id}
        if owner is not None:
            record["owner"] = owner
        if idempotency_key:
            record["idempotencyKey"] = idempotency_key
            existing, _ = self._get(record_key(rid))
            if existing is not None:
                return self._replay(existing, quantity, request_id)
            if not approach.needs_token:  # nothing else remembers the key: claim it before taking anything
                claimed, existing = self._put_record(rid, {**record, "quantity": quantity}, status=PENDING)
                if not claimed:
                    return self._replay(existing, quantity, request_id)
        if resource.shards == 1:
            result = approach.apply(resource.counter_keys[0], quantity, token=rid, record=record)
            if result.outcome.succeeded:  # unsharded: the one counter item holds it, whoever applied it
                result.value = {"allocation": {resource.counter_keys[0]["PK"]: quantity}, **(result.value or {})}
        else:
            result = sharding.take(approach, resource.counter_keys, quantity, token=rid, record=record, rng=self.rng)
        claimed = bool(idempotency_key) and not approach.needs_token
        try:
            return self._answer(approach, resource, rid, quantity, record, result, claimed)
        except Exception:
            if claimed and result.outcome in (Outcome.REJECTED, Outcome.CONTENTION):
                self._settle_claim(rid, None)  # nothing was taken: free the key
            raise

    def _answer(
        self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, Any], result: Result, claimed: bool
    ) -> Reservation:
        value = result.value or {}
        if result.outcome is Outcome.REJECTED:
            if result.reason in ("threshold", "sold_out"):
                raise InsufficientCapacity(
                    f"resource {resource.resource_id!r} has {value.get(AVAILABLE, 'too little')} left; asked for {quantity}"
                )
            if result.reason == "set_full":
                raise SlotsFull()
            if result.reason == "token_mismatch":
                raise IdempotencyKeyReused()
            if result.reason == "missing":
                raise NotFound(f"resource {resource.resource_id!r} not found")
            raise IntegrityError(f"unexpected rejection {result.reason!r}")
        if result.outcome is Outcome.CONTENTION:
            raise ContentionError(
                f"resource {resource.resource_id!r} is busy; retry the same request (same Idempotency-Key)",
                command=self._reserve_command(approach, resource.resource_id, quantity, record),
            )
        if result.outcome is Outcome.AMBIGUOUS:
            if claimed:
                self._settle_claim(rid, None, status=UNKNOWN)
            raise AmbiguousOutcome(
                f"reservation {rid} may or may not hold {quantity} of {resource.resource_id!r} "
                f"(strategy {resource.strategy!r} cannot tell after a failure with an unknown outcome)"
            )
        request_id = record["requestId"]
        if approach.writes_record:  # the marker is the record
            if result.outcome is Outcome.APPLIED:
                return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
            marker = value.get("marker", {})
            return Reservation(
                marker.get("requestId") == request_id, public_reservation(rid, quantity, marker.get("status", CONFIRMED)), result
            )
        allocation = value.get("allocation")
        if claimed:
            self._settle_claim(rid, allocation, request_id=request_id)
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        if allocation is None:
            existing, _ = self._get(record_key(rid))
            if existing is not None:
                return self._replay(existing, quantity, request_id, result)
            raise ContentionError(
                "the original request with this Idempotency-Key is still completing; retry it",
                command=self._reserve_command(approach, resource.resource_id, quantity, record),
            )
        created, existing = self._put_record(rid, {**record, "quantity": quantity, "allocation": allocation})
        if created:  # the record's conditional Put is the arbiter: exactly one twin answers 201
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        return self._replay(existing, quantity, request_id, result)

    def _replay(self, existing: dict[str, Any], quantity: int, request_id: str, result: Result | None = None) -> Reservation:
        """Answer from the stored record: this request's own (``created``), or an earlier one's."""
        if int(existing["quantity"]) != quantity:
            raise IdempotencyKeyReused()
        rid, status = existing["reservationId"], existing["status"]
        if status == PENDING and int(existing.get("createdAt", 0)) > time.time() - CLAIM_SECONDS:
            raise ContentionError("the original request with this Idempotency-Key is still completing; retry it")
        if status in (PENDING, UNKNOWN):
            raise AmbiguousOutcome(f"reservation {rid} may or may not hold {quantity}: its request's outcome is unknown")
        return Reservation(existing.get("requestId") == request_id, public_reservation(rid, quantity, status), result)

    def _put_record(self, rid: str, record: dict[str, Any], *, status: str = CONFIRMED) -> tuple[bool, dict[str, Any]]:
        """Put the record unless one exists; returns (created by this request, the stored record).
        No TTL: a hold never expires (only a released record does)."""
        item = {**record_key(rid), **record, "status": status, "createdAt": int(time.time())}
        params = {
            "TableName": self.table_name,
            "Item": to_item(item),
            "ConditionExpression": IS_NEW,
            "ExpressionAttributeNames": {"#pk": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

        def exists(_report: Report, failure: Classified) -> Stop:
            stored = from_item(failure.old_item(0)) or {}
            # this request's own Put (an attempt whose answer was lost) carries its id
            return Stop((stored.get("requestId") == record["requestId"], stored))

        report = run(self.dynamodb.put_item, params, policy=self.retry, write=True, on_condition=exists)
        if report.stopped:
            return report.value
        if report.outcome is Outcome.APPLIED:
            return True, item
        raise ContentionError("could not store the reservation record; retry the same request (same Idempotency-Key)")

    def _settle_claim(self, rid: str, allocation: dict[str, int] | None, *, status: str = CONFIRMED, request_id: str | None = None) -> None:
        """PENDING -> CONFIRMED (with the allocation) or UNKNOWN; ``allocation`` None and
        CONFIRMED: nothing was taken, drop the claim. Conditioned on PENDING, so a settled
        claim is never settled twice (a re-send after an unknown outcome fails harmlessly).

        Taken but the confirmation busy: only this request knows the allocation (atomic/occ
        remember no request, so a re-send cannot find it), so the confirmation itself is
        deferred (``settle_claim``, replayed by the retry worker): 202 with an operation, and
        re-sends of the key answer 200 once it is applied. Without a retry queue: 503."""
        key = to_item(record_key(rid))
        condition = {"ConditionExpression": IS_PENDING, "ExpressionAttributeNames": {"#status": "status"}}
        if status == CONFIRMED and allocation is None:
            params = {"TableName": self.table_name, "Key": key, **condition, "ExpressionAttributeValues": to_item({":pending": PENDING})}
            run(self.dynamodb.delete_item, params, policy=self.retry, write=True)
            return  # best effort: a claim left behind reads as UNKNOWN after CLAIM_SECONDS
        values: dict[str, Any] = {":pending": PENDING, ":status": status}
        update = "SET #status = :status"
        if allocation is not None:
            values[":allocation"] = allocation
            update += ", #allocation = :allocation"
            condition["ExpressionAttributeNames"]["#allocation"] = "allocation"
        params = {
            "TableName": self.table_name,
            "Key": key,
            "UpdateExpression": update,
            **condition,
            "ExpressionAttributeValues": to_item(values),
        }
        report = run(self.dynamodb.update_item, params, policy=self.retry, write=True)
        if report.outcome is Outcome.CONTENTION:
            command = None
            if status == CONFIRMED and allocation is not None:
                command = Command("settle_claim", {"reservationId": rid, "allocation": allocation}, request_id or new_request_id())
            raise ContentionError(
                f"reservation {rid} was taken but its confirmation is busy; it completes from the retry queue", command=command
            )

    def get_reservation(self, resource_id: str, rid: str, *, caller: Caller | None = None) -> dict[str, Any]:
        item, _ = self._get(record_key(rid))
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if item is None or item.get("resourceId") != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(item.get("owner"), "read this reservation", missing)
        body = {
            **public_reservation(rid, int(item["quantity"]), item["status"]),
            "resourceId": resource_id,
            "createdAt": item.get("createdAt"),
        }
        if "releasedAt" in item:
            body["releasedAt"] = item["releasedAt"]
        return body

    def release(self, resource_id: str, rid: str, *, caller: Caller | None = None, request_id: str | None = None) -> Reservation:
        """Give the quantity back exactly once; a second release is a no-op (``created`` False).
        With a ``caller``, only the reservation's owner (or an admin) may: checked on the read
        that precedes every write (the owner never changes), so a refusal writes nothing; it
        answers 404 as for a missing reservation."""
        resource, _ = self.resource(resource_id)
        record, _ = self._get(record_key(rid))
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.get("resourceId") != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.get("owner"), "release this reservation", missing)
        request_id = request_id or new_request_id()
        quantity = int(record["quantity"])
        if record["status"] == RELEASED:  # this request's own release (a re-drive), or an earlier one
            return Reservation(record.get("releasedBy") == request_id, public_reservation(rid, quantity, RELEASED))
        if record["status"] == UNKNOWN:
            raise IntegrityError(
                f"reservation {rid!r} may or may not hold {quantity} ({resource.strategy} cannot tell): it cannot be released"
            )
        if record["status"] != CONFIRMED:
            self._replay(record, quantity, request_id)  # PENDING: still completing (503), or left by a caller that died
        approach = self.approach(resource.strategy)
        now = int(time.time())
        items = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": to_item(record_key(rid)),
                    # who released it (a re-drive of this request knows it was its own), and the TTL starts
                    "UpdateExpression": "SET #status = :released, #releasedAt = :now, #releasedBy = :request, #expiresAt = :expires",
                    "ConditionExpression": IS_CONFIRMED,
                    "ExpressionAttributeNames": {
                        "#status": "status",
                        "#releasedAt": "releasedAt",
                        "#releasedBy": "releasedBy",
                        "#expiresAt": "expiresAt",
                    },
                    "ExpressionAttributeValues": to_item(
                        {
                            ":released": RELEASED,
                            ":confirmed": CONFIRMED,
                            ":now": now,
                            ":request": request_id,
                            ":expires": now + self.released_ttl_seconds,
                        }
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        ]
        items += [approach.release_action(resource.key_for(pk), int(part), rid) for pk, part in record["allocation"].items()]
        report = transact(items, policy=self.retry, dynamodb=self._dynamodb)
        result = Result(report.outcome, capacity=report.capacity, attempts=report.attempts)
        if report.outcome is Outcome.APPLIED:
            return Reservation(True, public_reservation(rid, quantity, RELEASED), result)
        if report.outcome is Outcome.REJECTED and report.failure is not None:
            if 0 in report.failure.failed_conditions():  # released meanwhile: by this request's lost attempt, or another
                stored = from_item(report.failure.old_item(0)) or {}
                return Reservation(stored.get("releasedBy") == request_id, public_reservation(rid, quantity, RELEASED), result)
            raise IntegrityError(f"reservation {rid!r} is confirmed but its counter cannot give {quantity} back")
        # Safe to re-drive on every strategy: the record's CONFIRMED -> RELEASED guard gives back once.
        command = Command("release", {"resourceId": resource_id, "reservationId": rid}, request_id)
        raise ContentionError(f"reservation {rid!r} is busy; retry the release", command=command)

    # -- deferred commands (SQS-driven retries) -------------------------------------------------
    @staticmethod
    def _reserve_command(approach: Approach, resource_id: str, quantity: int, record: dict[str, Any]) -> Command | None:
        """Only exact, token-remembering approaches are re-driven; atomic/occ never blindly."""
        key = record.get("idempotencyKey")
        if not (approach.exact and approach.needs_token and key):
            return None
        payload = {"resourceId": resource_id, "quantity": quantity, "idempotencyKey": key, "owner": record.get("owner")}
        return Command("reserve", payload, record["requestId"])

    def replayables(self) -> dict[str, Replayable]:
        """The deferred reserve/release commands the retry worker replays."""
        return {
            "reserve": Replayable(ReservePayload, self._replay_reserve),
            "release": Replayable(ReleasePayload, self._replay_release),
            "settle_claim": Replayable(SettleClaimPayload, self._replay_settle_claim),
        }

    def _replay_settle_claim(self, p: SettleClaimPayload, command: Command) -> Verdict:
        """A claim whose take applied, confirmed with its allocation (see :meth:`_settle_claim`)."""
        record, _ = self._get(record_key(p.reservationId))
        if record is None:
            return Verdict("REJECTED", {"error": "not_found", "message": f"reservation {p.reservationId!r} not found"})
        body = public_reservation(p.reservationId, int(record["quantity"]), CONFIRMED)
        if record["status"] == PENDING:
            self._settle_claim(p.reservationId, p.allocation)  # conditioned on PENDING: a redelivery changes nothing
            return Verdict("APPLIED", body)
        if record["status"] in (CONFIRMED, RELEASED) and record.get("allocation") == p.allocation:
            return Verdict("DUPLICATE", public_reservation(p.reservationId, int(record["quantity"]), record["status"]))
        return Verdict("REJECTED", {"error": "conflict", "message": f"reservation {p.reservationId!r} is {record['status']}"})

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

    def _get(self, key: dict[str, str]) -> tuple[dict[str, Any] | None, Capacity]:
        capacity = Capacity()
        response = read(self.dynamodb.get_item, self.retry, capacity, TableName=self.table_name, Key=to_item(key), ConsistentRead=True)
        return from_item(response.get("Item")), capacity


@dataclass(frozen=True)
class ReservePayload:
    """A deferred take."""

    resourceId: str
    quantity: int
    idempotencyKey: str
    owner: str | None = None

    def __post_init__(self) -> None:
        require(valid_id(self.resourceId), "invalid resourceId")
        require(isinstance(self.quantity, int) and not isinstance(self.quantity, bool) and self.quantity >= 1, "invalid quantity")
        require(isinstance(self.idempotencyKey, str) and bool(self.idempotencyKey), "invalid idempotencyKey")
        require(self.owner is None or (isinstance(self.owner, str) and bool(self.owner)), "invalid owner")


@dataclass(frozen=True)
class SettleClaimPayload:
    """A deferred confirmation of an atomic/occ claim whose take applied."""

    reservationId: str
    allocation: dict[str, int]

    def __post_init__(self) -> None:
        require(valid_id(self.reservationId), "invalid reservationId")
        require(
            isinstance(self.allocation, dict)
            and bool(self.allocation)
            and all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 1 for k, v in self.allocation.items()),
            "invalid allocation",
        )


@dataclass(frozen=True)
class ReleasePayload:
    """A deferred give-back."""

    resourceId: str
    reservationId: str

    def __post_init__(self) -> None:
        require(valid_id(self.resourceId) and valid_id(self.reservationId), "invalid resourceId/reservationId")


def public_reservation(rid: str, quantity: int, status: str) -> dict[str, Any]:
    return {"reservationId": rid, "quantity": quantity, "status": status}
