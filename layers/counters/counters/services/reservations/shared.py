"""What the reservations service's parts share ([`Shared`][counters.services.reservations.shared.Shared]):
the store (its Region policy inside), the approaches made on it, a resource's META and the record that
answers for a token. [`Reservations`][counters.services.reservations.service.Reservations] makes one and
hands it to [`Releases`][counters.services.reservations.releases.Releases] (giving back) and
[`Escrow`][counters.services.reservations.escrow.Escrow] (shares, transfers, receipts, reconcile)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from counters.core.caller import Caller
from counters.core.errors import AlreadyExists, AmbiguousOutcome, ContentionError, IdempotencyKeyInFlight, IdempotencyKeyReused, NotFound
from counters.core.outcome import Outcome, Result
from counters.primitives.approaches import REGISTRY, Approach
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
from counters.store.resources import ResourceStore
from counters.store.resources_counters import Resource
from counters.store.resources_records import Record


class Shared:
    """The store, the approaches on it (each made on first use with its ``options``: constructor
    keywords by approach name) and the reads every part makes."""

    def __init__(self, store: ResourceStore, options: Mapping[str, Mapping[str, Any]]) -> None:
        self.store = store
        self.policy = store.policy
        """What this table offers the feature, resolved once ([`RegionPolicy`][counters.core.policy.RegionPolicy])."""
        self.options = options
        self._approaches: dict[str, Approach] = {}
        self._escrowed: dict[str, Resource] = {}

    def approach(self, name: str) -> Approach:
        """The approach ``name`` on this store, made on first use and kept."""
        if name not in self._approaches:
            self._approaches[name] = REGISTRY[name].make(self.store, **self.options.get(name, {}))
        return self._approaches[name]

    def refuse_in_mode(self, strategy: str, shards: int) -> None:
        """Refuse (409 ``unsupported_in_region_mode``) what this table cannot run, at creation and at
        every call: a strategy whose take is a transaction where there are none (the refusal its
        [`REGISTRY`][counters.primitives.approaches.REGISTRY] entry names), and write sharding."""
        registered = REGISTRY.get(strategy)
        if registered is not None and registered.refusal is not None:
            self.store.admit(registered.refusal)
        if shards > 1:
            self.store.admit("take:sharded")

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
            self.store.admit("take:unescrowed", detail=f"resource {resource_id!r}")
        return found

    def created(self, resource_id: str, outcome: Outcome, resource: Resource) -> PublicResource:
        """The answer to a resource's creation that ended with ``outcome``."""
        if outcome is Outcome.REJECTED:
            raise AlreadyExists(f"resource {resource_id!r} already exists")
        if outcome is not Outcome.APPLIED:
            raise ContentionError()
        return public_resource(resource, 0, resource.capacity)

    def known(self, rid: str) -> Record | None:
        """The record that answers for a request token: the one record (one Region, MRSC), or
        (per-Region records, MREC) the earliest of every Region's that this replica holds (a client
        that failed over is answered from it, nothing is taken; a later Region's twin is given back
        by [`reconcile`][counters.services.reservations.escrow.Escrow.reconcile])."""
        if not self.store.region:
            return self.store.record(rid)
        return first(self.store.records(rid))  # MREC: the earliest, wherever it was taken (see reconcile)

    def owned(self, resource_id: str, rid: str, caller: Caller | None, doing: str) -> Record:
        """The record of ``rid`` for ``resource_id``; 404 when missing, or (with a ``caller``, checked on
        this read, before any write: the owner never changes) another caller's than an admin's."""
        record = self.known(rid)
        missing = NotFound(f"reservation {rid!r} not found for resource {resource_id!r}")
        if record is None or record.resource_id != resource_id:
            raise missing
        if caller is not None:
            caller.require_owner_or_hide(record.owner, doing, missing)
        return record

    def replay(self, existing: Record, quantity: int, request_id: str, result: Result | None = None) -> Reservation[PublicReservation]:
        """Answer from the stored record: this request's own (``created``), or an earlier one's."""
        if existing.quantity != quantity:
            raise IdempotencyKeyReused()
        rid, status = existing.reservation_id, existing.status
        if status is PENDING and existing.created_at > time.time() - CLAIM_SECONDS:
            raise IdempotencyKeyInFlight()  # 409 (a ContentionError: nothing done, retry the same request)
        if status in (PENDING, UNKNOWN):
            raise AmbiguousOutcome(f"reservation {rid} may or may not hold {quantity}: its request's outcome is unknown")
        return Reservation(existing.request_id == request_id, public_reservation(rid, quantity, status), result)
