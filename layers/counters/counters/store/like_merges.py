"""A user's like items on a grown post: read along the user's chain, and merged into one.

When a hot post's spread grows, a writer with a stale view of the spread can create a second like
item for a user ([docs/DESIGN.md, "A spread that grows"](../DESIGN.md#a-spread-that-grows)). The like aggregator finds such pairs
after the fact and merges them; this module is its storage half, sent through the engine like
every call:

* [`LikeMergeStore.spread`][counters.store.like_merges.LikeMergeStore.spread]: the post's
  ``spread`` now, read strongly consistent from ``META`` (never a cache: it only grows);
* [`LikeMergeStore.read`][counters.store.like_merges.LikeMergeStore.read]: some of a user's chain
  keys, one consistent BatchGetItem (1 RCU a key), projected on the like's own attributes;
* [`LikeMergeStore.merge`][counters.store.like_merges.LikeMergeStore.merge]: one
  TransactWriteItems: the kept item takes the latest request's state and counts the change
  through its own ``delta``, the others are deleted, every one conditioned on its stamp as read.

The rules (which item is kept, what it takes, its ``delta``) are the service's
([`counters.services.likes.merging`][counters.services.likes.merging]).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, NamedTuple

from counters.core.client import DynamoDBClient, client
from counters.core.engine import read, read_keys, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.store.batch import BatchGet
from counters.store.expr import Cond, Delete, Get, Path, Put, Transaction, Update
from counters.store.items import from_item, to_item
from counters.store.post_items import (
    DELTA,
    LIKE_PREFIX,
    LIKED,
    LIKED_AT,
    LIVES_IN,
    MERGED,
    PK,
    POINTER,
    POST_ID,
    SETTLED,
    SK,
    SPREAD_ATTRIBUTE,
    SWEPT,
    USER_ID,
    Post,
    parse_hot_pk,
    post_key,
    post_of,
)
from counters.store.posts import lane_users, like_toggles
from counters.store.toggles import CHANGED_AT, CHANGED_BY, EXPIRES_AT, REQUEST_ID, Stamp, StateItem

READ_ATTRIBUTES = (PK, SK, LIKED, CHANGED_AT, CHANGED_BY, REQUEST_ID, LIKED_AT, EXPIRES_AT, LIVES_IN)
"""What a merge reads of a like item (and, with ``delta``, all it writes: the aggregator's IAM grant)."""
MERGE_ATTRIBUTES = (*READ_ATTRIBUTES, DELTA, MERGED, USER_ID)
SWEEP_PAGE = 100
"""Keys a sweep's Query reads a page (strongly consistent, keys only)."""


class LikeItem(NamedTuple):
    """A user's like item in one lane, as read: its key, its state (stamp, request) and what a
    kept item takes from the latest one (``likedAt``, a tombstone's ``expiresAt``)."""

    key: dict[str, str]
    state: StateItem
    liked_at: int | None = None
    expires_at: int | None = None


class MergeAction(Enum):
    """The actions of a merge's transaction."""

    KEPT = "kept"
    RETIRED = "retired"
    POINTER = "pointer"


def lane_number(key: Mapping[str, str]) -> int:
    """The lane of a like item's key."""
    parsed = parse_hot_pk(key[PK])
    assert parsed is not None  # a merge reads spread keys only
    return int(parsed[1][1:])


def _pointer_item(key: Mapping[str, str], lane: int) -> dict[str, object]:
    """A pointer at ``key`` to the user's item in ``lane`` (a whole item: no ``delta``, counts nothing)."""
    return {**key, LIKED: POINTER, LIVES_IN: lane, USER_ID: key[SK][len(LIKE_PREFIX) :]}


def _pointer_as_read(found: LikeItem | None) -> Cond:
    """The user's lane holds what was read there: nothing, or the same pointer."""
    if found is None:
        return Path(SK).missing()
    if found.state.points_to is not None:
        return Path(LIVES_IN) == found.state.points_to
    return _stamped_as(found.state.stamp)


def _stamped_as(stamp: Stamp | None) -> Cond:
    """The item is still the version read: same stamp (every write of a like moves it), and it exists."""
    at, by = Path(CHANGED_AT), Path(CHANGED_BY)
    if stamp is None:  # written before stamps: exists, and still unstamped
        return Path(SK).exists() & at.missing()
    return (at == stamp.at) & (by == stamp.by)


class LikeMergeStore:
    """The reads and the one write of a merge of a user's like items."""

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self._states = like_toggles(table_name, dynamodb=dynamodb)

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client: the one given, or the process's."""
        return self._dynamodb or client()

    def spread_get(self, post_id: str) -> Get:
        """The GetItem of the post's ``spread``, ``settled`` and ``swept`` (strongly consistent, those attributes only)."""
        return Get(self.table_name, post_key(post_id)).project(SPREAD_ATTRIBUTE, SETTLED, SWEPT).strongly()

    def spread(self, post_id: str, retry: RetryPolicy) -> int | None:
        """The post's ``spread`` now, strongly consistent (``None``: no post, or one stored before spread)."""
        return self.layout(post_id, retry).spread

    def layout(self, post_id: str, retry: RetryPolicy) -> Post:
        """The post's ``spread``, ``settled`` and ``swept`` now, strongly consistent (an empty
        [`Post`][counters.store.post_items.Post], ``spread`` ``None``: no post, or one stored before spread)."""
        item = from_item(read(self.dynamodb.get_item, retry, None, **self.spread_get(post_id).params()).get("Item")) or {}
        return post_of({**item, POST_ID: post_id})

    def advance(self, post_id: str, spread: int, lanes: int, retry: RetryPolicy) -> Outcome:
        """``swept`` = ``lanes`` if the post's spread is still ``spread`` and fewer lanes are marked
        swept (one conditional UpdateItem on META, by the sweep after it put every pointer of those
        lanes in place; a second sweep of the same spread never moves it back): ``APPLIED``;
        ``REJECTED``: grown again meanwhile, or marked already."""
        swept = Path(SWEPT)
        update = (
            Update(self.table_name, post_key(post_id))
            .set(SWEPT, lanes)
            .when((Path(SPREAD_ATTRIBUTE) == spread) & (swept.missing() | (swept < lanes)))
        )
        update.on_failure = False
        return run(self.dynamodb.update_item, update.params(), policy=retry, write=True).outcome

    def settle(self, post_id: str, spread: int, retry: RetryPolicy) -> Outcome:
        """``settled`` = ``spread`` if the post's spread is still ``spread`` (one conditional
        UpdateItem on META, by the sweep that put every user's pointer in place): ``APPLIED``;
        ``REJECTED``: grown again meanwhile (that growth's sweep settles it)."""
        update = Update(self.table_name, post_key(post_id)).set(SETTLED, spread).when(Path(SPREAD_ATTRIBUTE) == spread)
        update.on_failure = False
        return run(self.dynamodb.update_item, update.params(), policy=retry, write=True).outcome

    def lane_users(self, pk: str, retry: RetryPolicy) -> Iterator[str]:
        """Every user with an item under one spread key (a like, a tombstone or a pointer), in key
        order, strongly consistent ([`lane_users`][counters.store.posts.lane_users], ``SWEEP_PAGE`` a page)."""
        return lane_users(self.dynamodb, self.table_name, pk, retry, None, counted=None, page=SWEEP_PAGE)

    def batch_get(self, keys: Sequence[Mapping[str, str]]) -> BatchGet:
        """The BatchGetItem of a user's chain keys: consistent, projected on ``READ_ATTRIBUTES``."""
        return BatchGet(Get(self.table_name, keys[0]).project(*READ_ATTRIBUTES).strongly())

    def read(self, keys: Sequence[Mapping[str, str]], retry: RetryPolicy) -> list[LikeItem]:
        """The items found under ``keys``, in the order of ``keys``: one consistent BatchGetItem
        per 100 keys (its unprocessed keys asked again, within ``retry``'s attempts; then
        [`ContentionError`][counters.core.errors.ContentionError])."""
        if not keys:
            return []
        found = {
            (str(item[PK]), str(item[SK])): item
            for item in map(from_item, read_keys(self.dynamodb.batch_get_item, self.batch_get(keys), [to_item(k) for k in keys], retry))
            if item
        }
        return [self._item(k, found[(k[PK], k[SK])]) for k in keys if (k[PK], k[SK]) in found]

    def _item(self, key: Mapping[str, str], item: Mapping[str, Any]) -> LikeItem:
        state = self._states.state_item(item)
        assert state is not None  # a found item has a state
        liked_at, expires_at = item.get(LIKED_AT), item.get(EXPIRES_AT)
        return LikeItem(
            dict(key), state, None if liked_at is None else int(str(liked_at)), None if expires_at is None else int(str(expires_at))
        )

    def pointer(self, key: Mapping[str, str], lane: int, found: LikeItem | None) -> Put:
        """A pointer at ``key`` to the user's item in ``lane``: a whole item (``Put``: the ``delta``
        of what it replaces is gone, so its stream record counts nothing), conditioned on ``key``
        holding what was read (``found``)."""
        return self._pointer_put(key, lane, _pointer_as_read(found))

    def _pointer_put(self, key: Mapping[str, str], lane: int, condition: Cond) -> Put:
        put = Put(self.table_name, item=_pointer_item(key, lane)).when(condition)
        put.on_failure = False
        return put

    def _put(self, put: Put, retry: RetryPolicy) -> Outcome:
        return run(self.dynamodb.put_item, put.params(), policy=retry, write=True).outcome

    def point(self, key: Mapping[str, str], lane: int, retry: RetryPolicy) -> Outcome:
        """A pointer at ``key`` (the user's lane) to their item in ``lane``, if ``key`` holds
        nothing or that same pointer (one conditional PutItem, 1 WCU, nothing read; put again by a
        sweep resumed after a failure): ``APPLIED``; ``REJECTED``: something else is there (the
        user's item, a pointer elsewhere, a retired item): the caller merges the user's chain."""
        return self._put(self._pointer_put(key, lane, Path(SK).missing() | (Path(LIVES_IN) == lane)), retry)

    def transaction(
        self,
        kept: LikeItem,
        latest: LikeItem,
        retired: Sequence[LikeItem],
        delta: int,
        pointer: tuple[Mapping[str, str], LikeItem | None] | None = None,
    ) -> Transaction[MergeAction]:
        """The merge's TransactWriteItems (see [`merge`][counters.store.like_merges.LikeMergeStore.merge])."""
        tx: Transaction[MergeAction] = Transaction()
        at = None if pointer is None else dict(pointer[0])
        if pointer is not None:
            tx.put(MergeAction.POINTER, self.pointer(pointer[0], lane_number(kept.key), pointer[1]))
        if not retired:
            return tx
        state = latest.state
        # ``merged`` moves every time: a write that changes nothing gets no stream record (DynamoDB
        # Streams, "Change data capture for DynamoDB Streams"), and the kept item may already hold
        # the latest state and this very ``delta`` (the latest request wrote it): its count would be lost.
        update = Update(self.table_name, kept.key).set(LIKED, state.on).set(DELTA, delta).add(MERGED, 1)
        if state.stamp is not None:
            update.set(CHANGED_AT, state.stamp.at).set(CHANGED_BY, state.stamp.by)
        if state.request_id is not None:
            update.set(REQUEST_ID, state.request_id)
        else:  # a new tombstone records none: its replay is already_set, as on the item it came from
            update.remove(REQUEST_ID)
        if state.on and latest.liked_at is not None:
            update.set(LIKED_AT, latest.liked_at)
        if state.on or latest.expires_at is None:
            update.remove(EXPIRES_AT)
        else:
            update.set(EXPIRES_AT, latest.expires_at)
        update.when(_stamped_as(kept.state.stamp))
        update.on_failure = False  # a refusal is read again whole, not from ALL_OLD
        deletes = []
        for item in retired:
            if item.key == at:
                continue  # the user's lane: the pointer replaces it
            delete = Delete(self.table_name, item.key).when(_stamped_as(item.state.stamp))
            delete.on_failure = False
            deletes.append(delete)
        return tx.update(MergeAction.KEPT, update).delete_each(MergeAction.RETIRED, deletes)

    def merge(
        self,
        kept: LikeItem,
        latest: LikeItem,
        retired: Sequence[LikeItem],
        delta: int,
        retry: RetryPolicy,
        pointer: tuple[Mapping[str, str], LikeItem | None] | None = None,
    ) -> Outcome:
        """One TransactWriteItems: ``kept`` takes ``latest``'s state, stamp, ``requestId`` and
        ``likedAt`` (or a tombstone's ``expiresAt``) and ``delta`` (what the merge changes the
        count by, for the stream's aggregator), and each of ``retired`` is deleted: every action
        conditioned on its item's stamp as read. ``pointer`` (the user's lane of the spread, and
        what was read there): a pointer to ``kept``'s lane is put there, replacing a retired item
        or a pointer elsewhere (conditioned on it as read). Alone when nothing is retired, and then
        one conditional PutItem (1 WCU in the user's lane, not a transaction's 2: the sweep puts one
        per user who moved, and touches nothing in the old lane). ``APPLIED``; ``REJECTED``: an item
        moved since it was read (read again and decide again); ``CONTENTION``."""
        if not retired and pointer is not None:
            return self._put(self.pointer(pointer[0], lane_number(kept.key), pointer[1]), retry)
        tx = self.transaction(kept, latest, retired, delta, pointer)
        report = run(
            self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=retry, capacity=Capacity(), write=True, token=True
        )
        return report.outcome
