"""Escrow on a table whose conditions see one replica (MREC): each Region owns a share of a resource's
capacity and writes only its own, units move between shares in two idempotent steps, and a key taken
in two Regions during a partition is reconciled ([`Escrow`][counters.services.reservations.escrow.Escrow]).
[docs/reservations.md, "Global tables"](../reservations.md#global-tables)."""

from __future__ import annotations

import time
import uuid

from counters.core.commands import new_request_id
from counters.core.errors import (
    ContentionError,
    IdempotencyKeyMissing,
    IdempotencyKeyReused,
    InsufficientCapacity,
    InvalidRequest,
    StreamConsumerMissing,
)
from counters.core.outcome import Capacity, Outcome
from counters.core.regions import REGION_ATTRIBUTE
from counters.primitives import sharding
from counters.primitives.approaches import Approach
from counters.services.reservations.model import (
    CONFIRMED,
    RELEASED,
    RELEASING,
    PublicResource,
    RegionShare,
    Reservation,
    Transferred,
    first,
    public_resource,
    transfer_body,
)
from counters.services.reservations.releases import Releases
from counters.services.reservations.shared import Shared
from counters.store.resources_counters import MAX_SHARDS, SHARES, Key, Resource, resource_key
from counters.store.resources_records import QUANTITY, REQUEST_ID
from counters.store.resources_transfers import SOURCE, TARGET, transfer_id, transfer_put


class Escrow:
    """The escrowed shares of a resource: created at once, read per Region, moved by
    [`transfer`][counters.services.reservations.escrow.Escrow.transfer] and
    [`receive_transfers`][counters.services.reservations.escrow.Escrow.receive_transfers], and a double
    take given back by [`reconcile`][counters.services.reservations.escrow.Escrow.reconcile] (through
    ``releases``). ``stream_consumers``: whether this Region's escrow stream consumer runs (it credits
    arriving transfers)."""

    def __init__(self, shared: Shared, releases: Releases, *, stream_consumers: bool) -> None:
        self.shared = shared
        self.releases = releases
        self.store = shared.store
        self.policy = shared.policy
        self.table_name = shared.store.table_name
        self.stream_consumers = stream_consumers

    def create(self, resource_id: str, capacity: int, approach: Approach, shards: int, shares: dict[str, int] | None) -> PublicResource:
        """META (written once) and every Region's share items, in one transaction in this Region.
        A share item is written here once; after that only its own Region writes it, and only once
        it has seen it (every write is conditioned on ``attribute_exists``)."""
        regions = self.policy.escrowed
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
            REGION_ATTRIBUTE: self.policy.region,
        }
        resource = Resource(resource_id, capacity, approach.name, shards, shares=dict(shares))
        counters: list[tuple[Key, dict[str, object]]] = []
        for region in regions:
            for key, part in zip(resource.keys_in(region), sharding.split_capacity(shares[region], shards), strict=True):
                attributes = {"resourceId": resource_id, "capacity": part, REGION_ATTRIBUTE: region, **approach.initial_attributes(part)}
                counters.append((key, attributes))
        return self.shared.created(resource_id, self.store.create(meta, counters), resource)

    def view(self, resource: Resource) -> PublicResource:
        """The resource as the sum of every Region's share as this replica holds them, each share and the units in flight."""
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
        return {**public_resource(resource, reserved, available), "regions": dict(regions), "inFlight": in_flight}

    def shares_elsewhere(self, resource: Resource) -> dict[str, int]:
        """What every other Region has available, as this Region's replica last saw it (a hint)."""
        found = {}
        for region in sorted(resource.shares or {}):
            if region != resource.region:
                found[region] = sum(c.available for _, c in self.store.quotas(resource.keys_in(region), Capacity()))
        return {region: n for region, n in found.items() if n > 0}

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
        return self.releases.release_record(self.shared.resource(resource_id), own, f"reconcile:{rid}").created

    # -- transfers ----------------------------------------------------------------------------------
    def transfer(
        self, resource_id: str, target: str, quantity: int, idempotency_key: str, *, request_id: str | None = None
    ) -> Reservation[Transferred]:
        """Step 1 of an escrow transfer, in this (the source) Region: debit ``quantity`` from this
        Region's share and write the transfer, in one transaction here. The target Region credits
        it ([`receive_transfers`][counters.services.reservations.escrow.Escrow.receive_transfers]) once the transfer has replicated there, exactly once. The
        transfer id is derived from the key and this Region ([`transfer_id`][counters.store.resources_transfers.transfer_id]): a re-send here
        answers the same transfer (200), another quantity or target 422; the same key sent in
        another Region is that Region's own transfer. Capacity is conserved at every instant: shares + in flight."""
        self.store.admit("transfer")
        if not self.stream_consumers:
            raise StreamConsumerMissing(
                f"a transfer to {target} is credited only there, by the escrow function on that Region's stream "
                "(EscrowFunction, functions/escrow: sam deploy runs it in every Region), and these Reservations "
                "were not told that one runs. Run it, then pass Reservations(..., stream_consumers=True) or set "
                f"TALLY_STREAM_CONSUMERS=true (or call receive_transfers in {target} yourself and declare that)"
            )
        if quantity < 1:
            raise InvalidRequest("quantity must be >= 1")
        if target not in self.policy.regions or target == self.policy.region:
            raise InvalidRequest(
                f"target must be another of the table's Regions {', '.join(self.policy.regions)} (this is {self.policy.region})"
            )
        if not idempotency_key:
            raise IdempotencyKeyMissing("the Idempotency-Key header is required for a transfer (docs/retries.md#idempotency-keys)")
        resource = self.shared.resource(resource_id)
        approach = self.shared.approach(resource.strategy)
        request_id = request_id or new_request_id()
        tid = transfer_id(resource_id, self.policy.region, idempotency_key)  # the source Region is part of its identity
        fields: dict[str, object] = {
            "transferId": tid,
            "resourceId": resource_id,
            SOURCE: self.policy.region,
            TARGET: target,
            QUANTITY: quantity,
            REQUEST_ID: request_id,
            REGION_ATTRIBUTE: self.policy.region,
        }
        for _ in range(sharding.ROUNDS):
            existing = self.store.transfer(resource_id, tid)
            if existing is not None:
                if (existing.quantity, existing.target) != (quantity, target):
                    raise IdempotencyKeyReused()
                return Reservation(
                    existing.request_id == request_id,
                    transfer_body(resource_id, existing.transfer_id, self.policy.region, target, quantity),
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
            outcome = self.store.take(updates, transfer_put(self.table_name, resource_id, tid, fields)).outcome
            if outcome is Outcome.APPLIED:
                return Reservation(True, transfer_body(resource_id, tid, self.policy.region, target, quantity))
            if outcome is not Outcome.REJECTED:
                raise ContentionError(f"resource {resource_id!r} is busy; retry the transfer (same Idempotency-Key)")
            # the transfer exists (a twin's), or a take won a share item since the read: read again
        raise ContentionError(f"resource {resource_id!r} is busy; retry the transfer (same Idempotency-Key)")

    def receive(self, resource_id: str) -> int:
        """[`receive_transfers`][counters.services.reservations.escrow.Escrow.receive_transfers] as the admin route asks it: refused (409) outside MREC, as a
        transfer is (nothing is ever sent to a Region there), and 404 for a missing resource."""
        self.store.admit("transfer")
        return self.receive_transfers(resource_id)

    def receive_transfers(self, resource_id: str) -> int:
        """Step 2, in this (the target) Region: credit every transfer to this Region that has
        replicated here and has no receipt yet, each with its receipt in one transaction here (the
        receipt's ``attribute_not_exists`` makes a second credit fail: exactly once). Returns the
        units credited. Called by the target Region's stream consumer as each transfer arrives
        ([`counters.services.escrow_automation`][counters.services.escrow_automation]), by a take that finds the share short, and by the admin route."""
        if self.policy.region not in self.policy.escrowed:  # no share here to credit (one counter serves every Region)
            return 0
        resource = self.shared.resource(resource_id)
        approach = self.shared.approach(resource.strategy)
        keys = resource.counter_keys
        credited = 0
        for sent in self.store.transfers(resource_id):
            if sent.target != self.policy.region or sent.received:
                continue
            key = keys[uuid.UUID(sent.transfer_id).int % len(keys)]
            fields = {SOURCE: sent.source, TARGET: sent.target, QUANTITY: sent.quantity, REGION_ATTRIBUTE: self.policy.region}
            receipt = transfer_put(self.table_name, resource_id, sent.transfer_id, fields, receipt=True)
            if self.store.take([approach.quota_update(key, sent.quantity, sent.transfer_id)], receipt).outcome is Outcome.APPLIED:
                credited += sent.quantity
            # REJECTED: a concurrent receiver credited it (its receipt exists); CONTENTION: the next call does
        return credited
