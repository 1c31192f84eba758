"""What every part of the reservations service shares: its state (declared here, made by
[`Reservations`][counters.services.reservations.service.Reservations]' constructor, where the Region
policy is built once), its approaches, the resource's META and the record that answers for a token.

[`Reservations`][counters.services.reservations.service.Reservations] is this base and its parts:
[`Releases`][counters.services.reservations.releases.Releases] (giving back) and
[`Escrow`][counters.services.reservations.escrow.Escrow] (shares, transfers, receipts, reconcile).
The parts have no constructor of their own: tools.iam reads a class named as a base as live, and a
live class's constructor as reachable, so only the service's own constructor builds the store.
"""

from __future__ import annotations

import random
import time
from typing import Any

from counters.core.client import DynamoDBClient
from counters.core.errors import AlreadyExists, AmbiguousOutcome, ContentionError, IdempotencyKeyInFlight, IdempotencyKeyReused, NotFound
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome, Result
from counters.core.policy import RegionPolicy
from counters.primitives.approaches import REGISTRY, Approach, create
from counters.services.reservations.model import (
    CLAIM_SECONDS,
    ESCROWED_CACHE,
    PENDING,
    UNKNOWN,
    PublicReservation,
    PublicResource,
    Reservation,
    first,
    public_reservation,
    public_resource,
)
from counters.store.resources import Record, Resource, ResourceStore


class ReservationsBase:
    """The service's state (made by [`Reservations`][counters.services.reservations.service.Reservations]'
    constructor) and what its parts share (see the module)."""

    table_name: str
    policy: RegionPolicy
    """What this table offers the feature, resolved once ([`RegionPolicy`][counters.core.policy.RegionPolicy])."""
    retry: RetryPolicy
    store: ResourceStore
    options: dict[str, dict[str, Any]]
    """Each approach's constructor options, by name."""
    released_ttl_seconds: int
    stream_consumers: bool
    """Whether this Region's escrow stream consumer runs (it credits arriving transfers)."""
    rng: random.Random
    _dynamodb: DynamoDBClient | None
    _approaches: dict[str, Approach]
    _escrowed: dict[str, Resource]

    def approach(self, name: str) -> Approach:
        """The approach ``name``, made on first use and kept."""
        if name not in self._approaches:
            made = create(name, self.table_name, dynamodb=self._dynamodb, retry=self.retry, **self.options.get(name, {}))
            made.store.region = self.store.region  # marker's and crt's records are written by the take
            self._approaches[name] = made
        return self._approaches[name]

    def refuse_in_mode(self, strategy: str, shards: int) -> None:
        """Refuse (409 ``unsupported_in_region_mode``) what this table cannot run, at creation and at
        every call: a strategy whose take is a transaction where there are none (the refusal its
        [`REGISTRY`][counters.primitives.approaches.REGISTRY] entry names), and write sharding."""
        registered = REGISTRY.get(strategy)
        if registered is not None and registered.refusal is not None:
            self.store.check(registered.refusal)
        if shards > 1:
            self.store.check("take:sharded")

    def resource(self, resource_id: str) -> Resource:
        """The resource's META. An escrowed one's is cached: it is written once (its split, strategy
        and shards never change; the counts live in the shares), so a take reads it once per process."""
        cached = self._escrowed.get(resource_id)
        if cached is not None:
            return cached
        found = self.store.resource(resource_id, self.policy.writer)
        if found is not None and found.shares is not None:
            if len(self._escrowed) >= ESCROWED_CACHE:
                self._escrowed.pop(next(iter(self._escrowed)))
            self._escrowed[resource_id] = found
        if found is None:
            raise NotFound(f"resource {resource_id!r} not found")
        if found.shares is None:  # refused where shares are escrowed: one counter for every Region would oversell
            self.store.check("take:unescrowed", detail=f"resource {resource_id!r}")
        return found

    def _created(self, resource_id: str, outcome: Outcome, resource: Resource) -> PublicResource:
        if outcome is Outcome.REJECTED:
            raise AlreadyExists(f"resource {resource_id!r} already exists")
        if outcome is not Outcome.APPLIED:
            raise ContentionError()
        return public_resource(resource, 0, resource.capacity)

    def _known(self, rid: str) -> Record | None:
        """The record that answers for a request token: the one record (one Region, MRSC), or
        (per-Region records, MREC) the earliest of every Region's that this replica holds (a client
        that failed over is answered from it, nothing is taken; a later Region's twin is given back
        by [`reconcile`][counters.services.reservations.escrow.Escrow.reconcile])."""
        if not self.store.region:
            return self.store.record(rid)
        return first(self.store.records(rid))  # MREC: the earliest, wherever it was taken (see reconcile)

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
