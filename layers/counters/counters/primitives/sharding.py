"""Write sharding (seed 02, "Scaling a counter"): one counter split over N shard items.

A resource of capacity C with N shards keeps its count on ``RES#<id>#<n>`` / ``SHARD``
(n = 0..N-1), shard n holding ``C // N`` (+1 for the first ``C % N`` shards). A take:

1. tries one shard (the approach's ``shard_order``: random start for atomic/marker, derived
   from the token for crt), then falls to the others when it cannot take the quantity;
2. when no single shard can, reads every shard in one ``TransactGetItems`` (a consistent
   snapshot) and, if the total suffices, splits the quantity over shards (largest first)
   in **one** transaction, each part guarded by its shard's threshold;
3. answers ``rejected`` / ``sold_out`` **only** when that snapshot's total is below the
   quantity; when the total suffices but concurrent takes keep winning the race, it tries
   again a few rounds, then answers ``contention``. A snapshot that cannot be read within the
   retry budget (cancelled by concurrent writes, throttled, timed out) is ``contention`` too:
   it is read only after every attempt of this take was definitely not applied, so re-sending
   the same request is safe.

Every part is guarded by its own shard's condition, so no shard (and therefore no total)
ever goes below zero. The resource reads as the sum of its shards
([`counters.store.resources.ResourceStore.snapshot`][counters.store.resources.ResourceStore.snapshot], where the shard keys live too).
"""

from __future__ import annotations

import random
from enum import StrEnum

from counters.core.errors import ContentionError
from counters.core.outcome import Capacity, Outcome
from counters.primitives.approaches import Approach, Reason, TakeFacts, TakeResult, result
from counters.store.resources_counters import MAX_SHARDS, Counter, Fields, Key, shard_key

__all__ = ["MAX_SHARDS", "ROUNDS", "ShardReason", "plan", "shard_key", "split_capacity", "take"]

ROUNDS = 4
"""How many rounds a take tries (each shard alone, then a split over them) before it answers contention."""


class ShardReason(StrEnum):
    """Why a sharded take answered as it did, beyond its approach's [`Reason`][counters.primitives.approaches.Reason]."""

    SOLD_OUT = "sold_out"
    SHARDS_BUSY = "shards_busy"


def split_capacity(capacity: int, shards: int) -> list[int]:
    """``capacity`` split over ``shards`` as evenly as possible (the first ones take the remainder)."""
    return [capacity // shards + (1 if n < capacity % shards else 0) for n in range(shards)]


def plan(keys: list[Key], counters: list[Counter], quantity: int) -> list[tuple[Key, int]]:
    """Split ``quantity`` over the shards with the most available first (fewest parts)."""
    parts, left = [], quantity
    for key, counter in sorted(zip(keys, counters, strict=True), key=lambda kc: -kc[1].available):
        part = min(left, counter.available)
        if part > 0:
            parts.append((key, part))
            left -= part
        if left == 0:
            break
    return parts


def take(
    approach: Approach,
    keys: list[Key],
    quantity: int,
    *,
    token: str | None,
    record: Fields | None = None,
    rng: random.Random | None = None,
) -> TakeResult:
    """Take ``quantity`` from the shards at ``keys``; ``value.allocation`` says from where (when it applied)."""
    if not approach.shardable:
        raise ValueError(f"the {approach.name} approach does not support write sharding")
    rng = rng or random.Random()
    capacity, attempts = Capacity(), 0
    order = approach.shard_order(len(keys), token, rng)
    for round_ in range(1, ROUNDS + 1):
        for n in order:
            single = approach.apply(keys[n], quantity, token=token, record=record)
            capacity.merge(single.capacity)
            attempts += single.attempts
            if single.outcome is Outcome.REJECTED and single.reason == Reason.THRESHOLD:
                continue  # this shard cannot take it: fall to the next
            return _with(single, capacity, attempts, {keys[n]["PK"]: quantity})
        counters = _snapshot(approach, keys, capacity)
        if counters is None:
            return result(Outcome.CONTENTION, capacity, attempts, ShardReason.SHARDS_BUSY)
        total = sum(c.available for c in counters)
        if total < quantity:
            reserved = sum(c.reserved for c in counters)
            return result(Outcome.REJECTED, capacity, attempts, ShardReason.SOLD_OUT, TakeFacts(available=total, reserved=reserved))
        parts = plan(keys, counters, quantity)
        split = approach.apply_split(parts, token=token or "", record=record, round_=round_)
        capacity.merge(split.capacity)
        attempts += split.attempts
        if split.outcome is Outcome.REJECTED and split.reason == Reason.THRESHOLD:
            continue  # a concurrent take won a shard between the snapshot and the split
        return _with(split, capacity, attempts, {key["PK"]: part for key, part in parts})
    counters = _snapshot(approach, keys, capacity)
    if counters is not None and sum(c.available for c in counters) < quantity:
        return result(Outcome.REJECTED, capacity, attempts, ShardReason.SOLD_OUT, TakeFacts(available=sum(c.available for c in counters)))
    return result(Outcome.CONTENTION, capacity, attempts, ShardReason.SHARDS_BUSY)


def _snapshot(approach: Approach, keys: list[Key], capacity: Capacity) -> list[Counter] | None:
    """Every shard in one consistent read, or ``None`` when the read outlasted its retry budget
    (the take then answers ``contention``, an outcome, like any other busy attempt)."""
    try:
        return approach.store.snapshot(keys, capacity)
    except ContentionError:
        return None


def _with(single: TakeResult, capacity: Capacity, attempts: int, allocation: dict[str, int]) -> TakeResult:
    if single.outcome is Outcome.APPLIED:
        single.value = single.value.held(allocation)
    single.capacity = capacity
    single.attempts = attempts
    return single
