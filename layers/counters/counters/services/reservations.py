"""Resources with a capacity and reservations against it, on any approach of seed 02.

The items (resource ``RES#<id>``/``META``, shards ``RES#<id>#<n>``/``SHARD``, reservation records
``RSV#<reservationId>``/``RSV``), their requests and the calls are in
[`counters.store.resources`][counters.store.resources]; the deferred commands in [`reservation_commands`][counters.services.reservation_commands]. This
service orchestrates.

The reservation id is ``uuid5(resourceId, Idempotency-Key)`` when a key is given (so a
redelivered request maps to the same reservation, and the id doubles as the approach's
request token), a random uuid otherwise.

Take (``reserve``): the reservation record is read first (a replay of a known key is answered
from it: same quantity -> the same reservation, other quantity -> 422); then the approach
applies the quantity (through [`counters.primitives.sharding`][counters.primitives.sharding] when sharded); then - for every
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
as ``UNKNOWN`` after [`CLAIM_SECONDS`][counters.services.reservations.CLAIM_SECONDS].

Every record carries the ``requestId`` of the request that wrote it, so a re-drive of the same
request (the retry worker, or an attempt whose answer was lost) tells "mine" (201 / APPLIED)
from "an earlier request's" (200 / DUPLICATE).

Holds never expire: a ``CONFIRMED`` record has no TTL (a TTL deleting it would strand its
quantity: release would answer 404 and the count would keep it forever). Only a ``RELEASED``
record gets one (``expiresAt``, [`RELEASED_TTL_SECONDS`][counters.services.reservations.RELEASED_TTL_SECONDS] by default).

Global tables (docs/reservations.md, "Global tables"): on MREC each Region owns an escrowed share
of the capacity and its own reservation records, takes draw on the local share only, and
[`Reservations.transfer`][counters.services.reservations.Reservations.transfer] / [`Reservations.receive_transfers`][counters.services.reservations.Reservations.receive_transfers] move units between shares in
two idempotent steps; on MRSC the transaction-based strategies and sharding are refused, and a
release takes three single-item steps.

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
from typing import Any, Generic, NotRequired, TypedDict, TypeVar

from counters.core.caller import Caller
from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, new_request_id
from counters.core.errors import (
    AlreadyExists,
    AmbiguousOutcome,
    ContentionError,
    IdempotencyKeyInFlight,
    IdempotencyKeyMissing,
    IdempotencyKeyReused,
    InsufficientCapacity,
    IntegrityError,
    InvalidRequest,
    NotFound,
    SlotsFull,
    UnsupportedInMode,
)
from counters.core.failures import RetryPolicy
from counters.core.json import JSONObject
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.regions import REGION_ATTRIBUTE, GlobalTableMode, RegionSettings, Topology
from counters.core.settings import SettingsError, env
from counters.primitives import sharding
from counters.primitives.approaches import NAMES, Approach, Reason, create
from counters.services.reservation_commands import ReleasePayload, ReservePayload, SettleClaimPayload, release_command, reserve_command
from counters.store.resources import (
    MAX_SHARDS,
    QUANTITY,
    REQUEST_ID,
    SHARES,
    SOURCE,
    TARGET,
    Counter,
    Key,
    Record,
    Resource,
    ResourceStore,
    Status,
    record_put,
    resource_key,
    transfer_id,
    transfer_put,
)

NAMESPACE = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
CONFIRMED, RELEASED, PENDING, UNKNOWN, RELEASING = Status.CONFIRMED, Status.RELEASED, Status.PENDING, Status.UNKNOWN, Status.RELEASING
MRSC = GlobalTableMode.MRSC
TRANSACTIONAL = {
    "crt": "its take is a TransactWriteItems with a ClientRequestToken",
    "marker": "its take writes the marker and the counter in one TransactWriteItems",
}
"""The strategies MRSC refuses (it has no transaction APIs); the others take with one conditional write."""
SHARDED_WHY = "a sharded take splits over shards in one TransactWriteItems and reads them with TransactGetItems"
RELEASED_TTL_SECONDS = 30 * 24 * 3600
"""How long a released record is kept (it answers replays of the release and of its key)."""
CLAIM_SECONDS = 120
"""A claim still PENDING after this long was left by a caller that died (functions time out sooner)."""
INSUFFICIENT = (Reason.THRESHOLD, sharding.ShardReason.SOLD_OUT)
ESCROWED_CACHE = 1024
"""How many escrowed resources' META a service keeps (oldest dropped first)."""


class RegionShare(TypedDict):
    """One Region's share of an escrowed resource, as this Region's replica holds it."""

    capacity: int
    reserved: int
    available: int


class PublicResource(TypedDict):
    """A resource as the API shows it ([Reservations.get_resource][counters.services.reservations.Reservations.get_resource]).
    `regions` and `inFlight` are present for an escrowed resource (an MREC global table) only."""

    resourceId: str
    capacity: int
    reserved: int
    available: int
    strategy: str
    shards: int
    regions: NotRequired[dict[str, RegionShare]]
    """Each Region's share."""
    inFlight: NotRequired[int]
    """Units sent between Regions and not received yet."""


class PublicReservation(TypedDict):
    """A reservation as a take or a release answers it: `status` is `CONFIRMED` or `RELEASED`."""

    reservationId: str
    quantity: int
    status: str


class ReservationDetails(PublicReservation):
    """A reservation as [Reservations.get_reservation][counters.services.reservations.Reservations.get_reservation]
    reads it: `releasedAt` is present once it is released."""

    resourceId: str
    createdAt: int
    releasedAt: NotRequired[int]


Transferred = TypedDict(
    "Transferred",
    {"transferId": str, "resourceId": str, "from": str, "to": str, "quantity": int, "status": str},
)
"""Units sent to another Region ([Reservations.transfer][counters.services.reservations.Reservations.transfer]):
`from` is this Region, `to` the receiving one, `status` `SENT` (`from` is a keyword: the functional
form of `TypedDict`)."""

_B = TypeVar("_B", PublicReservation, Transferred)


def reservation_id(resource_id: str, idempotency_key: str, owner: str | None = None) -> str:
    """Deterministic per (resource, key) - and per owner when authorization is on, so one
    user's key never answers with another user's reservation."""
    scope = f"{resource_id}\n{idempotency_key}" if owner is None else f"{resource_id}\n{owner}\n{idempotency_key}"
    return str(uuid.uuid5(NAMESPACE, scope))


@dataclass
class Reservation(Generic[_B]):
    """The answer to a take: ``created`` (201) or a replay (200), the public body, the result.
    The body is a [PublicReservation][counters.services.reservations.PublicReservation] (a take, a
    release) or a [Transferred][counters.services.reservations.Transferred] (a transfer)."""

    created: bool
    body: _B
    result: Result | None = None


@dataclass(frozen=True, kw_only=True)
class ReservationSettings(RegionSettings):
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
        topology: Topology | None = None,
    ) -> None:
        self.table_name = table_name
        self.topology = topology or Topology()
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()
        self.store = ResourceStore(table_name, dynamodb=dynamodb, retry=self.retry, topology=self.topology)
        self.store.region = self.topology.region if self.topology.eventual else ""  # MREC: each Region its own records
        self.options: dict[str, dict[str, Any]] = {
            "atomic": {"policy": atomic_policy},
            "occ_history": {"history": history},
            "set": {"max_tokens": max_tokens},
        }
        self.released_ttl_seconds = released_ttl_seconds
        self.rng = rng or random.Random()
        self._approaches: dict[str, Approach] = {}
        self._escrowed: dict[str, Resource] = {}

    @classmethod
    def from_settings(cls, settings: ReservationSettings) -> Reservations:
        """The service on the settings' table with the settings' atomic policy and Regions."""
        return cls(settings.table_name, retry=settings.retry, atomic_policy=settings.atomic_policy, topology=settings.topology)

    def approach(self, name: str) -> Approach:
        """The approach ``name``, made on first use and kept."""
        if name not in self._approaches:
            made = create(name, self.table_name, dynamodb=self._dynamodb, retry=self.retry, **self.options.get(name, {}))
            made.store.region = self.store.region  # marker's and crt's records are written by the take
            self._approaches[name] = made
        return self._approaches[name]

    # -- resources -------------------------------------------------------------------------------
    def refuse_in_mode(self, strategy: str, shards: int) -> None:
        """MRSC has no transaction APIs: the strategies whose take is a transaction, and write
        sharding, are refused (409 ``unsupported_in_region_mode``) at creation and at first call."""
        if strategy in TRANSACTIONAL:
            self.topology.refuse(f"strategy {strategy!r}", MRSC, why=TRANSACTIONAL[strategy])
        if shards > 1:
            self.topology.refuse("write sharding (shards > 1)", MRSC, why=SHARDED_WHY)

    def create_resource(
        self, resource_id: str, *, capacity: int, strategy: str, shards: int = 1, shares: dict[str, int] | None = None
    ) -> PublicResource:
        """A resource. On an MREC table its capacity is escrowed: ``shares`` (Region -> units,
        summing to ``capacity``; default an even split, the remainder to the first Regions) each
        become a share item only that Region writes."""
        if strategy not in NAMES:
            raise InvalidRequest(f"strategy must be one of {', '.join(NAMES)}")
        approach = self.approach(strategy)
        if shards > 1 and not approach.shardable:
            raise InvalidRequest(f"strategy {strategy!r} does not support shards > 1 (shardable: atomic, crt, marker)")
        if not 1 <= shards <= MAX_SHARDS or capacity < 0:
            raise InvalidRequest(f"shards must be 1..{MAX_SHARDS} and capacity >= 0")
        self.refuse_in_mode(strategy, shards)
        if self.topology.eventual:
            return self._create_escrowed(resource_id, capacity, approach, shards, shares)
        if shares is not None:
            raise InvalidRequest("shares split a capacity between the Regions of an MREC global table only")
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
        outcome = self.store.create_single(meta) if self.topology.mode is MRSC else self.store.create(meta, counters)
        return self._created(resource_id, outcome, resource)

    def _created(self, resource_id: str, outcome: Outcome, resource: Resource) -> PublicResource:
        if outcome is Outcome.REJECTED:
            raise AlreadyExists(f"resource {resource_id!r} already exists")
        if outcome is not Outcome.APPLIED:
            raise ContentionError()
        return self._public_resource(resource, 0, resource.capacity)

    def _create_escrowed(
        self, resource_id: str, capacity: int, approach: Approach, shards: int, shares: dict[str, int] | None
    ) -> PublicResource:
        """META (written once) and every Region's share items, in one transaction in this Region.
        A share item is written here once; after that only its own Region writes it, and only once
        it has seen it (every write is conditioned on ``attribute_exists``)."""
        regions = self.topology.regions
        if shares is None:
            shares = dict(zip(regions, sharding.split_capacity(capacity, len(regions)), strict=True))
        if sorted(shares) != list(regions) or any(n < 0 for n in shares.values()) or sum(shares.values()) != capacity:
            raise InvalidRequest(f"shares must give every Region {', '.join(regions)} a share >= 0, summing to the capacity {capacity}")
        if shards * len(regions) > MAX_SHARDS:
            raise InvalidRequest(f"shards x Regions must be <= {MAX_SHARDS} (one transaction creates them all)")
        meta: dict[str, object] = {
            **resource_key(resource_id),
            "resourceId": resource_id,
            "capacity": capacity,
            "strategy": approach.name,
            "shards": shards,
            SHARES: dict(shares),
            "createdAt": int(time.time()),
            REGION_ATTRIBUTE: self.topology.region,
        }
        resource = Resource(resource_id, capacity, approach.name, shards, shares=dict(shares))
        counters: list[tuple[Key, dict[str, object]]] = []
        for region in regions:
            for key, part in zip(resource.keys_in(region), sharding.split_capacity(shares[region], shards), strict=True):
                attributes = {"resourceId": resource_id, "capacity": part, REGION_ATTRIBUTE: region, **approach.initial_attributes(part)}
                counters.append((key, attributes))
        return self._created(resource_id, self.store.create(meta, counters), resource)

    def resource(self, resource_id: str) -> Resource:
        """The resource's META. An escrowed one's is cached: it is written once (its split, strategy
        and shards never change; the counts live in the shares), so a take reads it once per process."""
        cached = self._escrowed.get(resource_id)
        if cached is not None:
            return cached
        found = self.store.resource(resource_id, self.topology.writer)
        if found is not None and found.shares is not None:
            if len(self._escrowed) >= ESCROWED_CACHE:
                self._escrowed.pop(next(iter(self._escrowed)))
            self._escrowed[resource_id] = found
        if found is None:
            raise NotFound(f"resource {resource_id!r} not found")
        if self.topology.eventual and found.shares is None:
            raise UnsupportedInMode(
                f"resource {resource_id!r} has one counter for every Region (created before the table was global): "
                "on an MREC global table it would oversell (docs/reservations.md, Global tables)"
            )
        return found

    def get_resource(self, resource_id: str) -> PublicResource:
        """The resource; a sharded one reads as the sum of one consistent snapshot of its shards;
        an escrowed one as the sum of every Region's share as this Region's replica holds them
        (exact once replication has settled), with each Region's share and the transfers in flight."""
        resource = self.resource(resource_id)
        if resource.shares is not None:
            return self._escrow_view(resource)
        counters = [resource.counter or Counter()] if resource.shards == 1 else self.store.snapshot(resource.counter_keys, Capacity())
        return self._public_resource(resource, sum(c.reserved for c in counters), sum(c.available for c in counters))

    def _escrow_view(self, resource: Resource) -> PublicResource:
        regions: dict[str, RegionShare] = {}
        for region in sorted(resource.shares or {}):
            quotas = self.store.quotas(resource.keys_in(region), Capacity())
            regions[region] = {
                "capacity": sum(q for q, _ in quotas),
                "reserved": sum(c.reserved for _, c in quotas),
                "available": sum(c.available for _, c in quotas),
            }
        in_flight = sum(t.quantity for t in self.store.transfers(resource.resource_id) if not t.received)
        reserved = sum(r["reserved"] for r in regions.values())
        available = sum(r["available"] for r in regions.values())
        return {**self._public_resource(resource, reserved, available), "regions": dict(regions), "inFlight": in_flight}

    def shares_elsewhere(self, resource: Resource) -> dict[str, int]:
        """What every other Region has available, as this Region's replica last saw it (a hint)."""
        found = {}
        for region in sorted(resource.shares or {}):
            if region != resource.region:
                found[region] = sum(c.available for _, c in self.store.quotas(resource.keys_in(region), Capacity()))
        return {region: n for region, n in found.items() if n > 0}

    @staticmethod
    def _public_resource(resource: Resource, reserved: int, available: int) -> PublicResource:
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
    ) -> Reservation[PublicReservation]:
        """Take ``quantity``; ``owner`` (the verified caller, None with authorization off) is
        recorded, and only they (or an admin) may read or release the reservation (anyone
        else is answered as if it did not exist)."""
        if quantity < 1:
            raise InvalidRequest("quantity must be >= 1")
        resource = self.resource(resource_id)
        self.refuse_in_mode(resource.strategy, resource.shards)
        approach = self.approach(resource.strategy)
        if approach.needs_token and not idempotency_key:
            raise IdempotencyKeyMissing(
                f"the Idempotency-Key header is required for strategy {resource.strategy!r} (docs/retries.md#idempotency-keys)"
            )
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
        if self.topology.multi_region:
            record[REGION_ATTRIBUTE] = self.topology.region
        if idempotency_key:
            record["idempotencyKey"] = idempotency_key
            existing = self._known(rid)
            if existing is not None:
                return self._replay(existing, quantity, request_id)
            if not approach.needs_token:  # nothing else remembers the key: claim it before taking anything
                claimed, stored = self._put_record(rid, record, quantity, None, status=PENDING)
                if not claimed:
                    return self._replay(stored, quantity, request_id)
        result = self._take(approach, resource, rid, quantity, record)
        if resource.shares is not None and result.outcome is Outcome.REJECTED and result.reason in INSUFFICIENT:
            if self.receive_transfers(resource_id) > 0:  # units sent to this Region: credit them, then try again
                result = self._take(approach, resource, rid, quantity, record)
        claimed = bool(idempotency_key) and not approach.needs_token
        try:
            return self._answer(approach, resource, rid, quantity, record, result, claimed)
        except Exception:
            if claimed and result.outcome in (Outcome.REJECTED, Outcome.CONTENTION):
                self.store.drop_claim(rid)  # nothing was taken: free the key
            raise

    def _known(self, rid: str) -> Record | None:
        """The record that answers for a request token: the one record (one Region, MRSC), or
        (MREC) the earliest of every Region's that this replica holds (a client that failed over
        is answered from it, nothing is taken; a later Region's twin is given back by [`reconcile`][counters.services.reservations.Reservations.reconcile])."""
        if not self.store.region:
            return self.store.record(rid)
        return first(self.store.records(rid))  # MREC: the earliest, wherever it was taken (see reconcile)

    def reconcile(self, resource_id: str, rid: str) -> bool:
        """MREC, after a failover re-send was taken in two Regions during a partition (each from its
        own share; never oversold): once both records are visible here, the Region whose record does
        not come first (earliest ``createdAt``, then Region name) releases its own, once (the usual
        release, guarded by ``CONFIRMED``). Returns whether this call gave units back. Safe to call
        any time, in any Region: each Region's stream consumer calls it on every arriving CONFIRMED
        record ([`counters.services.escrow_automation`][counters.services.escrow_automation])."""
        if not self.store.region:
            return False
        records = [r for r in self.store.records(rid) if r.resource_id == resource_id and r.status in (CONFIRMED, RELEASED, RELEASING)]
        own = next((r for r in records if r.region == self.store.region), None)
        if own is None or own.status is not CONFIRMED or first(records) is own:
            return False
        return self._release_record(self.resource(resource_id), own, f"reconcile:{rid}").created

    def _take(self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, object]) -> Result:
        """The approach's take on this Region's counter items (escrowed: this Region's share only)."""
        if resource.shards == 1:
            result = approach.apply(resource.counter_keys[0], quantity, token=rid, record=record)
            if result.outcome.succeeded:  # unsharded: the one counter item holds it, whoever applied it
                result.value = {
                    "allocation": {resource.counter_keys[0]["PK"]: quantity},
                    **(result.value if isinstance(result.value, dict) else {}),
                }
            return result
        return sharding.take(approach, resource.counter_keys, quantity, token=rid, record=record, rng=self.rng)

    def _answer(
        self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, object], result: Result, claimed: bool
    ) -> Reservation[PublicReservation]:
        value: dict[str, object] = result.value if isinstance(result.value, dict) else {}
        if result.outcome is Outcome.REJECTED:
            if result.reason in INSUFFICIENT:
                message = f"resource {resource.resource_id!r} has {value.get('available', 'too little')} left; asked for {quantity}"
                if resource.shares is not None:
                    elsewhere = ", ".join(f"{region} {n}" for region, n in self.shares_elsewhere(resource).items()) or "none"
                    message = (
                        f"resource {resource.resource_id!r} has {value.get('available', 'too little')} left in this Region's share "
                        f"({resource.region}); asked for {quantity}; other Regions' shares (as last replicated here): {elsewhere}"
                    )
                raise InsufficientCapacity(message)
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
        # Taken, the record busy: the units must not stay held without a record (nobody could release
        # them, and the proofs count them as stranded). A re-drive of the same key is answered by the
        # approach's token (duplicate, with its allocation) and writes the record: deferred through the
        # retry queue (202) for the exact token-remembering approaches, as a busy claim confirmation is.
        created, stored = self._put_record(
            rid, record, quantity, allocation, command=reserve_command(approach, resource.resource_id, quantity, record)
        )
        if created:  # the record's conditional Put is the arbiter: exactly one twin answers 201
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        return self._replay(stored, quantity, request_id, result)

    def _replay(self, existing: Record, quantity: int, request_id: str, result: Result | None = None) -> Reservation[PublicReservation]:
        """Answer from the stored record: this request's own (``created``), or an earlier one's."""
        if existing.quantity != quantity:
            raise IdempotencyKeyReused()
        rid, status = existing.reservation_id, existing.status
        if status is PENDING and existing.created_at > time.time() - CLAIM_SECONDS:
            raise IdempotencyKeyInFlight()  # 409 (a ContentionError: nothing done, retry the same request)
        if status in (PENDING, UNKNOWN):
            raise AmbiguousOutcome(f"reservation {rid} may or may not hold {quantity}: its request's outcome is unknown")
        return Reservation(existing.request_id == request_id, public_reservation(rid, quantity, status), result)

    def _put_record(
        self,
        rid: str,
        record: dict[str, object],
        quantity: int,
        allocation: dict[str, int] | None,
        *,
        status: Status = CONFIRMED,
        command: Command | None = None,
    ) -> tuple[bool, Record]:
        """Put the record unless one exists; returns (created by this request, the stored record).
        No TTL: a hold never expires (only a released record does). Busy: ContentionError carrying
        ``command`` (the re-drive of a take that already applied)."""
        put = record_put(self.table_name, rid, quantity, allocation, record, status, self.store.region)
        answer = self.store.put_record(put, str(record["requestId"]))
        if answer is None or answer[1] is None:
            raise ContentionError("could not store the reservation record; retry the same request (same Idempotency-Key)", command=command)
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

    def get_reservation(self, resource_id: str, rid: str, *, caller: Caller | None = None) -> ReservationDetails:
        """The reservation ``reservation_id`` of ``resource_id`` (404 when missing, or another caller's)."""
        record = self._known(rid)
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.resource_id != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.owner, "read this reservation", missing)
        public = public_reservation(rid, record.quantity, record.status)
        body: ReservationDetails = {
            "reservationId": public["reservationId"],
            "quantity": public["quantity"],
            "status": public["status"],
            "resourceId": resource_id,
            "createdAt": record.created_at,
        }
        if record.released_at is not None:
            body["releasedAt"] = record.released_at
        return body

    def release(
        self, resource_id: str, rid: str, *, caller: Caller | None = None, request_id: str | None = None
    ) -> Reservation[PublicReservation]:
        """Give the quantity back exactly once; a second release is a no-op (``created`` False).
        With a ``caller``, only the reservation's owner (or an admin) may: checked on the read
        that precedes every write (the owner never changes), so a refusal writes nothing; it
        answers 404 as for a missing reservation."""
        resource = self.resource(resource_id)
        record = self._known(rid)
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.resource_id != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.owner, "release this reservation", missing)
        return self._release_record(resource, record, request_id or new_request_id())

    def _release_record(self, resource: Resource, record: Record, request_id: str) -> Reservation[PublicReservation]:
        """Give back this record's quantity (in MREC: a record of this Region; another's is refused)."""
        self.refuse_in_mode(resource.strategy, resource.shards)
        rid, resource_id = record.reservation_id, resource.resource_id
        quantity = record.quantity
        if record.status is RELEASED:  # this request's own release (a re-drive), or an earlier one
            return Reservation(record.released_by == request_id, public_reservation(rid, quantity, RELEASED))
        if record.status is UNKNOWN:
            raise IntegrityError(
                f"reservation {rid!r} may or may not hold {quantity} ({resource.strategy} cannot tell): it cannot be released"
            )
        if record.status is RELEASING:
            return self._release_in_steps(resource, record, request_id)
        if record.status is not CONFIRMED:
            self._replay(record, quantity, request_id)  # PENDING: still completing (409), or left by a caller that died
        local = {key["PK"] for key in resource.counter_keys}
        if resource.shares is not None and not set(record.allocation or {}) <= local:
            raise UnsupportedInMode(
                f"reservation {rid!r} holds units of the share of {record.region or 'another Region'}: only that Region writes its "
                f"share, so release it there (this is {resource.region}) (docs/reservations.md, Global tables)"
            )
        if self.topology.mode is MRSC:
            return self._release_in_steps(resource, record, request_id)
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

    def _release_in_steps(self, resource: Resource, record: Record, request_id: str) -> Reservation[PublicReservation]:
        """MRSC (no transactions): ``CONFIRMED -> RELEASED_PENDING``, the approach's own give-back
        (one conditional write), then ``RELEASED``. An approach that remembers tokens (occ_history,
        set) recognises a re-sent give-back, so an interrupted release is re-driven; atomic and occ
        cannot tell, so theirs is only driven by the request that marked it (never given back
        twice: at worst the quantity stays held, never oversold)."""
        rid, quantity = record.reservation_id, record.quantity
        approach = self.approach(resource.strategy)
        marked_now = False
        if record.status is CONFIRMED:
            outcome, found = self.store.mark_releasing(rid, request_id)
            if outcome is Outcome.APPLIED:
                marked_now = True
            elif outcome is Outcome.REJECTED:
                record = found or self.store.record(rid) or record
                if record.status is RELEASED:
                    return Reservation(record.released_by == request_id, public_reservation(rid, quantity, RELEASED))
            else:
                raise ContentionError(
                    f"reservation {rid!r} is busy; retry the release", command=release_command(resource.resource_id, rid, request_id)
                )
        if not marked_now and not (approach.exact and approach.needs_token):
            raise IntegrityError(
                f"the release of reservation {rid!r} was interrupted and strategy {resource.strategy!r} cannot tell whether its "
                "give-back applied: it is not re-driven (the quantity may stay held; it is never given back twice)"
            )
        token = approach.give_back_token(rid)
        for pk, part in (record.allocation or {}).items():
            given = approach.apply(resource.key_for(pk), -part, token=token)
            if given.outcome is Outcome.CONTENTION:
                raise ContentionError(
                    f"reservation {rid!r} is busy; retry the release", command=release_command(resource.resource_id, rid, request_id)
                )
            if not given.outcome.succeeded:
                raise IntegrityError(f"reservation {rid!r}: the give-back of {part} answered {given.outcome} ({given.reason})")
        if self.store.finish_release(rid, self.released_ttl_seconds) is Outcome.CONTENTION:
            raise ContentionError(
                f"reservation {rid!r} is busy; retry the release", command=release_command(resource.resource_id, rid, request_id)
            )
        return Reservation(record.released_by in (None, request_id) or marked_now, public_reservation(rid, quantity, RELEASED))

    # -- escrow transfers (MREC) -------------------------------------------------------------------
    def transfer(
        self, resource_id: str, target: str, quantity: int, idempotency_key: str, *, request_id: str | None = None
    ) -> Reservation[Transferred]:
        """Step 1 of an escrow transfer, in this (the source) Region: debit ``quantity`` from this
        Region's share and write the transfer, in one transaction here. The target Region credits
        it ([`receive_transfers`][counters.services.reservations.Reservations.receive_transfers]) once the transfer has replicated there, exactly once. The
        transfer id is derived from the key and this Region ([`transfer_id`][counters.store.resources.transfer_id]): a re-send here
        answers the same transfer (200), another quantity or target 422; the same key sent in
        another Region is that Region's own transfer. Capacity is conserved at every instant: shares + in flight."""
        self._require_escrow()
        if quantity < 1:
            raise InvalidRequest("quantity must be >= 1")
        if target not in self.topology.regions or target == self.topology.region:
            raise InvalidRequest(
                f"target must be another of the table's Regions {', '.join(self.topology.regions)} (this is {self.topology.region})"
            )
        if not idempotency_key:
            raise IdempotencyKeyMissing("the Idempotency-Key header is required for a transfer (docs/retries.md#idempotency-keys)")
        resource = self.resource(resource_id)
        approach = self.approach(resource.strategy)
        request_id = request_id or new_request_id()
        tid = transfer_id(resource_id, self.topology.region, idempotency_key)  # the source Region is part of its identity
        fields: dict[str, object] = {
            "transferId": tid,
            "resourceId": resource_id,
            SOURCE: self.topology.region,
            TARGET: target,
            QUANTITY: quantity,
            REQUEST_ID: request_id,
            REGION_ATTRIBUTE: self.topology.region,
        }
        for _ in range(sharding.ROUNDS):
            existing = self.store.transfer(resource_id, tid)
            if existing is not None:
                if (existing.quantity, existing.target) != (quantity, target):
                    raise IdempotencyKeyReused()
                return Reservation(
                    existing.request_id == request_id,
                    transfer_body(resource_id, existing.transfer_id, self.topology.region, target, quantity),
                )
            keys = resource.counter_keys
            counters = [c for _, c in self.store.quotas(keys, Capacity())]
            left = sum(c.available for c in counters)
            if left < quantity:
                raise InsufficientCapacity(
                    f"this Region's share of {resource_id!r} ({resource.region}) has {left} left to transfer; asked for {quantity}"
                )
            parts = sharding.plan(keys, counters, quantity)
            updates = [approach.quota_update(key, -part, tid) for key, part in parts]
            fields["allocation"] = {key["PK"]: part for key, part in parts}
            outcome, exists, _ = self.store.move(updates, transfer_put(self.table_name, resource_id, tid, fields))
            if outcome is Outcome.APPLIED:
                return Reservation(True, transfer_body(resource_id, tid, self.topology.region, target, quantity))
            if outcome is not Outcome.REJECTED:
                raise ContentionError(f"resource {resource_id!r} is busy; retry the transfer (same Idempotency-Key)")
            # the transfer exists (a twin's), or a take won a share item since the read: read again
        raise ContentionError(f"resource {resource_id!r} is busy; retry the transfer (same Idempotency-Key)")

    def _require_escrow(self) -> None:
        if not self.topology.eventual:
            raise UnsupportedInMode(
                f"transfers move escrowed shares between the Regions of an MREC global table; this table is {self.topology.mode}: "
                "one counter serves every Region (docs/reservations.md, Global tables)"
            )

    def receive(self, resource_id: str) -> int:
        """[`receive_transfers`][counters.services.reservations.Reservations.receive_transfers] as the admin route asks it: refused (409) outside MREC, as a
        transfer is (nothing is ever sent to a Region there), and 404 for a missing resource."""
        self._require_escrow()
        return self.receive_transfers(resource_id)

    def receive_transfers(self, resource_id: str) -> int:
        """Step 2, in this (the target) Region: credit every transfer to this Region that has
        replicated here and has no receipt yet, each with its receipt in one transaction here (the
        receipt's ``attribute_not_exists`` makes a second credit fail: exactly once). Returns the
        units credited. Called by the target Region's stream consumer as each transfer arrives
        ([`counters.services.escrow_automation`][counters.services.escrow_automation]), by a take that finds the share short, and by the admin route."""
        if not self.topology.eventual:
            return 0
        resource = self.resource(resource_id)
        approach = self.approach(resource.strategy)
        keys = resource.counter_keys
        credited = 0
        for sent in self.store.transfers(resource_id):
            if sent.target != self.topology.region or sent.received:
                continue
            key = keys[uuid.UUID(sent.transfer_id).int % len(keys)]
            fields = {SOURCE: sent.source, TARGET: sent.target, QUANTITY: sent.quantity, REGION_ATTRIBUTE: self.topology.region}
            receipt = transfer_put(self.table_name, resource_id, sent.transfer_id, fields, receipt=True)
            outcome, _, _ = self.store.move([approach.quota_update(key, sent.quantity, sent.transfer_id)], receipt)
            if outcome is Outcome.APPLIED:
                credited += sent.quantity
            # REJECTED: a concurrent receiver credited it (its receipt exists); CONTENTION: the next call does
        return credited

    # -- deferred commands (SQS-driven retries; the payloads are in reservation_commands) --------
    def replayables(self) -> dict[str, Replayable]:
        """The deferred reserve/release commands the retry worker replays."""
        return {
            "reserve": Replayable(ReservePayload, self._replay_reserve),
            "release": Replayable(ReleasePayload, self._replay_release),
            "settle_claim": Replayable(SettleClaimPayload, self._replay_settle_claim),
        }

    def _replay_settle_claim(self, p: SettleClaimPayload, command: Command) -> Verdict:
        """A claim whose take applied, confirmed with its allocation (see `_settle_claim`)."""
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
        answer = self.reserve(p.resourceId, p.quantity, p.idempotencyKey, owner=p.owner, request_id=command.operation_id)
        return Verdict("APPLIED" if answer.created else "DUPLICATE", answer.body)

    def _replay_release(self, p: ReleasePayload, command: Command) -> Verdict:
        answer = self.release(p.resourceId, p.reservationId, request_id=command.operation_id)
        return Verdict("APPLIED" if answer.created else "DUPLICATE", {**answer.body, "changed": answer.created})


def first(records: list[Record]) -> Record | None:
    """The record that answers for a token held in several Regions (MREC failover): the earliest."""
    return min(records, key=lambda r: (r.created_at, r.region), default=None)


def public_reservation(rid: str, quantity: int, status: Status) -> PublicReservation:
    """``RELEASED_PENDING`` (an MRSC release between its steps) reads as ``RELEASED``: it only ever completes."""
    return {"reservationId": rid, "quantity": quantity, "status": str(RELEASED if status is RELEASING else status)}


def transfer_body(resource_id: str, tid: str, source: str, target: str, quantity: int) -> Transferred:
    """The answer for a transfer: its id, resource, source and target Regions, and quantity."""
    return {"transferId": tid, "resourceId": resource_id, "from": source, "to": target, "quantity": quantity, "status": "SENT"}
