"""Approach 5, transaction with a marker item: the counter update + a Put of ``RSV#<token>``.

One ``TransactWriteItems``: the counter update (``ADD`` + threshold condition) and a Put of
the marker item ``RSV#<token>`` / ``RSV`` conditioned on ``attribute_not_exists(PK)``. The
marker is the request's memory: it carries ``quantity``, ``status`` (``CONFIRMED``),
``createdAt`` and the shard ``allocation``, and no TTL while it holds a quantity (an expired
marker would strand it: the release that gives it back starts the TTL),
so it doubles as the reservation record.

Guarantees:
    * Thresholds: always held (a condition in the transaction).
    * Ambiguous failure: the in-line retry re-sends the same ClientRequestToken (replayed if
      it committed); a retry after the token's window, or any redelivery, is cancelled by
      the marker's condition.
    * On cancellation the marker tells duplicate from threshold: the marker's condition
      failed -> read it (``ALL_OLD``; a ``GetItem`` if absent): same quantity ->
      ``duplicate``, another quantity -> ``rejected`` / ``token_mismatch``. Only the
      counter's condition failed -> ``rejected`` / ``threshold`` (or ``missing``).
    * SDK retries / client retries / redelivery: ``duplicate`` for as long as the marker
      lives: for as long as it holds the quantity, and the released record's TTL after. Exact.
    * Write sharding: supported; the marker is one per request whatever the shards, so a
      split or a fallback to another shard stays exact.
    * Cost: two items per transactional write (2 x 2 WCU per <= 1 KB item): the most
      expensive approach.
"""

from __future__ import annotations

from counters.core.outcome import Outcome
from counters.primitives.approaches import Approach, Reason, TakeFacts, TakeResult, allocation_of, rejection, result
from counters.store.resources_counters import Fields, Key, adjust
from counters.store.resources_records import Status, record_key, record_put

marker_key = record_key  # the marker is the reservation record


class Marker(Approach):
    """Approach 5: the counter update and the request's marker item in one transaction; see the module."""

    name = "marker"
    exact = True
    needs_token = True
    shardable = True
    writes_record = True
    traits = ("marker item (TTL)", "yes")

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """Take ``delta`` (> 0) and write the marker; a give-back is [`release_update`][counters.primitives.approaches.Approach.release_update]."""
        token = self.require_token(token)
        if delta <= 0:
            raise ValueError("marker applies takes (delta > 0); give back with release_update under the marker's status guard")
        return self._run([(key, delta)], token, delta, record, bounded)

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> TakeResult:
        """Take the parts and write one marker holding their allocation, in one transaction."""
        return self._run(parts, token, sum(p for _, p in parts), record, True)

    def _run(self, parts: list[tuple[Key, int]], token: str, quantity: int, record: Fields | None, bounded: bool) -> TakeResult:
        allocation = allocation_of(parts)
        updates = [adjust(self.table_name, key, part, bounded) for key, part in parts]
        taken = self.store.take(
            updates, record_put(self.table_name, token, quantity, allocation, record or {}, Status.CONFIRMED, self.store.region)
        )
        capacity, attempts = taken.capacity, taken.attempts
        if taken.outcome is Outcome.APPLIED:
            reason = Reason.CONFIRMED_AFTER_UNKNOWN if taken.unknown_seen else None
            return result(Outcome.APPLIED, capacity, attempts, reason, TakeFacts(allocation=allocation))
        if taken.outcome is not Outcome.REJECTED:
            return result(taken.outcome, capacity, attempts)
        known = self.recorded(taken, token, quantity)
        if known is not None:
            return known
        reason, facts = rejection(taken.counter)
        return result(Outcome.REJECTED, capacity, attempts, reason, facts)


APPROACH = Marker
