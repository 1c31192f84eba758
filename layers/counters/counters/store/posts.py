"""Posts and likes: the requests that are the post's own, sent through the engine, answering typed
facts ([`Post`][counters.store.post_items.Post], [`Liker`][counters.store.posts.Liker]), never raw items.

The items (keys, attribute names, shapes, who writes them) are
[`counters.store.post_items`][counters.store.post_items]'. This module holds the conditions on them (the
standard like's fence), the toggle and aggregator stores instantiated for likes, and
[`PostStore`][counters.store.posts.PostStore]: the likes service's calls on posts, like state items and
probes ([`counters.services.likes`][counters.services.likes]; the rules are the service's and the
primitives'). Details: [docs/likes.md](../likes.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum, StrEnum
from typing import Any, NamedTuple

from counters.core.client import DynamoDBClient
from counters.core.engine import Report, Stop, read, read_keys, run
from counters.core.failures import Classified, RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.store.aggregates import CheckpointStore
from counters.store.base import Store
from counters.store.batch import BatchGet
from counters.store.expr import Check, Cond, Get, Path, Put, Query, Transaction, Update, if_not_exists, old_item
from counters.store.items import from_item, to_item
from counters.store.lane_groups import LANE_GROUPS, with_groups
from counters.store.post_items import (
    AGG_AT,
    AGG_LAG,
    AGG_PROBE,
    AGG_SEQ,
    AUTHOR_ID,
    BODY,
    CREATED_AT,
    CREATED_MODE,
    LANE_GROUP,
    LIKE_PREFIX,
    LIKED,
    LIKED_AT,
    LIVES_IN,
    MODE,
    MODE_AT,
    MODE_EPOCH,
    PK,
    POST,
    POST_ID,
    PROBE_SEQ,
    PROBED_AT,
    REGION_TALLY_PREFIX,
    REPAIRED_BY,
    REQUEST_ID,
    REVISION,
    SETTLED,
    SK,
    SPREAD_ATTRIBUTE,
    SWEPT,
    TABLE,
    TALLY,
    WRITER,
    Mode,
    Post,
    group_key,
    groups_of,
    post_key,
    post_of,
    post_pk,
    probe_key,
    region_tally_key,
)
from counters.store.toggles import Guard, Tally, ToggleStore

AUDIT_PAGE = 1000  # like items an audit's keys-only Query reads a page (the merge of 64 lanes holds one page of each)


class Liker(NamedTuple):
    """A listed like: the user and when they liked (epoch s)."""

    user_id: str
    liked_at: int | None


class Written(NamedTuple):
    """A conditional write to ``META``: its outcome, and the post it left (``ALL_NEW``) or found
    (``ALL_OLD`` of a refusal; ``None``: no post)."""

    outcome: Outcome
    post: Post | None = None


class RepairAction(Enum):
    """The actions of a repair of a post grown past 64 lanes."""

    META = "meta"
    GROUP = "group"


class Repair(StrEnum):
    """What a tally repair did."""

    REPAIRED = "repaired"
    MOVING = "moving"  # refused: something was counted since the post was read
    BUSY = "busy"


STANDARD_GUARD: Guard[Post] = Guard(
    Path(MODE).missing() | (Path(MODE) == Mode.STANDARD.value),
    lambda post: post.mode == Mode.STANDARD,
)
"""The fence: a standard like's transaction counts on META only while the post is standard."""


def standard_tally(post_id: str, writer: str = "") -> Tally[Post]:
    """Where a standard like is counted in its transaction: the post's META, fenced by its mode
    ([`STANDARD_GUARD`][counters.store.posts.STANDARD_GUARD]), and on a post grown past 64 lanes
    allowed below 0 (META's ``likeTally`` is then one part of the count: an unlike of a like its
    group counted takes it off META); with a ``writer`` (a Region of a global table, where a
    post keeps its mode), that Region's own tally item, created by its first count."""
    if writer:
        return Tally(region_tally_key(post_id, writer), parent=False)
    return Tally(post_key(post_id), guard=STANDARD_GUARD, unfloored=Path(SPREAD_ATTRIBUTE) > LANE_GROUP)


def like_toggles(table_name: str, *, dynamodb: DynamoDBClient | None = None) -> ToggleStore[Post]:
    """The toggle's requests for likes: state ``liked``, tally ``likeTally`` and ``tallyRev`` on META
    (on a global table: on the Region's own tally item, and each version names its ``writerRegion``)."""
    return ToggleStore(
        table_name,
        state_attribute=LIKED,
        tally_attribute=TALLY,
        revision_attribute=REVISION,
        writer_attribute=WRITER,
        pointer_attribute=LIVES_IN,
        parent=post_of,
        dynamodb=dynamodb,
    )


def lane_users(
    dynamodb: DynamoDBClient, table_name: str, pk: str, retry: RetryPolicy, capacity: Capacity | None, *, counted: Cond | None, page: int
) -> Iterator[str]:
    """The users with a like item under one spread key (``counted``: only the items passing it;
    ``None``: every item, tombstones and pointers too), in key order: strongly consistent Query
    pages of ``page`` items, keys only, so an item written before the first page is read whatever
    the replication delay (the audit's count, a grown post's sweep)."""
    query = Query(table_name, (Path(PK) == pk) & Path(SK).begins_with(LIKE_PREFIX), filter=counted, limit=page)
    query.consistent = True
    query.project(SK)
    while True:
        response = read(dynamodb.query, retry, capacity, **{**query.params(), "ReturnConsumedCapacity": "TOTAL"})
        for raw in response.get("Items", []):
            yield str((from_item(raw) or {})[SK])[len(LIKE_PREFIX) :]
        query.start = from_item(response.get("LastEvaluatedKey"))
        if not query.start:
            return


def like_checkpoints(table_name: str, *, dynamodb: DynamoDBClient | None = None, region: str = "") -> CheckpointStore:
    """The aggregator's write for likes: ``likeTally``, ``tallyRev`` and the ``agg*`` maps on META
    (lanes past 64 on their group's item), or with ``region`` (a global table, where a spread never
    grows) on that Region's tally item, which it creates."""
    return CheckpointStore(
        table_name,
        (lambda post_id: region_tally_key(post_id, region)) if region else post_key,
        writer=(WRITER, region) if region else None,
        tally_attribute=TALLY,
        seq_attribute=AGG_SEQ,
        at_attribute=AGG_AT,
        probe_attribute=AGG_PROBE,
        revision_attribute=REVISION,
        lag_attribute=AGG_LAG,
        groups=None if region else LANE_GROUPS,
        dynamodb=dynamodb,
    )


class PostStore(Store):
    """The calls the likes service makes on posts, like state items and probes, with typed answers."""

    FAMILIES = (TABLE,)

    def new_post_id(self) -> str:
        """A random post id this Region may create ([`POST`][counters.store.post_items.POST])."""
        return POST.fresh_id(self.policy.topology)

    def create(self, post: Post, spread: int, retry: RetryPolicy) -> Written:
        """Put a new post (``likeTally`` 0, empty aggregator maps, ``tallyRev`` 0) if its id is new;
        a refusal answers the stored post. On MREC only the id's home Region creates it: elsewhere
        [`WrongRegion`][counters.core.errors.WrongRegion], nothing written (``create:<mode>`` in [`TABLE`][counters.store.post_items.TABLE])."""
        self.admit(f"create:{post.mode}", item_id=post.post_id)
        item: dict[str, object] = {
            **post_key(post.post_id),
            POST_ID: post.post_id,
            AUTHOR_ID: post.author_id,
            BODY: post.body,
            TALLY: 0,
            CREATED_AT: post.created_at,
            REQUEST_ID: post.request_id,  # which request wrote it: a lost answer's re-send inside the engine is still "created"
            MODE: post.mode,
            CREATED_MODE: post.mode,  # what the request asked for: ``mode`` changes with the post's life, this never
            MODE_EPOCH: 0,
            SPREAD_ATTRIBUTE: spread,
            AGG_SEQ: {},
            AGG_AT: {},
            AGG_PROBE: {},
            REVISION: 0,
        }
        put = Put(self.table_name, item=item).when(Path(PK).missing())  # never overwrite a post (and its tally)
        report = run(self.dynamodb.put_item, put.params(), policy=retry, write=True)
        if report.outcome is Outcome.APPLIED:
            return Written(Outcome.APPLIED, post_of(item))
        found = old_item(report.failure) if report.outcome is Outcome.REJECTED else None
        return Written(report.outcome, None if found is None else post_of(found))

    def read(self, post_id: str, retry: RetryPolicy, capacity: Capacity | None = None) -> Post | None:
        """The post (strongly consistent), or ``None``; a post grown past 64 lanes with its count
        over every lane group ([`with_groups`][counters.store.posts.PostStore.with_groups])."""
        response = read(self.dynamodb.get_item, retry, capacity, **Get(self.table_name, post_key(post_id)).strongly().params())
        item = from_item(response.get("Item"))
        return None if item is None else self.with_groups(post_of({POST_ID: post_id, **item}), retry, capacity)

    def with_groups(self, post: Post, retry: RetryPolicy, capacity: Capacity | None = None) -> Post:
        """``post`` (its META as read) with the lane groups' items of its spread, read after it (one
        strongly consistent BatchGetItem, 1 RCU each): the count is the sum
        ([`with_groups`][counters.store.lane_groups.with_groups]). A post of 64 lanes or fewer as it is.
        The items are read after META, so a group of a spread META shows is read; a like counted on
        a group between the two reads is in the sum or not, as a like counted on META just after it."""
        groups = groups_of(post.spread)
        if not groups:
            return post
        keys = [to_item(group_key(post.post_id, g)) for g in groups]
        batch = BatchGet(Get(self.table_name, group_key(post.post_id, groups[0])).strongly())
        found: dict[int, Mapping[str, Any]] = {}
        for raw in read_keys(self.dynamodb.batch_get_item, batch, keys, retry, capacity):
            item = from_item(raw) or {}
            found[int(str(item[PK]).rpartition("#G")[2])] = item
        return with_groups(post, found)

    def layout(self, post_id: str, retry: RetryPolicy, *, strong: bool = False) -> Post | None:
        """Where the post's likes live and how they are counted (``mode``, ``spread``, ``settled``,
        ``swept``, ``modeEpoch``; eventually consistent, 0.5 RCU, or strongly, 1 RCU), or ``None``."""
        get = Get(self.table_name, post_key(post_id)).project(MODE, SPREAD_ATTRIBUTE, SETTLED, SWEPT, MODE_EPOCH)
        if strong:
            get = get.strongly()
        item = from_item(read(self.dynamodb.get_item, retry, None, **get.params()).get("Item"))
        return None if item is None else post_of({**item, POST_ID: post_id})

    def switch_mode(self, post_id: str, mode: Mode, now_ms: int, retry: RetryPolicy) -> Written:
        """``mode``, ``modeEpoch`` + 1, ``modeAt`` if the post exists with ``spread`` and is in the
        other mode: ``APPLIED`` with the post after, or ``REJECTED`` with the post found."""
        stored = Path(MODE)
        update = (
            Update(self.table_name, post_key(post_id))
            .set(MODE, mode.value)
            .set(MODE_AT, now_ms)
            .add(MODE_EPOCH, 1)
            .when(Path(PK).exists() & Path(SPREAD_ATTRIBUTE).exists() & (stored != mode.value))
            .returning("ALL_NEW")
        )
        report = run(self.dynamodb.update_item, update.params(), policy=retry, write=True)
        if report.outcome is Outcome.APPLIED:
            after = post_of({POST_ID: post_id, **(from_item(report.attributes) or {})})
            return Written(Outcome.APPLIED, self.with_groups(after, retry))
        found = old_item(report.failure) if report.outcome is Outcome.REJECTED else None
        return Written(report.outcome, None if found is None else self.with_groups(post_of({POST_ID: post_id, **found}), retry))

    def grow(self, post_id: str, spread: int, to: int, retry: RetryPolicy) -> Written:
        """``spread`` = ``to`` if it is still ``spread`` (one conditional UpdateItem on META: of many
        processes growing at once one does, the others find it grown): ``APPLIED`` with the post
        after, or ``REJECTED`` with the post found (``None``: no post). Items never move: a like
        stays in the lane it was created in ([`chain_lanes`][counters.store.post_items.chain_lanes]).
        The sweep's progress (``swept``) was of the old spread: removed with it."""
        update = (
            Update(self.table_name, post_key(post_id))
            .set(SPREAD_ATTRIBUTE, to)
            .remove(SWEPT)
            .when(Path(PK).exists() & (Path(SPREAD_ATTRIBUTE) == spread))
            .returning("ALL_NEW")
        )
        report = run(self.dynamodb.update_item, update.params(), policy=retry, write=True)
        if report.outcome is Outcome.APPLIED:
            return Written(Outcome.APPLIED, post_of({POST_ID: post_id, **(from_item(report.attributes) or {})}))
        found = old_item(report.failure) if report.outcome is Outcome.REJECTED else None
        return Written(report.outcome, None if found is None else post_of({POST_ID: post_id, **found}))

    def first_existing(self, keys: list[dict[str, str]], retry: RetryPolicy) -> dict[str, str] | None:
        """The first of ``keys`` (a user's chain, oldest lane first) that holds an item, or ``None``:
        one BatchGetItem, **eventually consistent** (0.5 RCU a key, found or not). Every like of a
        user whose chain has two lanes reads one of the first 8 lanes, so these reads, not the writes,
        cap a grown post ([docs/likes.md, "On paper, for AWS"](../likes.md#on-paper-for-aws)); half the price doubles that cap. A read
        that misses an item written a moment ago makes the like create a second item for the user,
        which the like aggregator merges into the oldest lane with the latest request's state
        ([`counters.services.likes.merging`][counters.services.likes.merging]), exactly as the
        stale-view writer's second item: correctness never rests on this read. A pointer is no item."""
        if not keys:
            return None
        batch = BatchGet(Get(self.table_name, keys[0]).project(PK, SK, LIVES_IN))
        found = {
            (str(raw[PK]["S"]), str(raw[SK]["S"]))
            for raw in read_keys(self.dynamodb.batch_get_item, batch, [to_item(k) for k in keys], retry)
            if LIVES_IN not in raw
        }
        return next((key for key in keys if (key[PK], key[SK]) in found), None)

    def likers(
        self, pk: str, limit: int, counted: Cond, start: Mapping[str, object] | None, retry: RetryPolicy, capacity: Capacity
    ) -> tuple[list[Liker], dict[str, str] | None]:
        """One Query of one partition key's likes that pass ``counted`` (tombstones are stored,
        not listed): (the likers, its LastEvaluatedKey or ``None``: done)."""
        # Limit counts before the filter: a short page is followed by the caller
        query = Query(self.table_name, (Path(PK) == pk) & Path(SK).begins_with(LIKE_PREFIX), filter=counted, limit=limit, start=start)
        response = read(self.dynamodb.query, retry, capacity, **{**query.params(), "ReturnConsumedCapacity": "TOTAL"})
        found = []
        for raw in response.get("Items", []):
            item = from_item(raw) or {}
            liked_at = item.get(LIKED_AT)
            found.append(Liker(str(item[SK])[len(LIKE_PREFIX) :], None if liked_at is None else int(str(liked_at))))
        last = from_item(response.get("LastEvaluatedKey"))
        return found, (None if not last else {str(k): str(v) for k, v in last.items()})

    def lane_users(self, pk: str, counted: Cond, retry: RetryPolicy, capacity: Capacity) -> Iterator[str]:
        """The users whose like item under one partition key passes ``counted``, in key order
        ([`lane_users`][counters.store.posts.lane_users]; ``AUDIT_PAGE`` items read a page, so that
        an audit merging 64 lanes holds 64 short pages; the capacity is that of a COUNT)."""
        return lane_users(self.dynamodb, self.table_name, pk, retry, capacity, counted=counted, page=AUDIT_PAGE)

    def liking(self, keys: list[dict[str, str]], retry: RetryPolicy, capacity: Capacity) -> set[tuple[str, str]]:
        """Which of ``keys`` hold a like item that is on (a tombstone is not): strongly consistent
        BatchGetItem of up to 100 keys a call (1 RCU a key, found or not), keys only and the
        state; keys DynamoDB leaves unprocessed are sent again, and still left after
        ``retry.max_attempts`` calls are [`ContentionError`][counters.core.errors.ContentionError]."""
        if not keys:
            return set()
        batch = BatchGet(Get(self.table_name, keys[0]).project(PK, SK, LIKED).strongly())
        items = (
            from_item(raw) or {} for raw in read_keys(self.dynamodb.batch_get_item, batch, [to_item(k) for k in keys], retry, capacity)
        )
        return {(str(item[PK]), str(item[SK])) for item in items if item.get(LIKED, True) is True}  # not a tombstone, nor a pointer

    def region_tallies(self, post_id: str, retry: RetryPolicy, capacity: Capacity | None = None) -> list[Post]:
        """The tally item of every Region that counted likes of the post (a global table; one
        strongly consistent Query of this Region's replica): each as a [`Post`][counters.store.post_items.Post] with its
        ``tally``, ``watermarks`` and ``lag_ms``."""
        query = Query(self.table_name, (Path(PK) == post_pk(post_id)) & Path(SK).begins_with(REGION_TALLY_PREFIX))
        query.consistent = True
        found: list[Post] = []
        start: dict[str, Any] | None = None
        while True:
            query.start = start
            response = read(self.dynamodb.query, retry, capacity, **query.params())
            found.extend(post_of({POST_ID: post_id, **(from_item(raw) or {})}) for raw in response.get("Items", []))
            start = from_item(response.get("LastEvaluatedKey"))
            if not start:
                return found

    def probe(self, post_id: str, lane: int, now_ms: int, retry: RetryPolicy) -> int | None:
        """Write a probe into one spread key: its number (``probeSeq``), ``None`` if not written."""
        update = (
            Update(self.table_name, probe_key(post_id, lane))
            .set(POST_ID, post_id)
            .set(PROBED_AT, now_ms)
            .add(PROBE_SEQ, 1)
            .returning("UPDATED_NEW")
        )
        report = run(self.dynamodb.update_item, update.params(), policy=retry, write=True)
        if report.outcome is not Outcome.APPLIED:
            return None
        return int((from_item(report.attributes) or {})[PROBE_SEQ])

    def add_probe_map(self, post_id: str, retry: RetryPolicy) -> bool:
        """``aggProbe`` as an empty map if it is absent (a post stored before probes)."""
        update = Update(self.table_name, post_key(post_id)).set(AGG_PROBE, if_not_exists(AGG_PROBE, {}))
        return run(self.dynamodb.update_item, update.params(), policy=retry, write=True).outcome is Outcome.APPLIED

    def repair(self, post: Post, counted: int, token: str, retry: RetryPolicy, capacity: Capacity) -> Repair:
        """``likeTally = counted``, ``repairToken = token``, ``tallyRev`` + 1, if ``tallyRev`` and
        ``modeEpoch`` are still those of ``post``. A refusal whose ``ALL_OLD`` holds ``token`` was
        refused by this repair's own earlier write: repaired. ``token`` is fresh per repair, so only
        this repair can have stored it, whether the engine saw the earlier attempt's outcome as unknown
        or an SDK re-sent the request after a lost reply (the caller then sees only the refusal)."""
        if post.parts:
            return self._repair_parts(post, counted, token, retry, capacity)
        conditions: list[Cond] = []
        for attribute, seen in ((REVISION, post.revision), (MODE_EPOCH, post.stored_epoch)):
            conditions.append(Path(attribute).missing() if seen is None else Path(attribute) == seen)
        update = (
            Update(self.table_name, post_key(post.post_id))
            .set(TALLY, counted)
            .set(REPAIRED_BY, token)
            .add(REVISION, 1)
            .when(conditions[0] & conditions[1])
        )

        def was_it_us(report: Report, failure: Classified) -> Stop | None:
            stored = old_item(failure) or {}
            return Stop(True) if stored.get(REPAIRED_BY) == token else None

        report = run(self.dynamodb.update_item, update.params(), policy=retry, capacity=capacity, write=True, on_condition=was_it_us)
        if report.outcome is Outcome.APPLIED or (report.stopped and report.value is True):
            return Repair.REPAIRED
        return Repair.MOVING if report.outcome is Outcome.REJECTED else Repair.BUSY

    def _repair_parts(self, post: Post, counted: int, token: str, retry: RetryPolicy, capacity: Capacity) -> Repair:
        """A post grown past 64 lanes (``post.parts``): META's ``likeTally`` = ``counted`` less what
        the groups hold, in one transaction with a check of every group's ``tallyRev``: a like
        counted on any part since the read refuses it. A refusal whose META holds ``token``: repaired."""
        meta, groups = post.parts[0], post.parts[1:]
        update = (
            Update(self.table_name, post_key(post.post_id))
            .set(TALLY, counted - sum(p.tally for p in groups))
            .set(REPAIRED_BY, token)
            .add(REVISION, 1)
            .when(_unmoved(REVISION, meta.revision) & _unmoved(MODE_EPOCH, post.stored_epoch))
        )
        tx: Transaction[RepairAction] = Transaction()
        tx.update(RepairAction.META, update)
        for part in groups:
            tx.check(
                RepairAction.GROUP, Check(self.table_name, group_key(post.post_id, part.group)).when(_unmoved(REVISION, part.revision))
            )

        def was_it_us(report: Report, failure: Classified) -> Stop | None:
            stored = tx.cancellation(failure).old(RepairAction.META) or {}
            return Stop(True) if stored.get(REPAIRED_BY) == token else None

        params = {"TransactItems": tx.items()}
        report = run(
            self.dynamodb.transact_write_items, params, policy=retry, capacity=capacity, write=True, token=True, on_condition=was_it_us
        )
        if report.outcome is Outcome.APPLIED or (report.stopped and report.value is True):
            return Repair.REPAIRED
        return Repair.MOVING if report.outcome is Outcome.REJECTED else Repair.BUSY


def _unmoved(attribute: str, seen: int | None) -> Cond:
    """``attribute`` is still ``seen`` (``None``: still absent)."""
    return Path(attribute).missing() if seen is None else Path(attribute) == seen
