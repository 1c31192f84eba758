"""Approach 7, counting with a set: the counter item holds a string set of request tokens.

A take is one ``UpdateItem``: ``ADD tokens {t}`` with the delta, conditioned on
``size(tokens) < :max AND NOT contains(tokens, :t)`` (or no set yet) and the threshold. A
give-back removes the token (``DELETE tokens {t}``) conditioned on ``contains(tokens, :t)``,
so it happens exactly once.

Guarantees:
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

from counters.core.engine import Report, Stop
from counters.core.failures import Classified
from counters.core.outcome import Capacity, Outcome
from counters.primitives.approaches import Approach, Reason, TakeFacts, TakeResult, rejection, result, verdict
from counters.store.expr import Path, Update
from counters.store.resources import ResourceStore, found
from counters.store.resources_counters import Counter, Fields, Key, adjust

DEFAULT_MAX_TOKENS = 250
TOKENS = "tokens"
"""The counter item's string set of the tokens it holds."""


def tokens_of(counter: Counter) -> frozenset[str]:
    """The tokens a counter item holds."""
    return frozenset(counter.state.get(TOKENS) or ())


def set_write(table: str, key: Key, delta: int, token: str, *, bounded: bool = True, max_tokens: int = 0) -> Update:
    """A take adds the token (a token counts once, the set stays bounded); a give-back deletes it,
    and only if it is there (it gives back only what this token took, once)."""
    update = adjust(table, key, delta, bounded)
    tokens = Path(TOKENS)
    if delta > 0:
        return update.add(TOKENS, {token}).when(tokens.missing() | ((tokens.size() < max_tokens) & ~tokens.contains(token)))
    return update.delete(TOKENS, {token}).when(tokens.contains(token))


class TokenSet(Approach):
    """Approach 7: the counter item holds a set of request tokens; see the module."""

    name = "set"
    exact = True
    needs_token = True
    attributes = (TOKENS,)
    traits = ("the token set", "yes (bounded size)")

    def __init__(self, store: ResourceStore, *, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        super().__init__(store)
        self.max_tokens = max_tokens

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """One ``UpdateItem`` adding (or, for a give-back, deleting) the token with the delta."""
        token = self.require_token(token)
        take = delta > 0

        def why(report: Report, failure: Classified) -> Stop:
            # a re-send after an unknown outcome is safe: the token guards it, and ALL_OLD says why it failed
            return Stop(self._why(found(failure), token, take, report.unknown_seen, report.capacity, report.attempts))

        update = set_write(self.table_name, key, delta, token, bounded=bounded, max_tokens=self.max_tokens)
        report = self.store.write_counter(update, on_condition=why)
        if report.stopped:
            return verdict(report.value)
        return result(report.outcome, report.capacity, report.attempts)

    def _why(self, counter: Counter | None, token: str, take: bool, unknown: bool, capacity: Capacity, attempt: int) -> TakeResult:
        if counter is None:
            return result(Outcome.REJECTED, capacity, attempt, Reason.MISSING)
        tokens = tokens_of(counter)
        if take and token in tokens:
            return result(Outcome.APPLIED if unknown else Outcome.DUPLICATE, capacity, attempt, Reason.TOKEN_IN_SET)
        if not take and token not in tokens:
            return result(Outcome.APPLIED if unknown else Outcome.DUPLICATE, capacity, attempt, Reason.TOKEN_NOT_IN_SET)
        if take and len(tokens) >= self.max_tokens:
            return result(Outcome.REJECTED, capacity, attempt, Reason.SET_FULL, TakeFacts.left(counter))
        reason, facts = rejection(counter)
        return result(Outcome.REJECTED, capacity, attempt, reason, facts)

    def give_back_token(self, token: str) -> str:
        """The take's own token: a give-back deletes it."""
        return token  # a give-back deletes the take's own token

    def release_update(self, key: Key, quantity: int, token: str) -> Update:
        """A give-back that deletes the take's token from the set."""
        return set_write(self.table_name, key, -quantity, token)


APPROACH = TokenSet
