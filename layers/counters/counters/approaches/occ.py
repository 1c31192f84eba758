"""Approach 2, optimistic concurrency control: read the entity tag, write only if unchanged.

Each write sets ``reserved``/``available`` to values computed from the read and replaces
``tag`` with a fresh random one, conditioned on ``tag`` still being the one read. The
threshold is checked on the read values (the tag condition makes that check still true
at write time). Conflicts are retried within the :class:`~counters.dynamo.RetryPolicy`
(bounded, full jitter), re-reading the item each time (the loser gets it via ``ALL_OLD``).

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

from counters.approaches import AVAILABLE, RESERVED, Approach, names, result
from counters.dynamo import DYNAMO_ERRORS, Failure, classify, from_item, to_item
from counters.outcome import Capacity, Outcome, Result

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

    def apply(
        self,
        key: dict[str, str],
        delta: int,
        *,
        token: str | None = None,
        bounded: bool = True,
        record: dict[str, Any] | None = None,
    ) -> Result:
        capacity = Capacity()
        item = self.read(key, capacity)
        attempt = 0
        for attempt in range(1, self.retry.max_attempts + 1):
            if item is None:
                return result(Outcome.REJECTED, capacity, attempt, "missing")
            if bounded and breaches(item, delta):
                return result(
                    Outcome.REJECTED, capacity, attempt, "threshold", available=int(item[AVAILABLE]), reserved=int(item[RESERVED])
                )
            old, mine = item[TAG], new_tag()
            try:
                response = self.dynamodb.update_item(
                    TableName=self.table_name,
                    Key=to_item(key),
                    UpdateExpression="SET #reserved = :r, #available = :a, #tag = :new_tag",
                    ConditionExpression=f"{EXISTS} AND {TAG_UNCHANGED}",
                    ExpressionAttributeNames={**names(), "#tag": TAG},
                    ExpressionAttributeValues=to_item(
                        {":r": int(item[RESERVED]) + delta, ":a": int(item[AVAILABLE]) - delta, ":old_tag": old, ":new_tag": mine}
                    ),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    ReturnConsumedCapacity="TOTAL",
                )
            except DYNAMO_ERRORS as exc:
                capacity.add_response(getattr(exc, "response", None), write=True)
                failure = classify(exc)
                if failure is None:
                    raise
                if failure.kind is Failure.CONDITION:
                    item = from_item(failure.old_item(0))
                    if item is not None and item.get(TAG) == mine:
                        # a re-send (SDK retry) of a write that had committed: ours
                        return result(Outcome.APPLIED, capacity, attempt, "confirmed_after_resend")
                elif failure.kind is Failure.UNKNOWN:
                    item = self.read(key, capacity)
                    if item is not None and item.get(TAG) == mine:
                        return result(Outcome.APPLIED, capacity, attempt, "confirmed_after_unknown")
                    if item is None or item.get(TAG) != old:
                        return result(Outcome.AMBIGUOUS, capacity, attempt, "third_tag")
                    # tag unchanged: definitely not applied, retry with the same read
                # conflict/throttle/not sent: not applied; a stale read is caught by the tag condition
                if attempt < self.retry.max_attempts:
                    self.retry.backoff(attempt)
                continue
            capacity.add_response(response, write=True)
            return result(Outcome.APPLIED, capacity, attempt)
        return result(Outcome.CONTENTION, capacity, attempt)

    def release_action(self, key: dict[str, str], quantity: int, token: str) -> dict[str, Any]:
        action = super().release_action(key, quantity, token)
        update = action["Update"]
        update["UpdateExpression"] += " SET #tag = :new_tag"  # every change moves the tag: OCC readers see it
        update["ExpressionAttributeNames"]["#tag"] = TAG
        update["ExpressionAttributeValues"][":new_tag"] = {"S": new_tag()}
        return action


APPROACH = Occ
