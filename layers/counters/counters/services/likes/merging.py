"""A user's duplicate like items on a grown post: detected after the fact and merged, once.

A hot post's spread grows (8, 16, 32, 64) while likes flow, and items never move: a request
writes the oldest lane of the user's chain holding an item, else creates one in the lane of the
spread it knows ([`Posts.locate`][counters.services.likes.posts.Posts.locate]). A writer with a
stale view of the spread (a cached post, a long pause) can then create a second item for a user
that a current writer created in a higher lane. Nothing can refuse it (the stale writer does not
know the higher lane exists), so the like aggregator examines **every creation** of a like item
under a lane key (the template's filter passes every ``INSERT``, ``delta`` 0 included) after its
batch's tally write ([`Merges.examine`][counters.services.likes.merging.Merges.examine]):

* once per post in the batch, the post's ``spread`` read strongly consistent from META: it only
  grows, so a read made after a record committed covers the lane of any other creation that
  committed before it; at the first spread nothing more is read;
* the other chain lanes of every creation in the batch, read in one consistent BatchGetItem per
  100 keys. Of two creations the later one's read sees the earlier item, so every pair is seen at
  least once;
* a pair found: [`Merges.merge`][counters.services.likes.merging.Merges.merge] re-reads the
  whole chain and writes one transaction ([`plan`][counters.services.likes.merging.plan]): the
  item in the oldest lane is kept and takes the state, stamp and ``requestId`` of the item with
  the latest stamp (the latest request still wins, and its replay still finds its own id); the
  others are deleted, not tombstoned, so a later stale write into a retired lane is again a
  creation and is examined again. The count moves through the kept item's ``delta``
  (``new kept - old kept - the deleted items' likes``), counted from the stream like any hot write;
  the deletions' records count nothing. Each item is conditioned on its stamp as read: a write
  that moved one meanwhile makes the merge read and decide again (``ROUNDS``), then report
  contention, and the batch is redelivered from that record (its tally part is checkpointed).
  A redelivered batch whose pair is merged finds one item and does nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, require
from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.json import JSONValue
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.store.like_merges import LikeItem, LikeMergeStore
from counters.store.post_items import FIRST_SPREAD, LIKE_PREFIX, SK, Created, chain_keys, hot_pk
from counters.store.toggles import Stamp

ROUNDS = 4
"""A merge refused because an item moved is read and decided again this often, then contention."""
UNSTAMPED = Stamp(-1, "")  # an item written before stamps: older than any request


class Plan(NamedTuple):
    """One merge: the item kept, the item whose state it takes, the items deleted, and the count's change."""

    kept: LikeItem
    latest: LikeItem
    retired: list[LikeItem]
    delta: int


class Examined(NamedTuple):
    """What examining one creation did: ``APPLIED`` (merged), ``DUPLICATE`` (nothing to merge:
    one item, the first spread, or merged already), ``CONTENTION`` (report the record as failed)."""

    created: Created
    outcome: Outcome


def plan(items: Sequence[LikeItem]) -> Plan | None:
    """The merge of a user's items, oldest lane first (``None``: fewer than two). The oldest is
    kept (where [`Posts.locate`][counters.services.likes.posts.Posts.locate] looks first) with the
    state of the item with the latest stamp; its ``delta`` is what the merge changes the count by:
    every item's ``delta``s summed so far to its own state, so the count goes from the sum of the
    items' states to the latest's."""
    if len(items) < 2:
        return None
    kept, *retired = items
    latest = max(items, key=lambda item: item.state.stamp or UNSTAMPED)
    delta = int(latest.state.on) - int(kept.state.on) - sum(int(item.state.on) for item in retired)
    return Plan(kept, latest, retired, delta)


MERGE_COMMAND = "merge-likes"
"""The retry queue's command for an examination the aggregator could not finish (contention)."""
MAX_USERS = 500
"""Users in one command at most: a batch of the stream holds at most 500 records (BatchSize)."""


@dataclass(frozen=True)
class MergePayload:
    """A deferred examination: the users whose new like items on a post are to be examined."""

    postId: str
    userIds: list[str]

    def __post_init__(self) -> None:
        require(valid_id(self.postId), "invalid postId")
        require(
            isinstance(self.userIds, list) and 0 < len(self.userIds) <= MAX_USERS and all(valid_id(u) for u in self.userIds),
            "invalid userIds",
        )


def user_of(key: dict[str, str]) -> str:
    """The user a like item's key belongs to."""
    return key[SK][len(LIKE_PREFIX) :]


class Merges:
    """Detects and merges the duplicate like items a stale-view writer can create (the module doc)."""

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None) -> None:
        self.store = LikeMergeStore(table_name, dynamodb=dynamodb)
        self.retry = retry or RetryPolicy()

    def examine(self, created: Iterable[Created]) -> list[Examined]:
        """Every creation of a like item in a batch, examined after the batch's tally write; one
        per (post, user) is enough (the chain is read whole)."""
        by_post: dict[str, dict[str, Created]] = {}
        for record in created:
            by_post.setdefault(record.post_id, {}).setdefault(record.user_id, record)
        out: list[Examined] = []
        for post_id, users in by_post.items():
            try:
                spread = self.store.spread(post_id, self.retry)
                pairs = self._pairs(post_id, list(users.values()), spread)
            except ContentionError:
                out += [Examined(c, Outcome.CONTENTION) for c in users.values()]
                continue
            for record in users.values():
                out.append(Examined(record, self._merged(record, spread) if record.user_id in pairs else Outcome.DUPLICATE))
        return out

    def _pairs(self, post_id: str, records: list[Created], spread: int | None) -> set[str]:
        """The users of ``records`` with an item in another lane of their chain: every creation's
        other lanes read in one consistent BatchGetItem per 100 keys (not one call per user: a
        batch of a hot post holds about a hundred creations, and the calls, not the units, made the
        aggregator lag). At the first spread, none and nothing read."""
        if spread is None or spread <= FIRST_SPREAD:
            return set()
        others = []
        for record in records:
            own = hot_pk(post_id, int(record.lane[1:]))
            others += [k for k in chain_keys(post_id, record.user_id, spread) if k["PK"] != own]
        return {user_of(item.key) for item in self.store.read(others, self.retry)}

    def _merged(self, record: Created, spread: int | None) -> Outcome:
        try:
            return self.merge(record.post_id, record.user_id, spread or FIRST_SPREAD)
        except ContentionError:
            return Outcome.CONTENTION

    def deferred(self, post_id: str, user_ids: Iterable[str]) -> Command:
        """The retry queue's command that examines ``user_ids``' items on the post later, for an
        examination the aggregator could not finish: the batch is acknowledged instead of failing
        again and again until the event source drops it (uncounted likes with it)."""
        users: list[JSONValue] = [*sorted(set(user_ids))]
        return Command(MERGE_COMMAND, {"postId": post_id, "userIds": users})

    def replayables(self) -> dict[str, Replayable]:
        """The retry worker's side of [`deferred`][counters.services.likes.merging.Merges.deferred]."""
        return {MERGE_COMMAND: Replayable(MergePayload, self._replay)}

    def _replay(self, p: MergePayload, command: Command) -> Verdict:
        """Examine and merge each user's items (the spread read now, strongly consistent); still
        contended: [`ContentionError`][counters.core.errors.ContentionError], so SQS redelivers the
        command (then its DLQ, from where a redrive replays it: a merged pair finds one item)."""
        spread = self.store.spread(p.postId, self.retry) or FIRST_SPREAD
        merged = 0
        for user_id in p.userIds:
            outcome = self.merge(p.postId, user_id, spread)
            if outcome is Outcome.CONTENTION:
                raise ContentionError(f"the merge of {user_id!r}'s likes of post {p.postId!r} is still contended")
            merged += outcome is Outcome.APPLIED
        return Verdict("APPLIED" if merged else "DUPLICATE", {"postId": p.postId, "users": len(p.userIds), "merged": merged})

    def merge(self, post_id: str, user_id: str, spread: int) -> Outcome:
        """Merge the user's items on the post (the module doc): ``APPLIED``, ``DUPLICATE`` (one
        item left: nothing to do), ``CONTENTION``."""
        for _ in range(ROUNDS):
            found = plan(self.store.read(chain_keys(post_id, user_id, spread), self.retry))
            if found is None:
                return Outcome.DUPLICATE
            outcome = self.store.merge(found.kept, found.latest, found.retired, found.delta, self.retry)
            if outcome is not Outcome.REJECTED:
                return outcome
        return Outcome.CONTENTION
