"""What an MREC Region does by itself about escrow, with nobody calling a route.

Driven by the Region's own stream (``EscrowFunction``, [`counters.streams.escrow`][counters.streams.escrow] reads the
records), each action is one of [`Reservations`][counters.services.reservations.service.Reservations]' own, so
exactly as idempotent:

* **a transfer to this Region arrives** (replicated in): [`EscrowAutomation.transfer_arrived`][counters.services.escrow_automation.EscrowAutomation.transfer_arrived]
  credits it (step 2, [`receive_transfers`][counters.services.reservations.escrow.Escrow.receive_transfers]: one
  local transaction with the receipt's ``attribute_not_exists``, so exactly once however often the
  record is delivered or however many receivers race). If it is still not credited afterwards (the
  transaction met contention, the share has not replicated here yet) it raises
  [`ContentionError`][counters.core.errors.ContentionError]: the record is reported failed and redelivered,
  never dropped as done.
* **a CONFIRMED reservation record arrives** (this Region's own, or another's replicated in):
  [`EscrowAutomation.record_arrived`][counters.services.escrow_automation.EscrowAutomation.record_arrived] runs
  [`reconcile`][counters.services.reservations.escrow.Escrow.reconcile]: if another Region took the same
  key (a failover re-send during a partition) and this Region's record is not the first, this
  Region gives its own back, once (the release's ``CONFIRMED`` guard).

The bound: each Region's stream carries both records of a double take (its own write and the
replicated one), so the later Region reconciles in the delivery of whichever of the two reaches its
replica last; a transfer is credited in the delivery that brings it into the target's replica.
Contention costs a redelivery (the event source's retries), nothing else.
"""

from __future__ import annotations

from counters.core.errors import ContentionError
from counters.core.records import dataclass
from counters.services.reservations import Reservations, ReservationSettings


@dataclass(frozen=True)
class Done:
    """What one arriving item changed here: units credited, or a double take given back."""

    credited: int = 0
    reconciled: bool = False


class EscrowAutomation:
    """An MREC Region's escrow chores, each an idempotent call of [`Reservations`][counters.services.reservations.service.Reservations]."""

    def __init__(self, reservations: Reservations) -> None:
        self.reservations = reservations

    @classmethod
    def from_settings(cls, settings: ReservationSettings) -> EscrowAutomation:
        """The automation for this Region, from the function's settings."""
        return cls(Reservations.from_settings(settings))

    @property
    def region(self) -> str:
        """The Region this consumer acts for (the one whose stream it reads)."""
        return self.reservations.policy.region

    @property
    def active(self) -> bool:
        """Only a table whose conditions see one replica (MREC) escrows (MRSC and one Region have one counter and no transfers)."""
        return bool(self.reservations.policy.escrowed)

    def transfer_arrived(self, resource_id: str, transfer_id: str, target: str) -> Done:
        """A transfer is in this replica: if it is to this Region, credit it (and any other that
        has arrived); raise ContentionError while it is not credited, so the record is redelivered."""
        if not self.active or target != self.region:
            return Done()
        credited = self.reservations.escrow.receive_transfers(resource_id)
        for sent in self.reservations.store.transfers(resource_id):
            if sent.transfer_id == transfer_id and not sent.received:
                raise ContentionError(f"transfer {transfer_id} of {resource_id!r} is not credited in {self.region} yet; redelivered")
        return Done(credited=credited)

    def record_arrived(self, resource_id: str, reservation_id: str) -> Done:
        """A CONFIRMED record of the key is in this replica: give this Region's twin back if it is
        not the first ([`Reservations.escrow.reconcile`][counters.services.reservations.escrow.Escrow.reconcile]; busy: ContentionError, redelivered)."""
        if not self.active:
            return Done()
        return Done(reconciled=self.reservations.escrow.reconcile(resource_id, reservation_id))
