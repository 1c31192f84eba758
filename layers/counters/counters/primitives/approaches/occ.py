"""Approach 2, optimistic concurrency control: read the entity tag, write only if unchanged.

Each write sets ``reserved``/``available`` to values computed from the read and replaces
``tag`` with a fresh random one, conditioned on ``tag`` still being the one read. The
threshold is checked on the read values (the tag condition makes that check still true
at write time). Conflicts are retried within the :class:`~counters.core.failures.RetryPolicy`
(bounded, full jitter): the loser's ``ALL_OLD`` shows the winner's item (our own tag there
means applied), and the next round is planned from a read made after the backoff.

Guarantees
    * Thresholds: always held (the write is conditioned on the state the check saw).
    * Ambiguous failure (5xx/timeout after sending): re-read the item.
      tag unchanged -> definitely not applied: retry safely;
      tag == the tag this call wrote -> ``applied`` (reason ``confirmed_after_unknown``);
      a third tag -> another writer came in between: ``ambiguous`` (reason ``third_tag``).
      A call never applies twice (each send is conditioned on a tag only one write can
      replace), so the counter never over-counts a call; an ``ambiguous`` call may be lost.
    * SDK retries (a re-sent write after a lost reply): the re-send fails its condition and
      ``ALL_OLD`` shows our own new tag, so it is recognised as ``applied``.
    * Client retries / redelivered requests: **not recognised** (tags are random, the token
      is ignored); a redelivery applies again (``exact = False``).
    * Contention: every concurrent writer but one loses each round; past the budget the call
      is ``contention`` (nothing applied). Not shardable here.
"""

from __future__ import annotations

import uuid
from typing import Any

from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result
from counters.primitives.approaches import AVAILABLE, RESERVED, Approach, Fields, Key, names, result

TAG = "tag"

# Condition fragments
TAG_UNCHANGED = "#tag = :old_tag"  # nobody wrote since our read: our computed values are still right
EXISTS = "attribute_exists(#pk)"  # never resurrect a deleted counter


def new_tag() -> str:
    return uuid.uuid4().hex[:16]


def breaches(item: dict[str, Any], delta: int) -> bool:
    return int(item[AVAILABLE]) < delta if delta > 0 else int(item[RESERVED]) < -delta


class Occ(Approach):
    name = "occ"
    exact = False
    needs_token = False
    shardable = False

    def initial_attributes(self, capacity: int) -> dict[str, Any]:
        return {**super().initial_attributes(capacity), TAG: new_tag()}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> Result:
        capacity = Capacity()
        mine = ""  # the tag our pending write sets
        old = ""  # the tag it is conditioned on

        def plan(item: dict[str, Any] | None, attempts: int) -> Resend | Stop:
            """The next write from the item as last seen, or the verdict it already gives."""
            nonlocal mine, old
            if item is None:
                return Stop(result(Outcome.REJECTED, capacity, attempts, "missing"))
            if bounded and breaches(item, delta):
                value = {AVAILABLE: int(item[AVAILABLE]), RESERVED: int(item[RESERVED])}
                return Stop(result(Outcome.REJECTED, capacity, attempts, "threshold", **value))
            old, mine = item[TAG], new_tag()
            return Resend(
                {
                    "TableName": self.table_name,
                    "Key": to_item(key),
                    "UpdateExpression": "SET #reserved = :r, #available = :a, #tag = :new_tag",
                    "ConditionExpression": f"{EXISTS} AND {TAG_UNCHANGED}",
                    "ExpressionAttributeNames": {**names(), "#tag": TAG},
                    "ExpressionAttributeValues": to_item(
                        {":r": int(item[RESERVED]) + delta, ":a": int(item[AVAILABLE]) - delta, ":old_tag": old, ":new_tag": mine}
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            )

        def lost(report: Report, failure: Classified) -> Resend | Stop:
            item = from_item(failure.old_item(0))
            if item is not None and item.get(TAG) == mine:  # a re-send (SDK retry) of a write that had committed: ours
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, "confirmed_after_resend"))
            return plan(item, report.attempts)  # another writer won: next round from what it wrote

        def unknown(report: Report, _failure: Classified) -> Stop | None:
            item = self.read(key, capacity)
            if item is not None and item.get(TAG) == mine:
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, "confirmed_after_unknown"))
            if item is None or item.get(TAG) != old:
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, "third_tag"))
            return None  # tag unchanged: definitely not applied, re-send the same write

        return self.optimistic(key, capacity, plan, lost, unknown)

    def release_action(self, key: dict[str, str], quantity: int, token: str) -> dict[str, Any]:
        action = super().release_action(key, quantity, token)
        update = action["Update"]
        update["UpdateExpression"] += " SET #tag = :new_tag"  # every change moves the tag: OCC readers see it
        update["ExpressionAttributeNames"]["#tag"] = TAG
        update["ExpressionAttributeValues"][":new_tag"] = {"S": new_tag()}
        return action


APPROACH = Occ
