"""A reference count's items: a tally on a parent item and the child items it counts (seed 01).

Generic over the tally's attribute name; the rules are [`counters.primitives.refcount`][counters.primitives.refcount]'s.
This module builds the requests, makes the calls through [`counters.core.engine`][counters.core.engine] and answers
typed facts ([`Linked`][counters.store.refcounts.Linked]).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, NamedTuple

from counters.core.client import DynamoDBClient, client
from counters.core.engine import Report, read, run
from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.store.expr import Check, Cond, Delete, Get, Key, Path, Put, Query, Transaction, Update, old_item
from counters.store.items import from_item


class LinkAction(Enum):
    """The actions of a link/unlink transaction (the caller's extra actions have their own names)."""

    CHILD = "child"
    PARENT = "parent"


class Linked(NamedTuple):
    """What a link/unlink transaction did; when refused, which action refused and what it found."""

    report: Report
    child_refused: bool = False
    parent_refused: bool = False
    parent_found: bool = False
    also_refused: bool = False
    child: Mapping[str, Any] | None = None
    parent: Mapping[str, Any] | None = None


class Round(Enum):
    """Which transaction an adoption-aware link/unlink sends (the rules: [`counters.primitives.refcount`][counters.primitives.refcount])."""

    COUNTED = "counted"  # the parent is adopting or adopted: the child carries the mark and moves the tally
    UNCOUNTED = "uncounted"  # unlink of a child without the mark on an adopting parent: delete it, tally untouched
    LEGACY = "legacy"  # the parent has not begun adopting: the rules of a RefCount without a mark


class Page(NamedTuple):
    """One page of a backfill's walk: the children (key and whether marked) and where it ended."""

    children: list[tuple[dict[str, Any], bool]]
    last: Any  # the sort key of the page's last child (the cursor), or None: the walk is done


ADOPTING, ADOPTED = "adopting", "adopted"
"""The parent's adoption state (``<tally>Adoption``): begun, and every child counted."""


class RefCountStore:
    """The requests of a tally kept by child items, with typed answers."""

    def __init__(
        self,
        table_name: str,
        *,
        tally_attribute: str,
        pk: str = "PK",
        sk: str = "SK",
        mark: str | None = None,
        dynamodb: DynamoDBClient | None = None,
    ) -> None:
        """``mark``: the child attribute that says a child is counted (an adoption-aware store);
        the parent's adoption state is ``<tally>Adoption`` and its backfill cursor ``<tally>AdoptionCursor``."""
        self.table_name = table_name
        self.tally, self.pk, self.sk = tally_attribute, pk, sk
        self.mark = mark
        self.state, self.cursor = f"{tally_attribute}Adoption", f"{tally_attribute}AdoptionCursor"
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client: the one given, or the process's."""
        return self._dynamodb or client()

    def link(self, parent: Key, child: Mapping[str, object], also: Transaction[Enum] | None, policy: RetryPolicy) -> Linked:
        """Put the child if it is new (the double-count guard) and ``ADD tally 1`` if the parent exists."""
        tx: Transaction[Enum] = Transaction()
        tx.put(LinkAction.CHILD, Put(self.table_name, item=child).when(Path(self.sk).missing()))  # ALL_OLD: who wrote it
        bump = Update(self.table_name, parent).add(self.tally, 1).when(Path(self.pk).exists())
        bump.on_failure = False  # ADD would otherwise create a phantom parent; no item to learn from
        tx.update(LinkAction.PARENT, bump)
        return self._transact(tx, also, policy)

    def unlink(self, parent: Key, child_key: Key, also: Transaction[Enum] | None, policy: RetryPolicy) -> Linked:
        """Delete the child if it exists and ``ADD tally -1`` if the parent exists with a tally >= 1."""
        tx: Transaction[Enum] = Transaction()
        remove = Delete(self.table_name, key=child_key).when(Path(self.sk).exists())
        remove.on_failure = False
        tx.delete(LinkAction.CHILD, remove)
        # never below zero; ALL_OLD: no item = parent missing, item = tally at 0
        tx.update(
            LinkAction.PARENT, Update(self.table_name, parent).add(self.tally, -1).when(Path(self.pk).exists() & (Path(self.tally) >= 1))
        )
        return self._transact(tx, also, policy)

    # ------------------------------------------------------------------ adoption-aware rounds
    def _marked(self) -> tuple[str, Path]:
        if self.mark is None:
            raise ValueError("an adoption needs the child attribute that marks a counted child: RefCount(..., mark='counted')")
        return self.mark, Path(self.mark)

    def link_round(
        self, parent: Key, child: Mapping[str, object], also: Transaction[Enum] | None, policy: RetryPolicy, kind: Round
    ) -> Linked:
        """A link on an adoption-aware store: ``COUNTED`` puts the child with the mark and adds 1
        if the parent has begun adopting; ``LEGACY`` puts it unmarked and adds 1 if it has not
        (the reset of [`begin`][counters.store.refcounts.RefCountStore.begin] then drops that 1, and the backfill counts the child)."""
        name, state = self._marked()[0], Path(self.state)
        item = {**child, name: True} if kind is Round.COUNTED else {k: v for k, v in child.items() if k != name}
        tx: Transaction[Enum] = Transaction()
        tx.put(LinkAction.CHILD, Put(self.table_name, item=item).when(Path(self.sk).missing()))
        begun = state.exists() if kind is Round.COUNTED else state.missing()
        tx.update(LinkAction.PARENT, Update(self.table_name, parent).add(self.tally, 1).when(Path(self.pk).exists() & begun))
        return self._transact(tx, also, policy)

    def unlink_round(self, parent: Key, child_key: Key, also: Transaction[Enum] | None, policy: RetryPolicy, kind: Round) -> Linked:
        """An unlink on an adoption-aware store: ``COUNTED`` deletes a marked child and subtracts 1;
        ``UNCOUNTED`` deletes an unmarked child of an adopting parent and leaves the tally alone
        (nothing counted it); ``LEGACY`` deletes an unmarked child of a parent not adopting yet and
        subtracts 1, as a RefCount without a mark does. The tally never goes below 0."""
        mark, state, exists = self._marked()[1], Path(self.state), Path(self.sk).exists()
        tx: Transaction[Enum] = Transaction()
        counted = mark == True  # noqa: E712  # builds a condition
        tx.delete(
            LinkAction.CHILD, Delete(self.table_name, key=child_key).when(exists & (counted if kind is Round.COUNTED else mark.missing()))
        )
        parent_exists = Path(self.pk).exists()
        if kind is Round.UNCOUNTED:
            tx.check(LinkAction.PARENT, Check(self.table_name, parent).when(parent_exists & state.exists()))
        else:
            floor = Path(self.tally) >= 1
            # COUNTED: a marked child means the parent began; the condition says so, so that when the
            # child turns out unmarked the refusal also shows whether the parent began (the next round)
            when = parent_exists & (state.exists() if kind is Round.COUNTED else state.missing()) & floor
            tx.update(LinkAction.PARENT, Update(self.table_name, parent).add(self.tally, -1).when(when))
        return self._transact(tx, also, policy)

    def begin(self, parent: Key, policy: RetryPolicy, capacity: Capacity) -> Mapping[str, Any] | None:
        """``tally = 0``, state ``adopting`` if the parent exists and has not begun: from here every
        child counts once, by its link or by the backfill. The parent as it is after (begun now
        or before: a re-sent begin is refused and resets nothing), or ``None`` if it is missing."""
        update = (
            Update(self.table_name, parent)
            .set(self.tally, 0)
            .set(self.state, ADOPTING)
            .when(Path(self.pk).exists() & Path(self.state).missing())
            .returning("ALL_NEW")
        )
        report = run(self.dynamodb.update_item, update.params(), policy=policy, capacity=capacity, write=True)
        if report.outcome is Outcome.APPLIED:
            return from_item(report.attributes)
        if report.outcome is Outcome.REJECTED:
            return old_item(report.failure)
        raise ContentionError("DynamoDB is busy; begin the adoption again (it resets nothing twice)")

    def parent_item(self, parent: Key, policy: RetryPolicy, capacity: Capacity) -> Mapping[str, Any] | None:
        """The parent (strongly consistent), or ``None``."""
        return from_item(read(self.dynamodb.get_item, policy, capacity, **Get(self.table_name, parent).strongly().params()).get("Item"))

    def children(self, pk: object, prefix: str, start: Any, limit: int, policy: RetryPolicy, capacity: Capacity) -> Page:
        """One page of the children under ``pk`` whose sort key begins with ``prefix``, after the
        sort key ``start`` (strongly consistent; keys and the mark only)."""
        name, mark = self._marked()
        query = Query(self.table_name, (Path(self.pk) == pk) & Path(self.sk).begins_with(prefix), limit=limit, consistent=True)
        query.project(self.pk, self.sk, mark)
        if start is not None:
            query.start = {self.pk: pk, self.sk: start}
        page = read(self.dynamodb.query, policy, capacity, **query.params())
        children = []
        for raw in page.get("Items", []):
            item = from_item(raw) or {}
            children.append(({self.pk: item[self.pk], self.sk: item[self.sk]}, item.get(name) is True))
        last = page.get("LastEvaluatedKey")
        return Page(children, None if last is None else (from_item(last) or {})[self.sk])

    def count_child(self, parent: Key, child_key: Key, policy: RetryPolicy, capacity: Capacity) -> Report:
        """The backfill's step: mark the child and add 1, if it exists unmarked and the parent
        has begun adopting. Refused (``REJECTED``): deleted, or marked already (by its link, or by
        this step's own earlier attempt): nothing to count."""
        mark = self._marked()[1]
        tx: Transaction[Enum] = Transaction()
        step = Update(self.table_name, child_key).set(mark, True).when(Path(self.sk).exists() & mark.missing())
        step.on_failure = False
        tx.update(LinkAction.CHILD, step)
        bump = Update(self.table_name, parent).add(self.tally, 1).when(Path(self.pk).exists() & Path(self.state).exists())
        bump.on_failure = False
        tx.update(LinkAction.PARENT, bump)
        return run(
            self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=policy, capacity=capacity, write=True, token=True
        )

    def progress(self, parent: Key, cursor: Any, policy: RetryPolicy, capacity: Capacity) -> Outcome:
        """Record the walk's cursor (``None``: done, state ``adopted``) while the parent is adopting."""
        update = Update(self.table_name, parent)
        if cursor is None:
            update.set(self.state, ADOPTED).remove(self.cursor)
        else:
            update.set(self.cursor, cursor)
        update.when(Path(self.state) == ADOPTING)
        update.on_failure = False
        return run(self.dynamodb.update_item, update.params(), policy=policy, capacity=capacity, write=True).outcome

    def _transact(self, tx: Transaction[Enum], also: Transaction[Enum] | None, policy: RetryPolicy) -> Linked:
        if also is not None:
            tx.extend(also)
        report = run(self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=policy, write=True, token=True)
        if report.failure is None:
            return Linked(report)
        cancelled = tx.cancellation(report.failure)
        return Linked(
            report,
            child_refused=cancelled.failed(LinkAction.CHILD),
            parent_refused=cancelled.failed(LinkAction.PARENT),
            parent_found=cancelled.old(LinkAction.PARENT) is not None,
            also_refused=any(cancelled.failed(name) for name in (also or ())),
            child=cancelled.old(LinkAction.CHILD),
            parent=cancelled.old(LinkAction.PARENT),
        )

    def tally_of(self, parent: Key, policy: RetryPolicy, capacity: Capacity) -> int | None:
        """The parent's tally (strongly consistent); ``None`` when the parent does not exist."""
        response = read(self.dynamodb.get_item, policy, capacity, **Get(self.table_name, parent).strongly().params())
        item = from_item(response.get("Item"))
        return None if item is None else int(item.get(self.tally, 0))

    def count(self, pk: str, prefix: str, where: Cond | None, policy: RetryPolicy, capacity: Capacity) -> int:
        """The children under one partition key that pass ``where`` (strongly consistent COUNT)."""
        query = Query(self.table_name, (Path(self.pk) == pk) & Path(self.sk).begins_with(prefix), consistent=True)
        if where is not None:
            query.where(where)
        params = {**query.params(), "Select": "COUNT", "ReturnConsumedCapacity": "TOTAL"}
        counted = 0
        while True:
            page = read(self.dynamodb.query, policy, capacity, **params)
            counted += int(page["Count"])
            if "LastEvaluatedKey" not in page:
                return counted
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
