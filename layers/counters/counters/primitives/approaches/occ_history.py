"""Approach 3, OCC with history: the entity tag is a chain of the last N writers.

The counter item carries ``version`` (one more per write) and ``tags``, a list of the tags of
the last writes, oldest first, trimmed to ``history`` entries (the seed's "same approach with
a list instead of a string"). A call's tag is **derived from its request token**
(``sha256(token)[:16]``), so the chain remembers *requests*, not just attempts. A write sets
the new values, ``version = v + 1`` and the chain plus our tag, conditioned on
``version = v`` (the version read).

Guarantees:
    * Thresholds: always held (checked on the read the version condition pins).
    * Ambiguous failure (5xx/timeout after sending): re-read. Our tag in the chain ->
      ``applied``. Otherwise, if the chain still reaches back to version ``v + 1`` (the slot
      our write would have taken), another writer took it -> definitely not applied: retry.
      Only when more than N writes happened in between (the slot fell off the chain) is the
      call ``ambiguous`` (reason ``fell_off_chain``). The same holds when a re-send after an
      unknown outcome fails its condition: a timed-out send may land late, so with its slot off
      the chain the call is ``ambiguous``, never a next round (which would apply it twice).
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
from enum import StrEnum

from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified
from counters.core.outcome import Capacity, Outcome
from counters.primitives.approaches import Approach, Reason, TakeFacts, TakeResult, result
from counters.primitives.approaches.occ import breaches
from counters.store.expr import Path, Update, list_append
from counters.store.resources import ResourceStore, found
from counters.store.resources_counters import AVAILABLE, EXISTS, RESERVED, Counter, Fields, Key, give_back

DEFAULT_HISTORY = 32
VERSION, TAGS = "version", "tags"
"""The counter item's write count and the chain of its last writers' tags (oldest first)."""


def chain_of(counter: Counter) -> tuple[int, tuple[str, ...]]:
    """The version and the tag chain a counter item holds."""
    return int(counter.state.get(VERSION, 0)), tuple(counter.state.get(TAGS) or ())


def chain_write(table: str, key: Key, seen: Counter, delta: int, chain: list[str]) -> Update:
    """The values from ``seen``, the next version and the chain, if nobody wrote since."""
    version = chain_of(seen)[0]
    update = Update(table, key).set(RESERVED, seen.reserved + delta).set(AVAILABLE, seen.available - delta)
    update.set(VERSION, version + 1).set(TAGS, chain)
    return update.when(EXISTS & (Path(VERSION) == version))


def chain_give_back(table: str, key: Key, quantity: int, tag: str) -> Update:
    """Give back and append the release's tag (``version`` keeps matching the chain's end; the
    chain is not trimmed here, there is no read in a transaction: the next take trims it)."""
    return give_back(table, key, quantity).add(VERSION, 1).set(TAGS, list_append(Path(TAGS), [tag]))


class Verdict(StrEnum):
    """What the chain says after an unknown outcome."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    UNKNOWN = "unknown"  # the slot fell off the chain


def tag_for(token: str | None) -> str:
    """The chain entry for a request: derived from its token, random without one."""
    if not token:
        return uuid.uuid4().hex[:16]
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def resolve(counter: Counter | None, read_version: int, mine: str) -> Verdict:
    """After an unknown outcome: applied, not applied, or unknown (our slot fell off the chain)."""
    if counter is None:
        return Verdict.UNKNOWN
    version, tags = chain_of(counter)
    if mine in tags:
        return Verdict.APPLIED
    if version == read_version:
        return Verdict.NOT_APPLIED
    oldest = version - len(tags) + 1  # the version of tags[0]
    return Verdict.NOT_APPLIED if oldest <= read_version + 1 else Verdict.UNKNOWN


class OccHistory(Approach):
    """Approach 3: OCC whose tag is a chain of the last writers' request tags; see the module."""

    name = "occ_history"
    exact = True  # within the bound: a duplicate older than N writes is not recognised
    needs_token = True
    attributes = (VERSION, TAGS)
    traits = ("last N writers", "within N writes")

    def __init__(self, store: ResourceStore, *, history: int = DEFAULT_HISTORY) -> None:
        super().__init__(store)
        if history < 2:
            raise ValueError("history must keep at least 2 entries")
        self.history = history

    def initial_attributes(self, capacity: int) -> dict[str, object]:
        """The base attributes, version 0 and an empty tag chain."""
        return {**super().initial_attributes(capacity), VERSION: 0, TAGS: []}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """Read, then write conditioned on the version read; a request whose tag is in the chain is a duplicate."""
        capacity = Capacity()
        mine = tag_for(token)
        sent = False  # a send of ours may have committed: our tag then means "applied", not "duplicate"
        version = 0  # the version our pending write is conditioned on

        def plan(counter: Counter | None, attempts: int) -> Resend | Stop:
            """The next write from the item as last seen, or the verdict it already gives."""
            nonlocal version
            if counter is None:
                return Stop(result(Outcome.REJECTED, capacity, attempts, Reason.MISSING))
            seen_version, tags = chain_of(counter)
            if mine in tags:
                return Stop(result(Outcome.APPLIED if sent else Outcome.DUPLICATE, capacity, attempts, Reason.FOUND_IN_CHAIN))
            if bounded and breaches(counter, delta):
                return Stop(result(Outcome.REJECTED, capacity, attempts, Reason.THRESHOLD, TakeFacts.left(counter)))
            version = seen_version
            chain = [*tags, mine][-self.history :]
            return Resend(chain_write(self.table_name, key, counter, delta, chain).params())

        def lost(report: Report, failure: Classified) -> Resend | Stop:
            counter = found(failure)
            if sent and counter is not None and resolve(counter, version, mine) is Verdict.UNKNOWN:
                # a send of ours at this version may have landed, and its slot has left the chain since
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, Reason.FELL_OFF_CHAIN))
            return plan(counter, report.attempts)  # plan checks our tag first

        def unknown(report: Report, _failure: Classified) -> Resend | Stop:
            nonlocal sent
            sent = True
            counter = self.store.counter(key, capacity)
            verdict = resolve(counter, version, mine)
            if verdict is Verdict.APPLIED:
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, Reason.CONFIRMED_AFTER_UNKNOWN))
            if verdict is Verdict.UNKNOWN:
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, Reason.FELL_OFF_CHAIN))
            return plan(counter, report.attempts)  # another writer took our slot: definitely not applied, next round

        return self.optimistic(key, capacity, plan, lost, unknown)

    def release_update(self, key: Key, quantity: int, token: str) -> Update:
        """Give back and append the release's tag: ``version`` keeps matching the chain's end."""
        return chain_give_back(self.table_name, key, quantity, tag_for(f"release:{token}"))

    def quota_update(self, key: Key, delta: int, token: str) -> Update:
        """The transfer's move, the next version and its tag (``version`` keeps matching the chain's end)."""
        return super().quota_update(key, delta, token).add(VERSION, 1).set(TAGS, list_append(Path(TAGS), [tag_for(f"transfer:{token}")]))


APPROACH = OccHistory
