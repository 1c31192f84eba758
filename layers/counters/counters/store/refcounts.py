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
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.store.expr import Cond, Delete, Get, Key, Path, Put, Query, Transaction, Update
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


class RefCountStore:
    """The requests of a tally kept by child items, with typed answers."""

    def __init__(
        self, table_name: str, *, tally_attribute: str, pk: str = "PK", sk: str = "SK", dynamodb: DynamoDBClient | None = None
    ) -> None:
        self.table_name = table_name
        self.tally, self.pk, self.sk = tally_attribute, pk, sk
        self._dynamodb = dynamodb

    @property
    def dynamodb(self) -> Any:
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
