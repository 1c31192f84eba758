"""The reservations service: resources created on a strategy, reservations taken, read and replayed
([`Reservations`][counters.services.reservations.service.Reservations]); giving back is
[`releases`][counters.services.reservations.releases], escrow [`escrow`][counters.services.reservations.escrow].
The package's page ([`counters.services.reservations`][counters.services.reservations]) tells the whole protocol."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal, Self, cast

from counters.core.caller import Caller
from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, new_request_id
from counters.core.errors import (
    AmbiguousOutcome,
    ContentionError,
    IdempotencyKeyMissing,
    IdempotencyKeyReused,
    InsufficientCapacity,
    IntegrityError,
    InvalidRequest,
    NotFound,
    SlotsFull,
)
from counters.core.failures import RetryPolicy
from counters.core.json import JSONObject
from counters.core.outcome import Capacity, Outcome
from counters.core.policy import RegionPolicy
from counters.core.regions import ONE_REGION, Topology
from counters.core.settings import stream_consumers as stream_consumers_run
from counters.primitives import sharding
from counters.primitives.approaches import NAMES, REGISTRY, Approach, Reason, TakeResult
from counters.services.reservation_commands import ReleasePayload, ReservePayload, SettleClaimPayload, reserve_command
from counters.services.reservations.escrow import Escrow
from counters.services.reservations.model import (
    CLAIM_SECONDS,
    CONFIRMED,
    INSUFFICIENT,
    PENDING,
    RELEASED,
    RELEASED_TTL_SECONDS,
    RELEASING,
    UNKNOWN,
    PublicReservation,
    PublicResource,
    Reservation,
    ReservationDetails,
    ReservationSettings,
    public_reservation,
    public_resource,
    reservation_id,
)
from counters.services.reservations.releases import Releases
from counters.services.reservations.shared import Shared
from counters.store.resources import ResourceStore
from counters.store.resources_counters import MAX_SHARDS, Counter, Resource, resource_key
from counters.store.resources_records import Record, Status, record_put


class Reservations:
    """Create resources, take and give back reservations exactly (per the strategy's guarantee)."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        released_ttl_seconds: int = RELEASED_TTL_SECONDS,
        rng: random.Random | None = None,
        topology: Topology | None = None,
        stream_consumers: bool | None = None,
    ) -> None:
        """``options``: each approach's constructor keywords by its name (``{"atomic": {"policy": "over"}}``;
        unset: the defaults of its [`REGISTRY`][counters.primitives.approaches.REGISTRY] entry's settings).
        ``stream_consumers``: whether each Region's escrow function (MREC) runs on its stream
        (``None``: ``TALLY_STREAM_CONSUMERS``); without it a transfer, which only the target Region's
        consumer (or a call to ``receive_transfers`` there) credits, is refused."""
        self.table_name = table_name
        self.policy = RegionPolicy.of(topology or ONE_REGION)  # resolved once: the parts read its capabilities
        self.store = ResourceStore(table_name, dynamodb=dynamodb, retry=retry or RetryPolicy(), policy=self.policy)
        self.shared = Shared(self.store, options or {})
        self.releases = Releases(self.shared, released_ttl_seconds)
        self.escrow = Escrow(self.shared, self.releases, stream_consumers=stream_consumers_run(stream_consumers))
        """Shares, transfers, receipts and reconcile on an MREC table ([`Escrow`][counters.services.reservations.escrow.Escrow])."""
        self.rng = rng or random.Random()

    @classmethod
    def from_settings(cls, settings: ReservationSettings) -> Self:
        """The service on the settings' table with the settings' atomic policy and Regions."""
        return cls(
            settings.table_name,
            retry=settings.retry,
            options=settings.approach_options,
            topology=settings.topology,
            stream_consumers=settings.stream_consumers,
        )

    def create_resource(
        self, resource_id: str, *, capacity: int, strategy: str, shards: int = 1, shares: dict[str, int] | None = None
    ) -> PublicResource:
        """A resource. On an MREC table its capacity is escrowed: ``shares`` (Region -> units,
        summing to ``capacity``; default an even split, the remainder to the first Regions) each
        become a share item only that Region writes."""
        if strategy not in NAMES:
            raise InvalidRequest(f"strategy must be one of {', '.join(NAMES)}")
        approach = self.shared.approach(strategy)
        if shards > 1 and not approach.shardable:
            shardable = ", ".join(name for name, entry in REGISTRY.items() if entry.cls.shardable)
            raise InvalidRequest(f"strategy {strategy!r} does not support shards > 1 (shardable: {shardable})")
        if not 1 <= shards <= MAX_SHARDS or capacity < 0:
            raise InvalidRequest(f"shards must be 1..{MAX_SHARDS} and capacity >= 0")
        self.shared.refuse_in_mode(strategy, shards)
        if self.policy.escrowed:  # each of these Regions owns an escrowed share of the capacity (MREC)
            return self.escrow.create(resource_id, capacity, approach, shards, shares)
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
        return self.shared.created(resource_id, self.store.create(meta, counters), resource)

    def get_resource(self, resource_id: str) -> PublicResource:
        """The resource; a sharded one reads as the sum of one consistent snapshot of its shards;
        an escrowed one as the sum of every Region's share as this Region's replica holds them
        (exact once replication has settled), with each Region's share and the transfers in flight."""
        resource = self.shared.resource(resource_id)
        if resource.shares is not None:
            return self.escrow.view(resource)
        counters = [resource.counter or Counter()] if resource.shards == 1 else self.store.snapshot(resource.counter_keys, Capacity())
        return public_resource(resource, sum(c.reserved for c in counters), sum(c.available for c in counters))

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
        resource = self.shared.resource(resource_id)
        self.shared.refuse_in_mode(resource.strategy, resource.shards)
        approach = self.shared.approach(resource.strategy)
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
        record.update(self.policy.stamped())
        if idempotency_key:
            record["idempotencyKey"] = idempotency_key
            existing = self.shared.known(rid)
            if existing is not None:
                return self.shared.replay(existing, quantity, request_id)
            if not approach.needs_token:  # nothing else remembers the key: claim it before taking anything
                claimed, stored = self._put_record(rid, record, quantity, None, status=PENDING)
                if not claimed:
                    return self.shared.replay(stored, quantity, request_id)
        result = self._take(approach, resource, rid, quantity, record)
        if resource.shares is not None and result.outcome is Outcome.REJECTED and result.reason in INSUFFICIENT:
            if self.escrow.receive_transfers(resource_id) > 0:  # units sent to this Region: credit them, then try again
                result = self._take(approach, resource, rid, quantity, record)
        claimed = bool(idempotency_key) and not approach.needs_token
        try:
            return self._answer(approach, resource, rid, quantity, record, result, claimed)
        except Exception:
            if claimed and result.outcome in (Outcome.REJECTED, Outcome.CONTENTION):
                self.store.drop_claim(rid)  # nothing was taken: free the key
            raise

    def _take(self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, object]) -> TakeResult:
        """The approach's take on this Region's counter items (escrowed: this Region's share only)."""
        if resource.shards == 1:
            result = approach.apply(resource.counter_keys[0], quantity, token=rid, record=record)
            if result.outcome.succeeded:  # unsharded: the one counter item holds it, whoever applied it
                result.value = result.value.held({resource.counter_keys[0]["PK"]: quantity})
            return result
        return sharding.take(approach, resource.counter_keys, quantity, token=rid, record=record, rng=self.rng)

    def _answer(
        self, approach: Approach, resource: Resource, rid: str, quantity: int, record: dict[str, object], result: TakeResult, claimed: bool
    ) -> Reservation[PublicReservation]:
        facts = result.value
        left = "too little" if facts.available is None else facts.available
        if result.outcome is Outcome.REJECTED:
            if result.reason in INSUFFICIENT:
                message = f"resource {resource.resource_id!r} has {left} left; asked for {quantity}"
                if resource.shares is not None:
                    elsewhere = ", ".join(f"{region} {n}" for region, n in self.escrow.shares_elsewhere(resource).items()) or "none"
                    message = (
                        f"resource {resource.resource_id!r} has {left} left in this Region's share "
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
            marker = facts.marker
            status = marker.status if marker is not None else CONFIRMED
            return Reservation(marker is not None and marker.request_id == request_id, public_reservation(rid, quantity, status), result)
        allocation = facts.allocation
        if claimed:
            self._settle_claim(rid, CONFIRMED, allocation, request_id=request_id)
            return Reservation(True, public_reservation(rid, quantity, CONFIRMED), result)
        if allocation is None:
            existing = self.store.record(rid)
            if existing is not None:
                return self.shared.replay(existing, quantity, request_id, result)
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
        return self.shared.replay(stored, quantity, request_id, result)

    def _put_record(
        self,
        rid: str,
        record: dict[str, object],
        quantity: int,
        allocation: Mapping[str, int] | None,
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

    def _settle_claim(self, rid: str, status: Status, allocation: Mapping[str, int] | None, *, request_id: str | None = None) -> None:
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

    def release(
        self, resource_id: str, rid: str, *, caller: Caller | None = None, request_id: str | None = None
    ) -> Reservation[PublicReservation]:
        """Give the quantity back exactly once ([`Releases`][counters.services.reservations.releases.Releases]);
        a second release is a no-op (``created`` False). With a ``caller``, only the reservation's owner
        (or an admin) may: checked on the read that precedes every write (the owner never changes), so
        a refusal writes nothing; it answers 404 as for a missing reservation."""
        resource = self.shared.resource(resource_id)
        record = self.shared.owned(resource_id, rid, caller, "release this reservation")
        return self.releases.release_record(resource, record, request_id or new_request_id())

    def get_reservation(self, resource_id: str, rid: str, *, caller: Caller | None = None) -> ReservationDetails:
        """The reservation ``reservation_id`` of ``resource_id`` (404 when missing, or another caller's)."""
        record = self.shared.owned(resource_id, rid, caller, "read this reservation")
        created = record.created_at
        stale = record.status is PENDING and created <= time.time() - CLAIM_SECONDS  # its caller died: read as UNKNOWN
        status = UNKNOWN if stale else RELEASED if record.status is RELEASING else record.status
        body: ReservationDetails = {
            "reservationId": rid,
            "quantity": record.quantity,
            "status": cast(Literal["CONFIRMED", "RELEASED", "PENDING", "UNKNOWN"], str(status)),
            "resourceId": resource_id,
            "createdAt": created,
        }
        if record.released_at is not None:
            body["releasedAt"] = record.released_at
        return body

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
