"""Approach 4, transaction with a client request token (CRT).

The delta is a one-item ``TransactWriteItems`` (``ADD`` + threshold condition) whose
ClientRequestToken is **derived from the request's idempotency token** (``uuid5`` of the
token, the table and the counter's key: 36 chars, the API's maximum; DynamoDB keeps tokens
per account and Region, not per table) and pinned across every retry
([`counters.core.engine.transact`][counters.core.engine.transact] with ``token=``). DynamoDB remembers a successful token for
10 minutes: the same token with the same parameters is answered with success and changes
nothing; with other parameters it is ``IdempotentParameterMismatch``.

Guarantees:
    * Thresholds: always held (a condition in the transaction).
    * Ambiguous failure (5xx/timeout after sending): the retry re-sends the same token; a
      committed first attempt is replayed, never re-applied. Exact.
    * SDK retries: transparent (the same token is re-sent).
    * Client retries / redelivered requests (same token): within **10 minutes** of the first
      success they replay and change nothing. DynamoDB answers a replay exactly like the
      original (real DynamoDB reports read instead of write units; DynamoDB Local reports the
      same constant), so this layer reports ``applied`` for both; the reservations service
      tells them apart with its reservation record (its conditional Put decides 201 vs 200).
      The same token with a different delta is ``rejected`` / ``token_mismatch``.
    * **Outside the window the guarantee ends**: DynamoDB has forgotten the token and a
      redelivery would apply again. The reservations service answers such replays from its
      reservation record (kept with a TTL) *before* calling this approach; only a replay
      whose record was never written (the caller died between the two writes) and arrives
      after 10 minutes is applied twice.
    * ``contention`` (conflicts/throttling/unknowns past the budget): re-driving the same
      request with the same token is safe within the window.
    * Write sharding: a single-shard attempt derives its token from the shard's key, and
      shards are tried in an order derived from the token, so a redelivery retraces the
      original's path and replays where it committed (while no capacity was given back to
      a shard earlier in that order in between: then it can apply twice). A split uses a
      token per round; ``IdempotentParameterMismatch`` on it means that round already
      committed a (different) split for this token: ``duplicate`` (reason ``split_token_used``).
      Assumes, as DynamoDB Local does, that a token whose transaction was cancelled may be
      sent again (the layer's tx runner already relies on it for pinned tokens).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import replace

from counters.core.outcome import Outcome
from counters.primitives.approaches import Approach, Reason, TakeResult, allocation_of, rejection, result
from counters.store.expr import Put, Update
from counters.store.resources_counters import Fields, Key, adjust
from counters.store.resources_records import Status, record_put

NAMESPACE = uuid.UUID("6f1c1e0a-5d0b-4a57-9a53-7a11e5c0c4e1")


def client_request_token(token: str, scope: str) -> str:
    """A deterministic ClientRequestToken (36 chars) for ``token`` within ``scope``."""
    return str(uuid.uuid5(NAMESPACE, f"{token}|{scope}"))


class Crt(Approach):
    """Approach 4: a transaction whose ClientRequestToken derives from the request's token; see the module."""

    name = "crt"
    exact = True  # within the 10-minute window
    needs_token = True
    shardable = True
    traits = ("10 minutes (DynamoDB)", "within the window")

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """A one-item transaction under the token's ClientRequestToken."""
        token = self.require_token(token)
        crt = client_request_token(token, f"{self.table_name}|{key['PK']}")
        return self._run([adjust(self.table_name, key, delta, bounded)], None, crt, (Outcome.REJECTED, Reason.TOKEN_MISMATCH))

    def apply_split(self, parts: list[tuple[Key, int]], *, token: str, record: Fields | None = None, round_: int = 1) -> TakeResult:
        """One transaction over the shards. With a ``record`` it also Puts the reservation record
        (as ``marker`` does): a split spans shards, so its ClientRequestToken is per round, and a
        re-drive whose answer was lost could not find its way back to it; the record, read
        first by the reservations service, answers it instead (never a second take, never a
        false "sold out" over the split's own take)."""
        updates = [adjust(self.table_name, key, part) for key, part in parts]
        quantity, allocation = sum(part for _, part in parts), allocation_of(parts)
        put = (
            record_put(self.table_name, token, quantity, allocation, record, Status.CONFIRMED, self.store.region)
            if record is not None
            else None
        )
        crt = client_request_token(token, f"{self.table_name}|split#{round_}")
        done = self._run(updates, put, crt, (Outcome.DUPLICATE, Reason.SPLIT_TOKEN_USED), token=token, quantity=quantity)
        if done.outcome is Outcome.APPLIED:
            done.value = replace(done.value, allocation=allocation)
        return done

    def shard_order(self, count: int, token: str | None, rng: random.Random) -> list[int]:
        """Deterministic per token: a redelivery retraces the original's shards."""
        start = int(hashlib.sha256((token or "").encode()).hexdigest(), 16) % count if token else rng.randrange(count)
        return [(start + i) % count for i in range(count)]

    def _run(
        self, updates: list[Update], put: Put | None, crt: str, mismatch: tuple[Outcome, Reason], *, token: str = "", quantity: int = 0
    ) -> TakeResult:
        taken = self.store.take(updates, put, token=crt)
        if taken.mismatch:
            return result(mismatch[0], taken.capacity, taken.attempts, mismatch[1])
        if taken.outcome is Outcome.REJECTED:
            known = self.recorded(taken, token, quantity) if put is not None else None
            if known is not None:
                return known
            reason, facts = rejection(taken.counter)
            return result(Outcome.REJECTED, taken.capacity, taken.attempts, reason, facts)
        return result(taken.outcome, taken.capacity, taken.attempts, Reason.CONFIRMED_AFTER_UNKNOWN if taken.unknown_seen else None)


APPROACH = Crt
