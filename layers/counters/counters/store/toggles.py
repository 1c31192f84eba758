"""A counted toggle's items: one on/off state item per key and a tally on a parent item.

Generic over the attribute names (the state attribute, the parent's tally and revision): a family
module instantiates [`ToggleStore`][counters.store.toggles.ToggleStore] for its own items ([`counters.store.posts`][counters.store.posts] does for
likes). The rules that decide which write comes next are the primitive's
([`counters.primitives.toggle`][counters.primitives.toggle]); this module builds the requests, makes the calls through
[`counters.core.engine`][counters.core.engine] and answers typed facts ([`StateItem`][counters.store.toggles.StateItem], [`Written`][counters.store.toggles.Written]).

A state item holds ``<state>`` (on/off; absent: on, written before tombstones existed),
``changedAt``/``changedBy`` (the [`Stamp`][counters.store.toggles.Stamp] of the latest request ordered on the key),
``requestId`` (the request that made the state) and, on a tombstone, ``expiresAt`` (TTL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Generic, NamedTuple, TypeVar

from counters.core.client import DynamoDBClient, client
from counters.core.engine import Report, read, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.store.expr import Check, Cond, Get, Key, Path, Put, Transaction, Update, all_of, old_item
from counters.store.items import from_item

# The attribute names of a state item (the state attribute itself is the caller's).
CHANGED_AT, CHANGED_BY, REQUEST_ID, EXPIRES_AT = "changedAt", "changedBy", "requestId", "expiresAt"

P = TypeVar("P")


class Stamp(NamedTuple):
    """When a request arrived (ms) and its id: compared as (at, by), a total order. Ids from
    [`counters.core.commands.new_request_id`][counters.core.commands.new_request_id] begin with the function's receive time, so
    requests in the same millisecond are ordered as the function received them."""

    at: int
    by: str


class StateWrite(Enum):
    """What a write of the toggle does to the state item."""

    FLIP = "flip"  # the state flipped (or a new item switched on)
    TOMBSTONE = "tombstone"  # switching off a key with no item
    RESTAMP = "restamp"  # the same state, a newer stamp


class Owner(Enum):
    """Which writer's version a write may replace (a condition on the stored writer, where versions
    name one: a Region of a global table; with one writer every version is its own)."""

    ANY = "any"  # not conditioned (a switch-on over a tombstone or nothing: it replaces nothing counted)
    MINE = "mine"  # a version this writer wrote
    THEIRS = "theirs"  # a version another writer wrote (or none recorded)


class ToggleAction(Enum):
    """The actions of a toggle's transaction: the state item and the parent."""

    STATE = "state"
    PARENT = "parent"


class StateItem(NamedTuple):
    """A stored state item: on or off, the stamp of the latest request ordered on it, and the
    request that made its state."""

    on: bool
    stamp: Stamp | None
    request_id: str | None
    writer: str | None = None  # the Region that wrote this version (a global table; ``None``: not recorded)
    points_to: int | None = None  # a pointer item, not a state: where the key's state lives (see ``ToggleStore``)


class Written(NamedTuple, Generic[P]):
    """What one write of a toggle did: its engine report and, when a condition refused it, which
    half refused and what it found (``stored``: the state item, ``parent``: the parent, each
    ``None`` when there was no item)."""

    report: Report
    state_refused: bool = False
    parent_refused: bool = False
    stored: StateItem | None = None
    parent: P | None = None
    paired: bool = False  # sent as one TransactWriteItems with the tally's item


class ToggleWrite(NamedTuple):
    """One write of a toggle ([`ToggleStore.write`][counters.store.toggles.ToggleStore.write]): ``kind``, the state asked for, the
    request's stamp, the stored writer it may replace (``owner``; only where versions name their
    writer), the attributes of every write (``attributes``) and of a flip or a new tombstone only
    (``flip_attributes``), and a tombstone's TTL."""

    kind: StateWrite
    on: bool
    stamp: Stamp
    owner: Owner
    attributes: Mapping[str, object]
    flip_attributes: Mapping[str, object]
    expires_at: int


class Guard(NamedTuple, Generic[P]):
    """A condition the caller adds to the parent's half of a flip (e.g. "the post is still in
    standard mode"), with the same rule in Python on the parent's fact, to tell a refusal by it
    from the others."""

    condition: Cond
    holds: Callable[[P], bool]


class Tally(NamedTuple, Generic[P]):
    """Where a write that counts moves the count, in the same TransactWriteItems: ``ADD`` on the
    tally of the item at ``key`` (and its revision).

    ``parent`` True: the item is the toggle's parent (e.g. a post's ``META``): a count, or a new
    tombstone, under a missing parent is refused (``parent_missing``), and ``guard`` is added to
    the count's condition. False: the item is the writer's own tally (a Region's item on a global
    table), created by its first ``ADD``. ``unfloored``: where it holds, the tally may go below 0
    (it is one part of a count kept on several items: a post grown past 64 lanes)."""

    key: Key
    parent: bool = True
    guard: Guard[P] | None = None
    unfloored: Cond | None = None


def stored_is_older(stamp: Stamp) -> Cond:
    """The staleness guard: the stored stamp is older than this request's (or there is none).
    [`counters.primitives.toggle.newer_than`][counters.primitives.toggle.newer_than] is the same rule in Python."""
    at, by = Path(CHANGED_AT), Path(CHANGED_BY)
    return at.missing() | (at < stamp.at) | ((at == stamp.at) & (by < stamp.by))


class ToggleStore(Generic[P]):
    """The requests of a counted toggle over one table, with typed answers."""

    def __init__(
        self,
        table_name: str,
        *,
        state_attribute: str,
        tally_attribute: str,
        parent: Callable[[Mapping[str, Any]], P],
        revision_attribute: str | None = None,
        writer_attribute: str | None = None,
        pointer_attribute: str | None = None,
        pk: str = "PK",
        sk: str = "SK",
        dynamodb: DynamoDBClient | None = None,
    ) -> None:
        """``parent`` turns a stored parent item into the caller's fact (e.g. a post).

        ``pointer_attribute``: an item holding it is a **pointer**, not a state: its state attribute
        is neither ``True`` nor ``False``, so no write of the toggle passes its condition, and a
        refused write reports it (``StateItem.points_to``: the attribute's number) for the caller to
        write where it points (a grown post's likes: [docs/likes.md "A spread that grows"](../likes.md#a-spread-that-grows))."""
        self.table_name = table_name
        self.state, self.tally, self.revision = state_attribute, tally_attribute, revision_attribute
        self.writer = writer_attribute  # a global table's "which Region wrote this version" (regional writes)
        self.pointer = pointer_attribute
        self.pk, self.sk = pk, sk
        self.parent_of = parent
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client: the one given, or the process's."""
        return self._dynamodb or client()

    # ------------------------------------------------------------------ facts and conditions
    def state_item(self, item: Mapping[str, Any] | None) -> StateItem | None:
        """The state an item holds, or None."""
        if not item:
            return None
        if self.pointer is not None and self.pointer in item:
            return StateItem(False, None, None, points_to=int(str(item[self.pointer])))
        stamp = Stamp(int(item[CHANGED_AT]), str(item.get(CHANGED_BY, ""))) if CHANGED_AT in item else None
        request = item.get(REQUEST_ID)
        writer = item.get(self.writer) if self.writer else None
        on = item.get(self.state, True) is not False
        return StateItem(on, stamp, None if request is None else str(request), None if writer is None else str(writer))

    def is_on(self) -> Cond:
        """The items that count: state on (an item without the attribute is on)."""
        state = Path(self.state)
        return state.missing() | (state == True)  # noqa: E712  # builds a condition, not a comparison

    def is_off(self) -> Cond:
        """The state attribute says off."""
        return Path(self.state) == False  # noqa: E712  # builds a condition

    # ------------------------------------------------------------------ requests
    def _flip_state(self, key: Key, on: bool, stamp: Stamp, attributes: Mapping[str, object], expires_at: int) -> Update:
        """The state item's half of a flip: stamped, ``requestId``, usable alone or in a transaction."""
        update = Update(self.table_name, key).set(self.state, on).set(CHANGED_AT, stamp.at).set(CHANGED_BY, stamp.by)
        update.set(REQUEST_ID, stamp.by)
        if not on:
            update.set(EXPIRES_AT, expires_at)
        update.set_all(attributes)
        sk = Path(self.sk)
        if on:
            update.remove(EXPIRES_AT).when(sk.missing() | (self.is_off() & stored_is_older(stamp)))
        else:
            update.when(sk.exists() & self.is_on() & stored_is_older(stamp))
        return update  # ALL_OLD on failure: the state that stopped it

    def _tombstone(self, key: Key, stamp: Stamp, attributes: Mapping[str, object], expires_at: int) -> Put:
        item = {**key, **attributes, self.state: False, CHANGED_AT: stamp.at, CHANGED_BY: stamp.by, EXPIRES_AT: expires_at}
        return Put(self.table_name, item=item).when(Path(self.sk).missing())

    def _restamp(self, key: Key, on: bool, stamp: Stamp, attributes: Mapping[str, object], expires_at: int) -> Update:
        update = Update(self.table_name, key).set(CHANGED_AT, stamp.at).set(CHANGED_BY, stamp.by)
        if not on:
            update.set(EXPIRES_AT, expires_at)
        update.set_all(attributes)
        return update.when(Path(self.sk).exists() & (self.is_on() if on else self.is_off()) & stored_is_older(stamp))

    # ------------------------------------------------------------------ calls
    def _single(self, report: Report) -> Written[P]:
        if report.failure is None:
            return Written(report)
        return Written(report, state_refused=True, stored=self.state_item(old_item(report.failure)))

    def _pair(self, tx: Transaction[ToggleAction], report: Report) -> Written[P]:
        if report.failure is None:
            return Written(report, paired=True)
        cancelled = tx.cancellation(report.failure)
        found = cancelled.old(ToggleAction.PARENT)
        return Written(
            report,
            paired=True,
            state_refused=cancelled.failed(ToggleAction.STATE),
            parent_refused=cancelled.failed(ToggleAction.PARENT),
            stored=self.state_item(cancelled.old(ToggleAction.STATE)),
            parent=None if found is None else self.parent_of(found),
        )

    def _transact(self, tx: Transaction[ToggleAction], policy: RetryPolicy, capacity: Capacity) -> Written[P]:
        params = {"TransactItems": tx.items()}
        report = run(self.dynamodb.transact_write_items, params, policy=policy, capacity=capacity, write=True, token=True)
        return self._pair(tx, report)

    def owned(self, owner: Owner, writer: str) -> Cond | None:
        """The condition on the stored version's writer (``None``: any, or versions that name no writer)."""
        if self.writer is None or not writer or owner is Owner.ANY:
            return None
        stored = Path(self.writer)
        return stored == writer if owner is Owner.MINE else stored.missing() | (stored != writer)

    @staticmethod
    def pairs(tally: Tally[P] | None, kind: StateWrite, delta: int) -> bool:
        """Whether a write goes with the tally's item in one TransactWriteItems: it counts
        (``delta`` not 0), or it is a new tombstone under a parent whose existence it checks."""
        return tally is not None and (delta != 0 or (kind is StateWrite.TOMBSTONE and tally.parent))

    def _move(self, tally: Tally[P], delta: int, writer: str) -> Update:
        """The tally's half: ``ADD tally delta`` (and the revision), the tally staying >= 0; on a
        parent, if it exists (and the guard holds); on a writer's own item, naming its writer."""
        update = Update(self.table_name, tally.key).add(self.tally, delta)
        if writer and self.writer is not None and not tally.parent:
            update.set(self.writer, writer)
        if self.revision:
            update.add(self.revision, 1)
        exists = Path(self.pk).exists() if tally.parent else None
        floor = Path(self.tally) >= -delta if delta < 0 else None
        if floor is not None and tally.unfloored is not None:
            floor = floor | tally.unfloored
        condition = all_of(exists, floor, tally.guard.condition if tally.guard is not None else None)
        return update if condition is None else update.when(condition)

    def write(
        self,
        key: Key,
        write: ToggleWrite,
        *,
        writer: str = "",
        tally: Tally[P] | None = None,
        delta: int = 0,
        policy: RetryPolicy,
        capacity: Capacity,
    ) -> Written[P]:
        """One write of the toggle ([`ToggleWrite`][counters.store.toggles.ToggleWrite]): the state item, and when it
        [`pairs`][counters.store.toggles.ToggleStore.pairs], in one TransactWriteItems ``ADD tally delta``
        on ``tally``'s item (or, for a new tombstone, a check that the parent exists). ``writer``
        (``""``: none): the name every version carries (a Region of a global table), and the
        writer ``write.owner`` is read against."""
        attributes = dict(write.attributes)
        if writer:
            if self.writer is None:
                raise ValueError("a write that names its writer needs the writer attribute")
            attributes[self.writer] = writer
        request: Update | Put
        if write.kind is StateWrite.TOMBSTONE:
            request = self._tombstone(key, write.stamp, {**attributes, **write.flip_attributes}, write.expires_at)
        elif write.kind is StateWrite.RESTAMP:
            request = self._restamp(key, write.on, write.stamp, attributes, write.expires_at)
        else:
            request = self._flip_state(key, write.on, write.stamp, {**attributes, **write.flip_attributes}, write.expires_at)
        owned = self.owned(write.owner, writer)
        if owned is not None:
            request.when(owned)
        if tally is None or not self.pairs(tally, write.kind, delta):
            send = self.dynamodb.put_item if isinstance(request, Put) else self.dynamodb.update_item
            return self._single(run(send, request.params(), policy=policy, capacity=capacity, write=True))
        tx: Transaction[ToggleAction] = Transaction()
        if isinstance(request, Put):
            tx.put(ToggleAction.STATE, request)
        else:
            tx.update(ToggleAction.STATE, request)
        if delta:
            tx.update(ToggleAction.PARENT, self._move(tally, delta, writer))
        else:  # a new tombstone: nothing to count, but not under a missing parent
            check = Check(self.table_name, key=tally.key).when(Path(self.pk).exists())
            check.on_failure = False  # a refusal means "no parent": nothing to return
            tx.check(ToggleAction.PARENT, check)
        return self._transact(tx, policy, capacity)

    # ------------------------------------------------------------------ reads
    def read_state(self, key: Key, policy: RetryPolicy) -> StateItem | None:
        """A state item, strongly consistent (``None``: never written)."""
        params = Get(self.table_name, key).strongly().params()
        return self.state_item(from_item(read(self.dynamodb.get_item, policy, None, **params).get("Item")))
