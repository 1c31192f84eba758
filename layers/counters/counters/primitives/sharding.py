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
   again a few rounds, then answers ``contention``.

Every part is guarded by its own shard's condition, so no shard (and therefore no total)
ever goes below zero. The resource reads as the sum of its shards (:func:`snapshot`).
"""

from __future__ import annotations

import random
from typing import Any

from counters.core.engine import read
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result
from counters.primitives.approaches import AVAILABLE, RESERVED, Approach, result

MAX_SHARDS = 20
ROUNDS = 4


def shard_key(resource_id: str, n: int) -> dict[str, str]:
    return {"PK": f"RES#{resource_id}#{n}", "SK": "SHARD"}


def split_capacity(capacity: int, shards: int) -> list[int]:
    return [capacity // shards + (1 if n < capacity % shards else 0) for n in range(shards)]


def snapshot(
    ddb: Any, table_name: str, keys: list[dict[str, str]], capacity: Capacity, policy: RetryPolicy | None = None
) -> list[dict[str, Any]]:
    """Every shard item, read in one serializable snapshot (2 RCU per item up to 4 KB).

    A snapshot is cancelled when it overlaps a transaction writing those items
    (TransactionConflict) or is throttled: it is a read, so every classified failure is
    retried within ``policy``; past the budget, :class:`ContentionError`.
    """
    response = read(
        ddb.transact_get_items,
        policy or RetryPolicy(),
        capacity,
        TransactItems=[{"Get": {"TableName": table_name, "Key": to_item(key)}} for key in keys],
    )
    return [from_item(r.get("Item")) or {} for r in response["Responses"]]


def plan(keys: list[dict[str, str]], items: list[dict[str, Any]], quantity: int) -> list[tuple[dict[str, str], int]]:
    """Split ``quantity`` over the shards with the most available first (fewest parts)."""
    parts, left = [], quantity
    for key, item in sorted(zip(keys, items, strict=True), key=lambda ki: -int(ki[1].get(AVAILABLE, 0))):
        take = min(left, int(item.get(AVAILABLE, 0)))
        if take > 0:
            parts.append((key, take))
            left -= take
        if left == 0:
            break
    return parts


def take(
    approach: Approach,
    keys: list[dict[str, str]],
    quantity: int,
    *,
    token: str | None,
    record: dict[str, Any] | None = None,
    rng: random.Random | None = None,
) -> Result:
    """Take ``quantity`` from the shards at ``keys``; ``value["allocation"]`` says from where."""
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
            if single.outcome is Outcome.REJECTED and single.reason == "threshold":
                continue  # this shard cannot take it: fall to the next
            return _with(single, capacity, attempts, {keys[n]["PK"]: quantity})
        items = snapshot(approach.dynamodb, approach.table_name, keys, capacity, approach.retry)
        total = sum(int(item.get(AVAILABLE, 0)) for item in items)
        if total < quantity:
            return result(
                Outcome.REJECTED, capacity, attempts, "sold_out", available=total, reserved=sum(int(i.get(RESERVED, 0)) for i in items)
            )
        parts = plan(keys, items, quantity)
        split = approach.apply_split(parts, token=token or "", record=record, round_=round_)
        capacity.merge(split.capacity)
        attempts += split.attempts
        if split.outcome is Outcome.REJECTED and split.reason == "threshold":
            continue  # a concurrent take won a shard between the snapshot and the split
        return _with(split, capacity, attempts, {key["PK"]: part for key, part in parts})
    items = snapshot(approach.dynamodb, approach.table_name, keys, capacity, approach.retry)
    total = sum(int(item.get(AVAILABLE, 0)) for item in items)
    if total < quantity:
        return result(Outcome.REJECTED, capacity, attempts, "sold_out", available=total)
    return result(Outcome.CONTENTION, capacity, attempts, "shards_busy")


def _with(single: Result, capacity: Capacity, attempts: int, allocation: dict[str, int]) -> Result:
    value = dict(single.value or {})
    if single.outcome is Outcome.APPLIED:
        value.setdefault("allocation", allocation)
    single.value = value
    single.capacity = capacity
    single.attempts = attempts
    return single
