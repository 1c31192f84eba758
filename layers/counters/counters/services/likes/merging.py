"""A user's duplicate like items on a grown post: detected after the fact and merged, once.

A hot post's spread grows (8, 16, ... ``MAX_SPREAD``) while likes flow, and items never move: a
request writes the oldest lane of the user's chain holding an item, else creates one in the lane of
the spread it knows ([`Posts.locate`][counters.services.likes.posts.Posts.locate]). A writer with a
stale view of the spread (a cached post, a long pause) can then create a second item for a user
in a lane that is not the user's lane any more. Nothing can refuse it (the stale writer does not
know the higher lane exists), so the like aggregator examines every creation of a like item under
a lane key (the template's filter passes every ``INSERT``, ``delta`` 0 included) after its batch's
tally write ([`Merges.examine`][counters.services.likes.merging.Merges.examine]):

* once per post in the batch, the post's ``spread`` (with ``settled`` and ``swept``) read strongly
  consistent from META: it only grows, so a read made after a record committed covers the lane of
  any other creation that committed before it;
* a creation **outside** its user's lane of that spread is merged, whatever is found:
  [`Merges.merge`][counters.services.likes.merging.Merges.merge] reads the whole chain and writes
  one transaction ([`plan`][counters.services.likes.merging.plan]): the item in the oldest lane is
  kept and takes the state, stamp and ``requestId`` of the item with the latest stamp (the latest
  request still wins, and its replay still finds its own id); the others are deleted, not
  tombstoned, so a later stale write into a retired lane is again a creation and is examined
  again. The count moves through the kept item's ``delta`` (``new kept - old kept - the deleted
  items' likes``), counted from the stream like any hot write; the deletions' records count
  nothing. Each item is conditioned on its stamp as read: a write that moved one meanwhile makes
  the merge read and decide again (``ROUNDS``), then report contention, and the batch's
  examination is deferred to the retry queue (``merge-likes``). A merged pair finds one item and
  does nothing;
* a creation **in** its user's lane is not examined: the sweep below merges any pair it makes.

Settling. A merge also makes the user's lane of the spread hold the kept item or a **pointer** to
its lane (``liked`` = ``"pointer"``, ``livesIn``): put, re-pointed, or in place of a retired item.
After a growth the retry worker's sweep ([`Merges.settle`][counters.services.likes.merging.Merges.settle],
command ``settle-likes``, queued by the aggregator through [`Merges.sweeps`][counters.services.likes.merging.Merges.sweeps])
reads every lane of the old spread, from ``S0``, 8 lanes at once, merges every user there whose lane
now is another one, marks the lanes done (``swept``), then writes ``settled`` on META. Near the
worker's timeout it starts no call (asked before every one, in every lane) and queues the rest
(``CONTINUED``; a lane stopped is not done, it is swept again): a redelivery after the
queue's visibility timeout is for a sweep that failed, not one that ran long. A like reads
none of the lanes swept (nothing on a settled post): the pointer refuses its write and names the
lane to write. Why no pair is missed: a user with an item in an old lane either had it when the
sweep read that lane (then the sweep merged the user, with any item in their own lane, and put the
pointer, which refuses a later creation there), or it was created there after, by a stale-view
writer: a creation outside its user's lane, merged by the aggregator. [docs/DESIGN.md](../DESIGN.md), "A spread
that grows".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import NamedTuple

from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, never, require
from counters.core.engine import stop_when
from counters.core.errors import ContentionError, DeadlineReached
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.json import JSONObject, JSONValue
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.store.like_merges import LikeItem, LikeMergeStore, lane_number
from counters.store.post_items import FIRST_SPREAD, LIKE_PREFIX, MAX_SPREAD, SK, chain_keys, hot_like_key, hot_pk, lane_of
from counters.store.post_streams import Created
from counters.store.toggles import Stamp

ROUNDS = 4
"""A merge refused because an item moved is read and decided again this often, then contention."""
UNSTAMPED = Stamp(-1, "")  # an item written before stamps: older than any request


class Plan(NamedTuple):
    """One merge: the item kept, the item whose state it takes, the items deleted, the count's
    change, and the pointer to put in the user's lane (its key and what is there now), if any."""

    kept: LikeItem
    latest: LikeItem
    retired: list[LikeItem]
    delta: int
    pointer: tuple[dict[str, str], LikeItem | None] | None = None


class Examined(NamedTuple):
    """What examining one creation did: ``APPLIED`` (merged), ``DUPLICATE`` (nothing to merge:
    one item, the first spread, or merged already), ``CONTENTION`` (report the record as failed)."""

    created: Created
    outcome: Outcome


def plan(found: Sequence[LikeItem], lane: Mapping[str, str] | None = None) -> Plan | None:
    """The merge of a user's items read along their chain, oldest lane first (``None``: nothing to
    do). The oldest item is kept (where [`Posts.locate`][counters.services.likes.posts.Posts.locate]
    looks first) with the state of the item with the latest stamp; its ``delta`` is what the merge
    changes the count by: every item's ``delta``s summed so far to its own state, so the count goes
    from the sum of the items' states to the latest's.

    ``lane``: the key of the user's lane of the spread now (the last of the chain). Unless the kept
    item is there, that key must hold a pointer to the kept item's lane (a settled post's like
    writes there without reading the older lanes): put, or re-pointed, with the merge (a retired
    item there is replaced by it). Pointers elsewhere in the chain are left as they are."""
    items = [item for item in found if item.state.points_to is None]
    if not items:
        return None
    kept, *retired = items
    pointer = None
    if lane is not None and kept.key != dict(lane):
        there = next((item for item in found if item.key == dict(lane)), None)
        if there is None or there.state.points_to != lane_number(kept.key):
            pointer = (dict(lane), there)
    if not retired and pointer is None:
        return None
    latest = max(items, key=lambda item: item.state.stamp or UNSTAMPED)
    delta = int(latest.state.on) - int(kept.state.on) - sum(int(item.state.on) for item in retired)
    return Plan(kept, latest, retired, delta, pointer)


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


SWEEP_USERS = 100
"""Users a sweep reads the chains of at once (one BatchGetItem per 100 keys), then merges."""
SWEEP_AGAIN_AFTER = 100
"""Batches of a process that meet a post still unsettled after it queued the post's sweep, before
it queues the sweep again (a sweep can end in the DLQ: contended 5 times while the lanes are busy);
counted, not timed, and a sweep done twice merges nobody twice."""
SWEEP_LANES = FIRST_SPREAD
"""Lanes a sweep sweeps at once (threads: each lane is a partition key of its own, and its pointers
go to one other lane), from ``S0``: the first group is the 8 lanes every user's chain starts in."""
SWEEP_ATTEMPTS = 12
"""Calls a sweep's each DynamoDB request may make (backing off up to 1 s): a sweep is no request
path, and under a step its lanes' capacity is what the likes leave it."""
LANE_ROUNDS = 6
"""Times a sweep sweeps one lane again when it is contended (throttled reads under a step), before
the message fails; counted, not timed, and each lane done is kept (``swept``): a redelivery resumes."""
SETTLE_COMMAND = "settle-likes"


class Stopped(Enum):
    """A lane the sweep was told to stop in (``should_stop``) before it was done."""

    STOPPED = "stopped"


STOPPED = Stopped.STOPPED
"""The retry queue's command that sweeps a grown post and marks it settled (module doc, "Settling")."""


@dataclass(frozen=True)
class SettlePayload:
    """A sweep: the post, and the spread it settles."""

    postId: str
    spread: int

    def __post_init__(self) -> None:
        require(valid_id(self.postId), "invalid postId")
        require(
            isinstance(self.spread, int) and FIRST_SPREAD < self.spread <= MAX_SPREAD and self.spread & (self.spread - 1) == 0,
            "invalid spread",
        )


def _in_own_lane(record: Created, spread: int | None) -> bool:
    """Whether a creation is in the user's lane of ``spread`` (a post that never grew: every one).
    A creation elsewhere is always merged, so that the user's lane points to it (a stale-view
    writer's, made after the sweep read its lane); one in the user's lane is never examined
    ([`Merges.examine`][counters.services.likes.merging.Merges.examine])."""
    return spread is None or spread <= FIRST_SPREAD or record.lane == f"S{lane_of(record.user_id, spread)}"


def user_of(key: dict[str, str]) -> str:
    """The user a like item's key belongs to."""
    return key[SK][len(LIKE_PREFIX) :]


class Merges:
    """Detects and merges the duplicate like items a stale-view writer can create (the module doc)."""

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None) -> None:
        self.store = LikeMergeStore(table_name, dynamodb=dynamodb)
        self.retry = retry or RetryPolicy()
        self.unsettled: set[tuple[str, int]] = set()  # (post, spread) met unsettled by the last examinations
        self.queued: LRU[tuple[str, int], int] = LRU(CACHE_SIZE)  # (post, spread) whose sweep this process queued -> batches since

    def examine(self, created: Iterable[Created]) -> list[Examined]:
        """Every creation of a like item in a batch, examined after the batch's tally write: one
        outside its user's lane is merged (one per (post, user): the chain is read whole), which
        puts the pointer; one in its user's lane is not examined at all (``DUPLICATE``). A user
        with an item in another lane when the post's sweep reads that lane has a pointer in their
        lane, which refuses the creation, or is merged by the sweep (it reads every lane of the old
        spread after the growth); an item created there after the sweep read it is a creation
        outside its user's lane, merged here (module doc, "Settling")."""
        by_post: dict[str, list[Created]] = {}
        for record in created:
            by_post.setdefault(record.post_id, []).append(record)
        out: list[Examined] = []
        for post_id, records in by_post.items():
            try:
                post = self.store.layout(post_id, self.retry)
                spread = post.spread
                if spread is not None and not post.settled:
                    self.unsettled.add((post_id, spread))  # a sweep to send (the caller's queue)
            except ContentionError:
                out += [Examined(c, Outcome.CONTENTION) for c in records]
                continue
            elsewhere: dict[str, Created] = {}  # outside the user's lane: merged whatever is found (the pointer)
            for record in records:
                if _in_own_lane(record, spread):
                    out.append(Examined(record, Outcome.DUPLICATE))
                elif record.user_id in elsewhere:
                    out.append(Examined(record, Outcome.DUPLICATE))  # the user's chain is merged whole once
                else:
                    elsewhere[record.user_id] = record
            for record in elsewhere.values():
                out.append(Examined(record, self._merged(record, spread)))
        return out

    def sweeps(self) -> list[Command]:
        """The sweeps to queue for the grown posts the examinations met unsettled, each once per
        process (``sent`` when the queue took it: [`sent`][counters.services.likes.merging.Merges.sent])."""
        due: list[tuple[str, int]] = []
        for key in sorted(self.unsettled):
            since = self.queued.get(key)  # batches that met the post unsettled since its sweep was queued
            if since is None or since >= SWEEP_AGAIN_AFTER:
                due.append(key)
            else:
                self.queued[key] = since + 1
        self.unsettled = set()
        return [Command(SETTLE_COMMAND, {"postId": post_id, "spread": spread}) for post_id, spread in due]

    def sent(self, command: Command) -> None:
        """The queue took ``command`` (a sweep): not sent again by this process until
        ``SWEEP_AGAIN_AFTER`` more batches meet the post still unsettled."""
        payload = command.payload
        self.queued[(str(payload["postId"]), int(str(payload["spread"])))] = 0

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
        """The retry worker's side of [`deferred`][counters.services.likes.merging.Merges.deferred]
        and of [`sweeps`][counters.services.likes.merging.Merges.sweeps]."""
        return {
            MERGE_COMMAND: Replayable(MergePayload, self._replay),
            SETTLE_COMMAND: Replayable(SettlePayload, self._settle, stoppable=True),
        }

    def _settle(self, p: SettlePayload, command: Command, should_stop: Callable[[], bool]) -> Verdict:
        return self.settle(p.postId, p.spread, should_stop)

    def settle(self, post_id: str, spread: int, should_stop: Callable[[], bool] = never) -> Verdict:
        """Sweep a grown post (the module doc, "Settling"): every user with an item, a tombstone or a
        pointer in a lane of the previous spread that is not their lane now is merged (which puts
        the pointer in their lane), then ``settled`` = the spread, if it did not grow meanwhile.
        Still contended: [`ContentionError`][counters.core.errors.ContentionError] (SQS
        redelivers; a sweep done again finds every user merged). ``should_stop`` is asked before
        each group of lanes and, in each lane, before every call (the retry worker's: its timeout
        is near): then ``CONTINUED``, ``swept`` at the lanes done before the first one stopped, with
        the same sweep as [`Verdict.then`][counters.core.commands.Verdict.then], which resumes there."""
        post = self.store.layout(post_id, self.retry)
        body: JSONObject = {"postId": post_id, "spread": spread}
        if post.spread != spread or post.settled:
            return Verdict("DUPLICATE", {**body, "merged": 0})
        from concurrent.futures import ThreadPoolExecutor  # the worker's sweep only (not the aggregator's cold start)

        merged, old = 0, spread // 2
        patient = self.retry.patient(SWEEP_ATTEMPTS)
        with ThreadPoolExecutor(SWEEP_LANES) as pool:
            for first in range(post.swept, old, SWEEP_LANES):
                if should_stop():  # a liveness budget only: what was done is kept in swept
                    return Verdict("CONTINUED", {**body, "merged": merged, "swept": first}, then=Command(SETTLE_COMMAND, body))
                group = range(first, min(first + SWEEP_LANES, old))
                swept = list(pool.map(lambda lane: self._sweep(post_id, lane, spread, patient, should_stop), group))
                merged += sum(n for n in swept if isinstance(n, int))
                done = next((first + i for i, n in enumerate(swept) if not isinstance(n, int)), group.stop)  # the lanes done from the first
                if done < old and done > first and self.store.advance(post_id, spread, done, self.retry) is not Outcome.APPLIED:
                    now = self.store.layout(post_id, self.retry)  # grown again, or another sweep is ahead (or the write was contended)
                    if now.spread != spread or now.settled:
                        return Verdict("DUPLICATE", {**body, "merged": merged})
                if STOPPED in swept:  # told to stop inside the group: the rest from ``swept``
                    return Verdict("CONTINUED", {**body, "merged": merged, "swept": done}, then=Command(SETTLE_COMMAND, body))
                if done < group.stop:
                    raise ContentionError(f"the sweep of post {post_id!r} is contended in lane {done}; {done} lanes swept")
        marked = self.store.settle(post_id, spread, self.retry)
        if marked is Outcome.CONTENTION:
            raise ContentionError(f"the sweep of post {post_id!r} could not write settled")
        return Verdict("APPLIED" if marked is Outcome.APPLIED else "DUPLICATE", {**body, "merged": merged})

    def _sweep(
        self, post_id: str, lane: int, spread: int, retry: RetryPolicy, should_stop: Callable[[], bool] = never
    ) -> int | Stopped | None:
        """Merge every user of one lane of the previous spread whose lane is another one now; how
        many merged. ``None``: still contended. [`STOPPED`][counters.services.likes.merging.STOPPED]:
        ``should_stop`` said so, asked before every call (the retry worker's timeout is near): the
        lane is not done, and the sweep that goes on sweeps it again from its start (what this one
        wrote stays, and is found done). Most have nothing in their lane: a pointer to this
        lane is put there if it holds nothing (one conditional PutItem, nothing read); the others
        (their item, a pointer, a pair) have their chains read together and merged
        ([`merge`][counters.services.likes.merging.Merges.merge]: the oldest item kept, the pointer
        moved to it). A pointer put to this lane while the user has an item in an older lane (chain
        lanes only grow: an older lane is a lower one) is found when that lane is swept: its put is
        refused by this pointer, and the merge keeps the older item and re-points. The lanes swept first are the busiest (the first 8
        are in every user's chain, read by every like until swept), so a contended lane is swept
        again up to ``LANE_ROUNDS`` times before the message fails (SQS redelivers it, and the sweep
        resumes from ``swept``)."""
        with stop_when(should_stop):  # in this lane's own thread: no call is started once told to stop
            for _ in range(LANE_ROUNDS):
                try:
                    return self._sweep_once(post_id, lane, spread, retry)
                except DeadlineReached:  # a ContentionError too: caught first
                    return STOPPED
                except ContentionError:
                    continue
        return None

    def _sweep_once(self, post_id: str, lane: int, spread: int, retry: RetryPolicy) -> int:
        """One pass of [`_sweep`][counters.services.likes.merging.Merges._sweep] over the lane."""
        merged = 0
        page: list[str] = []
        for user_id in self.store.lane_users(hot_pk(post_id, lane), retry):
            own = lane_of(user_id, spread)
            if own == lane:
                continue
            pointed = self.store.point(hot_like_key(post_id, user_id, spread), lane, retry)
            if pointed is Outcome.CONTENTION:
                raise ContentionError(f"the pointer of {user_id!r} on post {post_id!r} is contended")
            if pointed is Outcome.APPLIED:
                merged += 1
                continue
            page.append(user_id)  # something in the user's lane: their chain is read and merged
            if len(page) == SWEEP_USERS:
                merged, page = merged + self._merge_all(post_id, page, spread, retry), []
        return merged + self._merge_all(post_id, page, spread, retry)

    def _replay(self, p: MergePayload, command: Command) -> Verdict:
        """Examine and merge each user's items (the spread read now, strongly consistent); still
        contended: [`ContentionError`][counters.core.errors.ContentionError], so SQS redelivers the
        command (then its DLQ, from where a redrive replays it: a merged pair finds one item)."""
        spread = self.store.spread(p.postId, self.retry) or FIRST_SPREAD
        merged = self._merge_all(p.postId, p.userIds, spread)
        return Verdict("APPLIED" if merged else "DUPLICATE", {"postId": p.postId, "users": len(p.userIds), "merged": merged})

    def _merge_all(self, post_id: str, user_ids: Sequence[str], spread: int, retry: RetryPolicy | None = None) -> int:
        """Merge the users of ``user_ids`` whose chain needs it; how many merged. Still contended:
        [`ContentionError`][counters.core.errors.ContentionError] (the worker's message is redelivered)."""
        merged = 0
        for user_id, found in (self._to_merge(post_id, user_ids, spread, retry) if user_ids else {}).items():
            outcome = self.merge(post_id, user_id, spread, found, retry)
            if outcome is Outcome.CONTENTION:
                raise ContentionError(f"the merge of {user_id!r}'s likes of post {post_id!r} is still contended")
            merged += outcome is Outcome.APPLIED
        return merged

    def _to_merge(self, post_id: str, user_ids: Sequence[str], spread: int, retry: RetryPolicy | None = None) -> dict[str, list[LikeItem]]:
        """The users whose chain needs a merge (a pair, or the pointer in their lane), with their
        chain as read: every chain read in one consistent BatchGetItem per 100 keys, not one call
        per user (a deferred command names up to 500 users, and serial reads outlasted the worker's
        timeout under load); the merge writes from that read (its conditions are on what was read)."""
        chains = {user_id: chain_keys(post_id, user_id, spread) for user_id in dict.fromkeys(user_ids)}
        found: dict[str, list[LikeItem]] = {}
        for item in self.store.read([key for keys in chains.values() for key in keys], retry or self.retry):
            found.setdefault(user_of(item.key), []).append(item)  # in chain order: ``read`` keeps the keys' order
        lane = (lambda keys: keys[-1]) if spread > FIRST_SPREAD else (lambda keys: None)
        return {user_id: found.get(user_id, []) for user_id, keys in chains.items() if plan(found.get(user_id, []), lane(keys)) is not None}

    def merge(
        self, post_id: str, user_id: str, spread: int, read: Sequence[LikeItem] | None = None, retry: RetryPolicy | None = None
    ) -> Outcome:
        """Merge the user's items on the post (the module doc): ``APPLIED``, ``DUPLICATE`` (one
        item left: nothing to do), ``CONTENTION``. ``read``: the chain as just read (the first
        round writes from it; a refused write reads it again)."""
        for _ in range(ROUNDS):
            keys = chain_keys(post_id, user_id, spread)
            items = self.store.read(keys, retry or self.retry) if read is None else read
            read = None
            found = plan(items, keys[-1] if spread > FIRST_SPREAD else None)
            if found is None:
                return Outcome.DUPLICATE
            outcome = self.store.merge(found.kept, found.latest, found.retired, found.delta, retry or self.retry, found.pointer)
            if outcome is not Outcome.REJECTED:
                return outcome
        return Outcome.CONTENTION
