"""Giving a reservation back, exactly once, on every strategy: one transaction where the table has
them, three single-item steps where it has none ([`Releases`][counters.services.reservations.releases.Releases])."""

from __future__ import annotations

from counters.core.errors import ContentionError, IntegrityError
from counters.core.outcome import Outcome, Result
from counters.services.reservation_commands import release_command
from counters.services.reservations.model import CONFIRMED, RELEASED, RELEASING, UNKNOWN, PublicReservation, Reservation, public_reservation
from counters.services.reservations.shared import Shared
from counters.store.resources_counters import Resource
from counters.store.resources_records import Record


class Releases:
    """Give back (``release``): the record's status ``CONFIRMED -> RELEASED`` (conditioned on
    ``CONFIRMED``; it records ``releasedBy``, the request's id, and starts the TTL) and the approach's
    give-back on each counter item of the allocation, so the quantity returns exactly once whatever
    retries: in one transaction, or where the table has none in steps
    (`_release_in_steps`). A released record is kept ``released_ttl_seconds``."""

    def __init__(self, shared: Shared, released_ttl_seconds: int) -> None:
        self.shared = shared
        self.store = shared.store
        self.policy = shared.policy
        self.released_ttl_seconds = released_ttl_seconds

    def release_record(self, resource: Resource, record: Record, request_id: str) -> Reservation[PublicReservation]:
        """Give back this record's quantity (in MREC: a record of this Region; another's is refused)."""
        self.shared.refuse_in_mode(resource.strategy, resource.shards)
        rid, quantity = record.reservation_id, record.quantity
        if record.status is RELEASED:  # this request's own release (a re-drive), or an earlier one
            return Reservation(record.released_by == request_id, public_reservation(rid, quantity, RELEASED))
        if record.status is UNKNOWN:
            raise IntegrityError(
                f"reservation {rid!r} may or may not hold {quantity} ({resource.strategy} cannot tell): it cannot be released"
            )
        if record.status is RELEASING:
            return self._release_in_steps(resource, record, request_id)
        if record.status is not CONFIRMED:
            self.shared.replay(record, quantity, request_id)  # PENDING: still completing (409), or left by a caller that died
        local = {key["PK"] for key in resource.counter_keys}
        if resource.shares is not None and not set(record.allocation or {}) <= local:
            held = record.region or "another Region"
            self.store.admit(
                "release:elsewhere", detail=f"reservation {rid!r} holds units of the share of {held}; this is {resource.region}"
            )
        release = self.policy.writes.choose(together=self._release_together, in_order=self._release_in_steps)
        return release(resource, record, request_id)

    def _release_together(self, resource: Resource, record: Record, request_id: str) -> Reservation[PublicReservation]:
        """One transaction: the record's ``CONFIRMED -> RELEASED`` and every give-back of its allocation."""
        rid, resource_id, quantity = record.reservation_id, resource.resource_id, record.quantity
        approach = self.shared.approach(resource.strategy)
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
        """Written in order (MRSC, without transactions): ``CONFIRMED -> RELEASED_PENDING``, the approach's own give-back
        (one conditional write), then ``RELEASED``. An approach that remembers tokens (occ_history,
        set) recognises a re-sent give-back, so an interrupted release is re-driven; atomic and occ
        cannot tell, so theirs is only driven by the request that marked it (never given back
        twice: at worst the quantity stays held, never oversold)."""
        rid, quantity = record.reservation_id, record.quantity
        approach = self.shared.approach(resource.strategy)
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
