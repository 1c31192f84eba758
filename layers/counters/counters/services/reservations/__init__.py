"""Resources with a capacity and reservations against it, on any approach of seed 02.

The items (resource ``RES#<id>``/``META``, shards ``RES#<id>#<n>``/``SHARD``, reservation records
``RSV#<reservationId>``/``RSV``), their requests and the calls are in
[`counters.store.resources`][counters.store.resources]; the deferred commands in [`reservation_commands`][counters.services.reservation_commands]. This
service orchestrates, composed of parts by job: [`service`][counters.services.reservations.service] (resources,
takes, replays), [`releases`][counters.services.reservations.releases] (giving back),
[`escrow`][counters.services.reservations.escrow] (shares, transfers, receipts, reconcile: ``Reservations.escrow``),
each given one [`Shared`][counters.services.reservations.shared.Shared] (the store and what the parts share),
and [`model`][counters.services.reservations.model] (the answers, settings and constants).

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
as ``UNKNOWN`` after [`CLAIM_SECONDS`][counters.services.reservations.model.CLAIM_SECONDS].

Every record carries the ``requestId`` of the request that wrote it, so a re-drive of the same
request (the retry worker, or an attempt whose answer was lost) tells "mine" (201 / APPLIED)
from "an earlier request's" (200 / DUPLICATE).

Holds never expire: a ``CONFIRMED`` record has no TTL (a TTL deleting it would strand its
quantity: release would answer 404 and the count would keep it forever). Only a ``RELEASED``
record gets one (``expiresAt``, [`RELEASED_TTL_SECONDS`][counters.services.reservations.model.RELEASED_TTL_SECONDS] by default).

Global tables ([docs/reservations.md, "Global tables"](../reservations.md#global-tables)): on MREC each Region owns an escrowed share
of the capacity and its own reservation records, takes draw on the local share only, and
[`Reservations.escrow.transfer`][counters.services.reservations.escrow.Escrow.transfer] / [`receive_transfers`][counters.services.reservations.escrow.Escrow.receive_transfers] move units between shares in
two idempotent steps; on MRSC the transaction-based strategies and sharding are refused, and a
release takes three single-item steps.

Give back (``release``): one transaction on every strategy (three steps where the table has none) - the record's status
``CONFIRMED -> RELEASED`` (conditioned on ``CONFIRMED``; it records ``releasedBy``, the
request's id, and starts the TTL) plus the approach's give-back on each counter item of the
allocation - so the quantity returns exactly once whatever retries.
"""

from counters.services.reservations.model import (
    CLAIM_SECONDS,
    PublicReservation,
    PublicResource,
    RegionShare,
    ReservationDetails,
    ReservationSettings,
    Transferred,
    reservation_id,
)
from counters.services.reservations.service import Reservations

__all__ = [
    "CLAIM_SECONDS",
    "PublicReservation",
    "PublicResource",
    "RegionShare",
    "ReservationDetails",
    "ReservationSettings",
    "Reservations",
    "Transferred",
    "reservation_id",
]
