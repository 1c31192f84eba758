"""Approach 3, OCC with history: the entity tag is a chain of the last N writers.

The counter item carries ``version`` (one more per write) and ``tags``, a list of the tags of
the last writes, oldest first, trimmed to ``history`` entries (the seed's "same approach with
a list instead of a string"). A call's tag is **derived from its request token**
(``sha256(token)[:16]``), so the chain remembers *requests*, not just attempts. A write sets
the new values, ``version = v + 1`` and the chain plus our tag, conditioned on
``version = v`` (the version read).

Guarantees
    * Thresholds: always held (checked on the read the version condition pins).
    * Ambiguous failure (5xx/timeout after sending): re-read. Our tag in the chain ->
      ``applied``. Otherwise, if the chain still reaches back to version ``v + 1`` (the slot
      our write would have taken), another writer took it -> definitely not applied: retry.
      Only when more than N writes happened in between (the slot fell off the chain) is the
      call ``ambiguous`` (reason ``fell_off_chain``).
    * SDK retries: the re-send fails its condition and ``ALL_OLD`` shows our tag: success,
      counted once. It is reported ``duplicate``: the layer cannot tell its own invisible
      first send from a concurrent twin with the same token (both are the same request).
    * Client retries / redelivered requests with the same token: recognised as
      ``duplicate`` **as long as the original is among the last N writes** (the bound); a
      redelivery arriving after N further writes applies again.
    * Item size: N tags of 16 chars (default N = 32: about 0.7 KB, 1 WCU per write). Not
      shardable here.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified, RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result
from counters.primitives.approaches import AVAILABLE, RESERVED, Approach, Fields, Key, names, result
from counters.primitives.approaches.occ import breaches

VERSION = "version"
TAGS = "tags"
DEFAULT_HISTORY = 32

# Condition fragments
VERSION_UNCHANGED = "#version = :v"  # nobody wrote since our read: the chain we append to is current
EXISTS = "attribute_exists(#pk)"  # never resurrect a deleted counter


def tag_for(token: str | None) -> str:
    """The chain entry for a request: derived from its token, random without one."""
    if not token:
        return uuid.uuid4().hex[:16]
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def resolve(item: dict[str, Any] | None, read_version: int, mine: str) -> str:
    """After an unknown outcome: ``applied``, ``not_applied`` or ``unknown`` (slot fell off)."""
    if item is None:
        return "unknown"
    tags = list(item.get(TAGS) or [])
    if mine in tags:
        return "applied"
    version = int(item[VERSION])
    if version == read_version:
        return "not_applied"
    oldest = version - len(tags) + 1  # the version of tags[0]
    return "not_applied" if oldest <= read_version + 1 else "unknown"


class OccHistory(Approach):
    name = "occ_history"
    exact = True  # within the bound: a duplicate older than N writes is not recognised
    needs_token = True
    shardable = False

    def __init__(self, table_name: str, *, history: int = DEFAULT_HISTORY, dynamodb: Any = None, retry: RetryPolicy | None = None) -> None:
        super().__init__(table_name, dynamodb=dynamodb, retry=retry)
        if history < 2:
            raise ValueError("history must keep at least 2 entries")
        self.history = history

    def initial_attributes(self, capacity: int) -> dict[str, Any]:
        return {**super().initial_attributes(capacity), VERSION: 0, TAGS: []}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> Result:
        capacity = Capacity()
        mine = tag_for(token)
        sent = False  # a send of ours may have committed: our tag then means "applied", not "duplicate"
        version = 0  # the version our pending write is conditioned on

        def plan(item: dict[str, Any] | None, attempts: int) -> Resend | Stop:
            """The next write from the item as last seen, or the verdict it already gives."""
            nonlocal version
            if item is None:
                return Stop(result(Outcome.REJECTED, capacity, attempts, "missing"))
            tags = list(item.get(TAGS) or [])
            if mine in tags:
                return Stop(result(Outcome.APPLIED if sent else Outcome.DUPLICATE, capacity, attempts, "found_in_chain"))
            if bounded and breaches(item, delta):
                value = {AVAILABLE: int(item[AVAILABLE]), RESERVED: int(item[RESERVED])}
                return Stop(result(Outcome.REJECTED, capacity, attempts, "threshold", **value))
            version = int(item[VERSION])
            return Resend(
                {
                    "TableName": self.table_name,
                    "Key": to_item(key),
                    "UpdateExpression": "SET #reserved = :r, #available = :a, #version = :next, #tags = :chain",
                    "ConditionExpression": f"{EXISTS} AND {VERSION_UNCHANGED}",
                    "ExpressionAttributeNames": {**names(), "#version": VERSION, "#tags": TAGS},
                    "ExpressionAttributeValues": to_item(
                        {
                            ":r": int(item[RESERVED]) + delta,
                            ":a": int(item[AVAILABLE]) - delta,
                            ":v": version,
                            ":next": version + 1,
                            ":chain": (tags + [mine])[-self.history :],
                        }
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            )

        def lost(report: Report, failure: Classified) -> Resend | Stop:
            return plan(from_item(failure.old_item(0)), report.attempts)  # plan checks our tag first

        def unknown(report: Report, _failure: Classified) -> Resend | Stop:
            nonlocal sent
            sent = True
            item = self.read(key, capacity)
            verdict = resolve(item, version, mine)
            if verdict == "applied":
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, "confirmed_after_unknown"))
            if verdict == "unknown":
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, "fell_off_chain"))
            return plan(item, report.attempts)  # another writer took our slot: definitely not applied, next round

        return self.optimistic(key, capacity, plan, lost, unknown)

    def release_action(self, key: dict[str, str], quantity: int, token: str) -> dict[str, Any]:
        """Give back and append the release's tag: ``version`` keeps matching the chain's end.

        The chain is not trimmed here (no read in a transaction); the next reserve trims it.
        """
        action = super().release_action(key, quantity, token)
        update = action["Update"]
        update["UpdateExpression"] += ", #version :one SET #tags = list_append(#tags, :mine)"
        update["ExpressionAttributeNames"].update({"#version": VERSION, "#tags": TAGS})
        update["ExpressionAttributeValues"].update(to_item({":one": 1, ":mine": [tag_for(f"release:{token}")]}))
        return action


APPROACH = OccHistory
