"""Appending an entry, then settling it: acknowledged only if it is, or will be, counted.

The cases (fast path, the checkpoint fence, withdrawing a stranded entry, a duplicate behind the
checkpoint) and why each is exact: [docs/ledgers.md, "After the Put"](../ledgers.md#after-the-put).
"""

from __future__ import annotations

from counters.core.commands import new_request_id
from counters.core.errors import ContentionError, IdempotencyKeyExpired, InvalidRequest
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.records import dataclass
from counters.primitives.ledger.base import AMOUNT_LIMIT, LedgerBase, Reason
from counters.store.ledger import Fence, PutStatus
from counters.store.ledger_items import EntryKey, parse_key


@dataclass
class Appended(Result):
    """What [`append`][counters.primitives.ledger.append.Appends.append] returns: a [`Result`][counters.core.outcome.Result] whose ``value`` is typed."""

    value: str = ""
    """The entry's id (the same for every re-send of its key, whatever the outcome)."""


class Appends(LedgerBase):
    """[`append`][counters.primitives.ledger.append.Appends.append] and what it needs (the ledger's other parts are in the sibling modules)."""

    def check_fresh(self, key: EntryKey) -> None:
        """Refuse keys outside [now - retry_window, now + max_future_skew]."""
        now = self._now_ms()
        if key.at_ms < now - int(self.retry_window * 1000):
            raise IdempotencyKeyExpired(
                f"the Idempotency-Key is from {(now - key.at_ms) / 1000:.0f}s ago; keys older than "
                f"{self.retry_window:.0f}s are refused (their entry may already be merged): send a new key"
            )
        if key.at_ms > now + int(self.max_future_skew * 1000):
            raise InvalidRequest("the Idempotency-Key's time is in the future; check the client clock")

    def _is_fresh(self, key: EntryKey) -> bool:
        return key.at_ms >= self._now_ms() - int(self.retry_window * 1000)

    def append(self, ledger_id: str, amount: int, idempotency_key: str, *, request_id: str | None = None) -> Appended:
        """Write one entry. ``value`` is the entry id.

        Outcomes: ``applied``; ``duplicate`` (this key's entry exists with this amount);
        ``rejected`` with reason [`Reason.KEY_REUSED`][counters.primitives.ledger.base.Reason.KEY_REUSED] (same key, other amount) or
        [`Reason.KEY_EXPIRED`][counters.primitives.ledger.base.Reason.KEY_EXPIRED]; ``contention``; ``ambiguous`` only when the key expired while
        retrying an unknown outcome. Raises [`InvalidRequest`][counters.core.errors.InvalidRequest] for a bad amount or key, before
        any write.
        """
        if isinstance(amount, bool) or not isinstance(amount, int) or amount == 0 or abs(amount) > AMOUNT_LIMIT:
            raise InvalidRequest(f"amount must be a non-zero integer with |amount| <= {AMOUNT_LIMIT}")
        key = parse_key(idempotency_key)
        result = Appended(Outcome.CONTENTION, value=key.entry_id)
        try:
            self.check_fresh(key)
        except IdempotencyKeyExpired:
            result.outcome, result.reason = Outcome.REJECTED, Reason.KEY_EXPIRED
            return result
        if self.policy.others and self._seen_elsewhere(ledger_id, key, amount, result):
            return result  # a failover re-send: another Region's entry for this key answers it
        if not self._mark_dirty(ledger_id, key, result.capacity):
            return result
        # the entry carries the id of the request that wrote it: a re-drive of that request knows it is its own
        mine = request_id or new_request_id()
        put = self.store.put_entry(
            ledger_id,
            key,
            amount,
            mine,
            result.capacity,
            before=lambda: self._is_fresh(key) and self._stage("put_sending"),  # before EVERY attempt: the retry-window bound holds per Put
        )
        if put.status is PutStatus.STOPPED:
            # Expired between attempts: nothing applied unless an earlier outcome was unknown.
            result.outcome = Outcome.AMBIGUOUS if put.unknown_seen else Outcome.REJECTED
            result.reason = Reason.KEY_EXPIRED
            return result
        result.attempts = put.attempts
        self._stage("entry_written")
        if put.status is PutStatus.CREATED:
            result.outcome = Outcome.APPLIED
            return self._settle(ledger_id, key, result, owner=mine, mine=mine, unknown_seen=put.unknown_seen)
        if put.status is PutStatus.CONTENTION or put.found is None:
            return result  # contention: safe to re-drive with the same key
        if put.found.amount != amount:
            result.outcome, result.reason = Outcome.REJECTED, Reason.KEY_REUSED
            return result
        # This request's own earlier attempt (its answer was lost), or an earlier request with this key.
        owner = put.found.request_id
        result.outcome = Outcome.APPLIED if owner == mine else Outcome.DUPLICATE
        return self._settle(ledger_id, key, result, owner=owner, mine=mine, unknown_seen=put.unknown_seen)

    def _within_fast_path(self, key: EntryKey) -> bool:
        """No compaction in any Region can have merged past ``key`` yet (clocks within ``clock_skew``)."""
        return self._now_ms() <= key.at_ms + int((self.retry_window + self.margin - self.clock_skew) * 1000)

    def _seen_elsewhere(self, ledger_id: str, key: EntryKey, amount: int, result: Appended) -> bool:
        """A failover re-send where conditions see this replica only: answer from another Region's entry for ``key`` if this replica holds one.

        True when ``result`` is the answer: ``duplicate`` (same amount; the entry exists, so by the
        fast-path bound no compaction of its Region can have stranded it), ``key_reused`` (another
        amount), ``key_expired`` (past the fast path: it cannot be told here whether it counted), or
        contention. An entry that has not replicated here yet is not seen: [docs/ledgers.md](../ledgers.md), "Global
        tables" (the failover guarantee).
        """
        try:
            sightings = self.store.sightings(ledger_id, key, result.capacity)
        except ContentionError:
            return True  # result is CONTENTION: safe to re-drive with the same key
        if not sightings or any(s.writer == self.writer for s in sightings):
            return False  # none, or this Region's own entry: the Put decides as in one Region
        first = min(sightings, key=lambda s: s.writer)
        if first.amount != amount:
            result.outcome, result.reason = Outcome.REJECTED, Reason.KEY_REUSED
        elif self._within_fast_path(key):
            result.outcome = Outcome.DUPLICATE
        else:
            result.outcome, result.reason = Outcome.REJECTED, Reason.KEY_EXPIRED
        return True

    def _settle(self, ledger_id: str, key: EntryKey, result: Appended, *, owner: str | None, mine: str, unknown_seen: bool) -> Appended:
        """Acknowledge the entry (``result`` as it is) only if it is, or will be, counted.

        ``owner`` is the request id on the entry found (``mine`` when this request wrote it).
        See "After the Put" in [docs/ledgers.md](../ledgers.md) for why every branch is exact.
        """
        if self._within_fast_path(key):
            return result  # fast path: no compaction anywhere can have merged past this key yet
        try:
            fence = self.store.fence(ledger_id, key, result.capacity)
            if fence is Fence.ABOVE:
                return result  # above mergedThrough, and every compaction in flight must re-read: counted
            if fence is Fence.CONTENTION:
                return self._unsettled(result)
            # mergedThrough >= this entry: it was merged (counted) or it is stranded (never counted)
            if owner == mine:
                return self._withdraw(ledger_id, key, result, mine=mine, unknown_seen=unknown_seen)
            if self._counted(ledger_id, key, owner, result.capacity):
                return result  # DUPLICATE: the earlier request's entry was merged
        except ContentionError:
            return self._unsettled(result)
        result.outcome, result.reason = Outcome.REJECTED, Reason.KEY_EXPIRED
        return result

    @staticmethod
    def _unsettled(result: Appended) -> Appended:
        """The entry exists but whether it counts is not known yet: safe to re-drive the same key."""
        result.outcome, result.reason = Outcome.CONTENTION, None
        return result

    def _withdraw(self, ledger_id: str, key: EntryKey, result: Appended, *, mine: str, unknown_seen: bool) -> Appended:
        """Delete this request's stranded entry and record that it did, in one transaction."""
        outcome = self.store.withdraw(ledger_id, key, mine, self._now_ms(), result.capacity)
        if outcome is Outcome.REJECTED and not self.store.withdrawn(ledger_id, key, mine, result.capacity):
            return result  # gone, and not by this request's hand: a compaction merged it (counted)
        if outcome is Outcome.CONTENTION:
            return self._unsettled(result)
        # Withdrawn (now, or by another delivery of this request): this entry was never counted.
        result.outcome = Outcome.AMBIGUOUS if unknown_seen else Outcome.REJECTED
        result.reason = Reason.KEY_EXPIRED
        return result

    def _counted(self, ledger_id: str, key: EntryKey, owner: str | None, capacity: Capacity) -> bool:
        """For a duplicate at or below mergedThrough: was the owner's entry merged?"""
        current = self.store.entry_owner(ledger_id, key, capacity)
        if current is not None and current.request_id == owner:
            return False  # still there, stranded: its own request withdraws it (or it simply never counts)
        return owner is None or not self.store.withdrawn(ledger_id, key, owner, capacity)

    def _mark_dirty(self, ledger_id: str, key: EntryKey, capacity: Capacity) -> bool:
        """Record that ``ledger_id`` has entries in ``key``'s time bucket (once per process)."""
        bucket = key.at_ms - key.at_ms % self.marker_bucket_ms
        marked = self._marked
        if (ledger_id, bucket) in marked:
            return True
        if not self.store.mark_dirty(ledger_id, bucket, capacity):
            return False
        if len(marked) > 10_000:
            marked.clear()
        marked.add((ledger_id, bucket))
        return True
