"""Approach 2, optimistic concurrency control: read the entity tag, write only if unchanged.

Each write sets ``reserved``/``available`` to values computed from the read and replaces
``tag`` with a fresh random one, conditioned on ``tag`` still being the one read. The
threshold is checked on the read values (the tag condition makes that check still true
at write time). Conflicts are retried within the [`RetryPolicy`][counters.core.failures.RetryPolicy]
(bounded, full jitter): the loser's ``ALL_OLD`` shows the winner's item (our own tag there
means applied), and the next round is planned from a read made after the backoff.

Guarantees:
    * Thresholds: always held (the write is conditioned on the state the check saw).
    * Ambiguous failure (5xx/timeout after sending): re-read the item.
      tag == the tag this call wrote -> ``applied`` (reason ``confirmed_after_unknown``);
      a third tag -> another writer came in between: ``ambiguous`` (reason ``third_tag``);
      tag unchanged -> not applied *yet*: the same write is re-sent (a timed-out send may still
      land later, but every send of it is conditioned on the same tag, so at most one commits).
    * A condition failure after a send whose outcome was unknown: our own tag in ``ALL_OLD``
      -> ``applied`` (reason ``confirmed_after_resend``); any other tag -> ``ambiguous``
      (reason ``third_tag``), never a next round: the unknown send may have committed before the
      writer whose tag is there, and a next round would apply the call a second time. Likewise a
      budget that runs out after an unknown outcome is ``ambiguous``, not ``contention``.
      So a call never applies twice, the counter never over-counts a call, and an ``ambiguous``
      call may be lost ([docs/reservations.md](../reservations.md#what-each-approach-guarantees): occ errs ``under``).
    * SDK retries must be off (the layer's client has them off): an SDK re-send after a lost reply
      is invisible to this code, and when another writer commits between the two sends ``ALL_OLD``
      shows that writer's tag, which looks exactly like a lost race
      ([`counters.core.client.CLIENT_CONFIG`][counters.core.client.CLIENT_CONFIG] has ``total_max_attempts=1``).
      A re-send that finds our own tag is recognised as ``applied``.
    * Client retries / redelivered requests: **not recognised** (tags are random, the token
      is ignored); a redelivery applies again (``exact = False``).
    * Contention: every concurrent writer but one loses each round; past the budget the call
      is ``contention`` (nothing applied). Not shardable here.
"""

from __future__ import annotations

import uuid

from counters.core.engine import Report, Resend, Stop
from counters.core.failures import Classified
from counters.core.outcome import Capacity, Outcome
from counters.primitives.approaches import Approach, Reason, TakeFacts, TakeResult, result
from counters.store.expr import Path, Update
from counters.store.resources import found
from counters.store.resources_counters import AVAILABLE, EXISTS, RESERVED, Counter, Fields, Key

TAG = "tag"
"""The counter item's entity tag: replaced by every write."""


def tag_of(counter: Counter) -> str:
    """The entity tag a counter item holds."""
    return str(counter.state.get(TAG, ""))


def occ_write(table: str, key: Key, seen: Counter, delta: int, tag: str) -> Update:
    """The values computed from ``seen`` and a fresh tag, if nobody wrote since."""
    update = Update(table, key).set(RESERVED, seen.reserved + delta).set(AVAILABLE, seen.available - delta).set(TAG, tag)
    return update.when(EXISTS & (Path(TAG) == tag_of(seen)))


def new_tag() -> str:
    """A fresh random entity tag (16 hex)."""
    return uuid.uuid4().hex[:16]


def breaches(counter: Counter, delta: int) -> bool:
    """Applying ``delta`` to ``counter`` would cross a threshold."""
    return counter.available < delta if delta > 0 else counter.reserved < -delta


def may_have_landed(report: Report) -> bool:
    """Whether a send of this call may have committed unseen: one of its attempts had an unknown
    outcome (a timed-out send may land after the re-read that found the tag unchanged)."""
    return report.unknown_seen


class Occ(Approach):
    """Approach 2: optimistic concurrency on an entity tag; see the module."""

    name = "occ"
    attributes = (TAG,)
    traits = ("no", "no (ambiguous on a third tag)")

    def initial_attributes(self, capacity: int) -> dict[str, object]:
        """The base attributes and a first tag."""
        return {**super().initial_attributes(capacity), TAG: new_tag()}

    def apply(self, key: Key, delta: int, *, token: str | None = None, bounded: bool = True, record: Fields | None = None) -> TakeResult:
        """Read, then write conditioned on the tag read; re-read and retry on a conflict."""
        capacity = Capacity()
        mine = ""  # the tag our pending write sets
        old = ""  # the tag it is conditioned on
        pending = False  # a send's outcome was unknown: it may still commit

        def plan(counter: Counter | None, attempts: int) -> Resend | Stop:
            """The next write from the item as last seen, or the verdict it already gives."""
            nonlocal mine, old
            if counter is None:
                return Stop(result(Outcome.REJECTED, capacity, attempts, Reason.MISSING))
            if bounded and breaches(counter, delta):
                return Stop(result(Outcome.REJECTED, capacity, attempts, Reason.THRESHOLD, TakeFacts.left(counter)))
            old, mine = tag_of(counter), new_tag()
            return Resend(occ_write(self.table_name, key, counter, delta, mine).params())

        def lost(report: Report, failure: Classified) -> Resend | Stop:
            counter = found(failure)
            if counter is not None and tag_of(counter) == mine:  # a re-send of a write that had committed: ours
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, Reason.CONFIRMED_AFTER_RESEND))
            if may_have_landed(report):  # a send of ours may have committed before this tag's writer: no next round
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, Reason.THIRD_TAG))
            return plan(counter, report.attempts)  # another writer won: next round from what it wrote

        def unknown(report: Report, _failure: Classified) -> Stop | None:
            nonlocal pending
            pending = True
            counter = self.store.counter(key, capacity)
            if counter is not None and tag_of(counter) == mine:
                return Stop(result(Outcome.APPLIED, capacity, report.attempts, Reason.CONFIRMED_AFTER_UNKNOWN))
            if counter is None or tag_of(counter) != old:
                return Stop(result(Outcome.AMBIGUOUS, capacity, report.attempts, Reason.THIRD_TAG))
            return None  # tag unchanged: definitely not applied, re-send the same write

        taken = self.optimistic(key, capacity, plan, lost, unknown)
        if pending and taken.outcome is Outcome.CONTENTION:  # the budget ran out after a send that may have landed
            return result(Outcome.AMBIGUOUS, capacity, taken.attempts, Reason.BUDGET_EXHAUSTED)
        return taken

    def release_update(self, key: Key, quantity: int, token: str) -> Update:
        """The base give-back, moving the tag."""
        return super().release_update(key, quantity, token).set(TAG, new_tag())  # every change moves the tag: OCC readers see it

    def quota_update(self, key: Key, delta: int, token: str) -> Update:
        """The base quota move, moving the tag."""
        return super().quota_update(key, delta, token).set(TAG, new_tag())


APPROACH = Occ
