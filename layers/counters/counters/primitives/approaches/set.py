"""Approach 7, counting with a set: the counter item holds a string set of request tokens.

A take is one ``UpdateItem``: ``ADD tokens {t}`` with the delta, conditioned on
``size(tokens) < :max AND NOT contains(tokens, :t)`` (or no set yet) and the threshold. A
give-back removes the token (``DELETE tokens {t}``) conditioned on ``contains(tokens, :t)``,
so it happens exactly once.

Guarantees
    * Thresholds: always held (a condition of the same write).
    * Ambiguous failure (5xx/timeout after sending): retrying is safe - the token's presence
      makes a committed write's re-send fail its condition. On a condition failure the item
      (``ALL_OLD``) says why: our token is in the set -> applied earlier (``applied`` if one of
      our sends had an unknown outcome, ``duplicate`` otherwise); the set is full ->
      ``rejected`` / ``set_full``; otherwise ``rejected`` / ``threshold``. Exact.
    * SDK retries / client retries / redelivery: a re-sent take finds its token:
      ``duplicate``; never counted twice, for as long as the token stays in the set (until
      it is given back).
    * Bounded size: at most ``max_tokens`` live tokens. Item size drives WCU (DynamoDB
      rounds each write up to the next KB of the larger of the old and new item); measured
      on DynamoDB Local with 36-char tokens: 1 WCU up to 27 tokens, then +1 WCU per ~25
      tokens. The default cap, 250 tokens, keeps the item under ~10 KB (<= 10 WCU a write).
      A take on a full set is a clear ``rejected`` / ``set_full``; it clears as tokens are
      given back. Not shardable (a token's presence must be checked in one item).
"""

from __future__ import annotations

from typing import Any

from counters.core.engine import Report, Stop, run
from counters.core.failures import Classified, RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result
from counters.primitives.approaches import (
    AVAILABLE,
    RESERVED,
    Approach,
    Fields,
    Key,
    guard,
    names,
    rejection,
    result,
)

TOKENS = "tokens"
DEFAULT_MAX_TOKENS = 250

# Condition fragments
UNSEEN_WITH_ROOM = "(attribute_not_exists(#tokens) OR (size(#tokens) < :max AND NOT contains(#tokens, :t)))"
# ^ a token counts once, and the set (the item, the WCU) stays bounded
SEEN = "contains(#tokens, :t)"  # give back only what this token took, once


class TokenSet(Approach):
    name = "set"
    exact = True
    needs_token = True
    shardable = False

    def __init__(
        self, table_name: str, *, max_tokens: int = DEFAULT_MAX_TOKENS, dynamodb: Any = None, retry: RetryPolicy | None = None
    ) -> None:
        super().__init__(table_name, dynamodb=dynamodb, retry=retry)
        self.max_tokens = max_tokens

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> Result:
        token = self.require_token(token)
        take = delta > 0
        values: dict[str, Any] = {":d": delta, ":nd": -delta, ":q": abs(delta), ":t": token, ":ts": {token}}
        if take:
            expression = "ADD #tokens :ts, #reserved :d, #available :nd"
            condition = f"{guard(delta, bounded)} AND {UNSEEN_WITH_ROOM}"
            values[":max"] = self.max_tokens
        else:
            expression = "DELETE #tokens :ts ADD #reserved :d, #available :nd"
            condition = f"{guard(delta, bounded)} AND {SEEN}"
        params = {
            "TableName": self.table_name,
            "Key": to_item(key),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {**names(), "#tokens": TOKENS},
            "ExpressionAttributeValues": to_item(values),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

        def why(report: Report, failure: Classified) -> Stop:
            # a re-send after an unknown outcome is safe: the token guards it, and ALL_OLD says why it failed
            return Stop(self._why(failure.old_item(0), token, delta, take, report.unknown_seen, report.capacity, report.attempts))

        report = run(self.dynamodb.update_item, params, policy=self.retry, write=True, on_condition=why)
        if report.stopped:
            return report.value
        return result(report.outcome, report.capacity, report.attempts)

    def _why(
        self, old: dict[str, Any] | None, token: str, delta: int, take: bool, unknown: bool, capacity: Capacity, attempt: int
    ) -> Result:
        item = from_item(old)
        if item is None:
            return result(Outcome.REJECTED, capacity, attempt, "missing")
        tokens = item.get(TOKENS) or set()
        if take and token in tokens:
            return result(Outcome.APPLIED if unknown else Outcome.DUPLICATE, capacity, attempt, "token_in_set")
        if not take and token not in tokens:
            return result(Outcome.APPLIED if unknown else Outcome.DUPLICATE, capacity, attempt, "token_not_in_set")
        if take and len(tokens) >= self.max_tokens:
            return result(Outcome.REJECTED, capacity, attempt, "set_full", available=int(item[AVAILABLE]), reserved=int(item[RESERVED]))
        reason, value = rejection(old, delta)
        return result(Outcome.REJECTED, capacity, attempt, reason, **value)

    def release_action(self, key: dict[str, str], quantity: int, token: str) -> dict[str, Any]:
        action = super().release_action(key, quantity, token)
        update = action["Update"]
        update["UpdateExpression"] = "DELETE #tokens :ts ADD #reserved :d, #available :nd"
        update["ConditionExpression"] += f" AND {SEEN}"
        update["ExpressionAttributeNames"]["#tokens"] = TOKENS
        update["ExpressionAttributeValues"].update(to_item({":t": token, ":ts": {token}}))
        return action


APPROACH = TokenSet
