"""A small typed builder for DynamoDB requests: placeholders are made for you.

Every attribute name goes through ``ExpressionAttributeNames`` and every value through
``ExpressionAttributeValues`` (STYLE 4): a request is built from [`Path`][counters.store.conditions.Path] s and Python values,
never from expression strings.

    post = Path("mode")
    update = (
        Update(table, {"PK": "POST#p1", "SK": "META"})
        .set("mode", "hot")
        .add("modeEpoch", 1)
        .when(Path("PK").exists() & (post.missing() | (post != "hot")))
        .returning("ALL_NEW")
    )
    run(dynamodb.update_item, update.params(), ...)          # UpdateItem
    tx.update(Action.POST, update)                           # or one action of a transaction

An update is SET/ADD/REMOVE/DELETE clauses; conditions and operands ([`Path`][counters.store.conditions.Path], [`Cond`][counters.store.conditions.Cond],
[`if_not_exists`][counters.store.conditions.if_not_exists]...) are [`counters.store.conditions`][counters.store.conditions], re-exported here. Rendering allocates
``#name`` placeholders (readable: ``#mode``) and ``:v<n>`` values, and only the ones the request
uses, so DynamoDB never refuses an unused placeholder.

A [`Transaction`][counters.store.expr.Transaction] names its actions (an enum per store module), so a cancellation is read by
name ([`Cancellation`][counters.store.expr.Cancellation]), never by position. The transaction's action kinds are written by
distinct methods (``put``/``update``/``delete``/``check``) so tools/iam derives each function's
``TransactWriteItems`` kinds from the methods it reaches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Generic, Literal, Self, TypeVar

from counters.core.client import Params as Params  # re-exported: the store modules build Params
from counters.core.failures import CancellationReason, Classified
from counters.core.items import Item, Record
from counters.store.conditions import Cond as Cond
from counters.store.conditions import Operand as Operand
from counters.store.conditions import Path as Path
from counters.store.conditions import Placeholders as Placeholders
from counters.store.conditions import Value as Value
from counters.store.conditions import all_of as all_of
from counters.store.conditions import any_of as any_of
from counters.store.conditions import if_not_exists as if_not_exists
from counters.store.conditions import list_append as list_append
from counters.store.conditions import minus as minus
from counters.store.conditions import operand as operand
from counters.store.conditions import path as path
from counters.store.conditions import plus as plus
from counters.store.items import from_item, to_item

# Params: the keyword arguments of one botocore call (or the body of one transaction action).
Key = Mapping[str, object]
"""A primary key as Python values, e.g. ``{"PK": "POST#p1", "SK": "META"}``."""
ReturnValues = Literal["NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"]


# -- requests --------------------------------------------------------------------------------------
class _Request:
    """A request builder: its ``__slots__`` (its own and its bases') are its fields, shown by ``repr``.
    The builders are plain classes, not dataclasses: an API handler imports them at cold start,
    where each dataclass costs generating and compiling its methods."""

    __slots__ = ()

    def __repr__(self) -> str:
        names = [n for cls in reversed(type(self).__mro__) for n in cls.__dict__.get("__slots__", ())]
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"


class _Write(_Request):
    """What every write shares: its table, condition (``when``, ANDed) and return values."""

    __slots__ = ("table", "condition", "on_failure", "returns")

    def __init__(self, table: str) -> None:
        self.table = table
        self.condition: Cond | None = None
        self.on_failure = True
        """``ReturnValuesOnConditionCheckFailure=ALL_OLD`` with a condition: the loser learns why."""
        self.returns: ReturnValues | None = None

    def when(self, condition: Cond) -> Self:
        self.condition = all_of(self.condition, condition)
        return self

    def returning(self, values: ReturnValues) -> Self:
        self.returns = values
        return self

    def body(self) -> Params:
        """The request as a transaction action's body (no ``ReturnValues``)."""
        raise NotImplementedError

    def params(self) -> Params:
        """The request as one call's parameters."""
        params = self.body()
        if self.returns:
            params["ReturnValues"] = self.returns
        return params

    def _conditioned(self, params: Params, ph: Placeholders) -> Params:
        if self.condition is not None:
            params["ConditionExpression"] = self.condition.render(ph)
            if self.on_failure:
                params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return ph.apply(params)


class Put(_Write):
    """PutItem (or a transaction's Put)."""

    __slots__ = ("item",)

    def __init__(self, table: str, item: Mapping[str, object] | None = None) -> None:
        super().__init__(table)
        self.item: Mapping[str, object] = {} if item is None else item

    def body(self) -> Params:
        """The Put's parameters (a transaction action's body)."""
        return self._conditioned({"TableName": self.table, "Item": to_item(self.item)}, Placeholders())


class Update(_Write):
    """UpdateItem (or a transaction's Update): SET/ADD/REMOVE/DELETE clauses on one key."""

    __slots__ = ("key", "_set", "_add", "_remove", "_delete")

    def __init__(self, table: str, key: Key | None = None) -> None:
        super().__init__(table)
        self.key: Key = {} if key is None else key
        self._set: list[tuple[Path, Operand]] = []
        self._add: list[tuple[Path, object]] = []
        self._remove: list[Path] = []
        self._delete: list[tuple[Path, object]] = []

    def set(self, name: str | Path, value: object) -> Update:
        """``SET name = value``."""
        self._set.append((path(name), operand(value)))
        return self

    def set_all(self, values: Mapping[str, object]) -> Update:
        """``SET`` each name to its value."""
        for name, value in values.items():
            self.set(name, value)
        return self

    def add(self, name: str | Path, value: object) -> Update:
        """``ADD name value``."""
        self._add.append((path(name), value))
        return self

    def remove(self, *names: str | Path) -> Update:
        """``REMOVE`` the names."""
        self._remove.extend(path(n) for n in names)
        return self

    def delete(self, name: str | Path, members: object) -> Update:
        """``DELETE name members`` (from a set)."""
        self._delete.append((path(name), members))
        return self

    def expression(self, ph: Placeholders) -> str:
        """The UpdateExpression, its placeholders allocated in ``ph``."""
        clauses = []
        if self._set:
            clauses.append("SET " + ", ".join(f"{p.render(ph)} = {v.render(ph)}" for p, v in self._set))
        if self._add:
            clauses.append("ADD " + ", ".join(f"{p.render(ph)} {ph.value(v)}" for p, v in self._add))
        if self._remove:
            clauses.append("REMOVE " + ", ".join(p.render(ph) for p in self._remove))
        if self._delete:
            clauses.append("DELETE " + ", ".join(f"{p.render(ph)} {ph.value(v)}" for p, v in self._delete))
        if not clauses:
            raise ValueError("an update with nothing to update")
        return " ".join(clauses)

    def body(self) -> Params:
        """The Update's parameters (a transaction action's body)."""
        ph = Placeholders()
        params: Params = {"TableName": self.table, "Key": to_item(self.key), "UpdateExpression": self.expression(ph)}
        return self._conditioned(params, ph)


class Delete(_Write):
    """DeleteItem (or a transaction's Delete)."""

    __slots__ = ("key",)

    def __init__(self, table: str, key: Key | None = None) -> None:
        super().__init__(table)
        self.key: Key = {} if key is None else key

    def body(self) -> Params:
        """The Delete's parameters (a transaction action's body)."""
        return self._conditioned({"TableName": self.table, "Key": to_item(self.key)}, Placeholders())


class Check(_Write):
    """A transaction's ConditionCheck on one key."""

    __slots__ = ("key",)

    def __init__(self, table: str, key: Key | None = None) -> None:
        super().__init__(table)
        self.key: Key = {} if key is None else key

    def body(self) -> Params:
        """The ConditionCheck's parameters; ``ValueError`` without a condition."""
        if self.condition is None:
            raise ValueError("a ConditionCheck needs a condition")
        return self._conditioned({"TableName": self.table, "Key": to_item(self.key)}, Placeholders())


class Get(_Request):
    """GetItem: one key, optionally projected, optionally strongly consistent."""

    __slots__ = ("table", "key", "projection", "consistent")

    def __init__(self, table: str, key: Key, projection: tuple[Path, ...] = (), consistent: bool = False) -> None:
        self.table, self.key, self.projection, self.consistent = table, key, projection, consistent

    def project(self, *names: str | Path) -> Get:
        """Read only these attributes."""
        self.projection = tuple(path(n) for n in names)
        return self

    def strongly(self) -> Get:
        """Read strongly consistently."""
        self.consistent = True
        return self

    def params(self) -> Params:
        """The GetItem parameters."""
        ph = Placeholders()
        params: Params = {"TableName": self.table, "Key": to_item(self.key)}
        if self.projection:
            params["ProjectionExpression"] = ", ".join(p.render(ph) for p in self.projection)
        if self.consistent:
            params["ConsistentRead"] = True
        return ph.apply(params)


class Query(_Request):
    """Query one partition: ``key`` is the key condition (``Path("PK") == pk``, optionally ``&`` a
    sort-key condition)."""

    __slots__ = ("table", "key", "filter", "projection", "limit", "start", "forward", "consistent", "index")

    def __init__(
        self,
        table: str,
        key: Cond,
        filter: Cond | None = None,
        projection: tuple[Path, ...] = (),
        limit: int | None = None,
        start: Key | None = None,
        forward: bool = True,
        consistent: bool = False,
        index: str | None = None,
    ) -> None:
        self.table, self.key, self.filter, self.projection = table, key, filter, projection
        self.limit, self.start, self.forward, self.consistent, self.index = limit, start, forward, consistent, index

    def where(self, condition: Cond) -> Query:
        """Add a filter condition (``AND`` with any before)."""
        self.filter = all_of(self.filter, condition)
        return self

    def project(self, *names: str | Path) -> Query:
        """Read only these attributes."""
        self.projection = tuple(path(n) for n in names)
        return self

    def params(self) -> Params:
        """The Query parameters."""
        ph = Placeholders()
        params: Params = {"TableName": self.table, "KeyConditionExpression": self.key.render(ph)}
        if self.filter is not None:
            params["FilterExpression"] = self.filter.render(ph)
        if self.projection:
            params["ProjectionExpression"] = ", ".join(p.render(ph) for p in self.projection)
        if self.limit is not None:
            params["Limit"] = self.limit
        if self.start is not None:
            params["ExclusiveStartKey"] = to_item(self.start)
        if not self.forward:
            params["ScanIndexForward"] = False
        if self.consistent:
            params["ConsistentRead"] = True
        if self.index:
            params["IndexName"] = self.index
        return ph.apply(params)


class Scan(_Request):
    """Scan one page of the table: ``limit`` items evaluated (before ``filter``), from after ``start``."""

    __slots__ = ("table", "filter", "projection", "limit", "start")

    def __init__(
        self,
        table: str,
        filter: Cond | None = None,
        projection: tuple[Path, ...] = (),
        limit: int | None = None,
        start: Key | None = None,
    ) -> None:
        self.table, self.filter, self.projection, self.limit, self.start = table, filter, projection, limit, start

    def where(self, condition: Cond) -> Scan:
        """This scan with a filter expression."""
        self.filter = all_of(self.filter, condition)
        return self

    def project(self, *names: str | Path) -> Scan:
        """This scan reading only the given attributes."""
        self.projection = tuple(path(n) for n in names)
        return self

    def params(self) -> Params:
        """The Scan request's parameters."""
        ph = Placeholders()
        params: Params = {"TableName": self.table}
        if self.filter is not None:
            params["FilterExpression"] = self.filter.render(ph)
        if self.projection:
            params["ProjectionExpression"] = ", ".join(p.render(ph) for p in self.projection)
        if self.limit is not None:
            params["Limit"] = self.limit
        if self.start is not None:
            params["ExclusiveStartKey"] = to_item(self.start)
        return ph.apply(params)


# -- transactions ----------------------------------------------------------------------------------
N = TypeVar("N", bound=Enum)


class Transaction(Generic[N]):
    """A TransactWriteItems whose actions have names (an enum), read back by name."""

    def __init__(self) -> None:
        self._names: list[N] = []
        self._items: list[Params] = []

    def _add(self, name: N, item: Params) -> Transaction[N]:
        if name in self._names:
            raise ValueError(f"two actions named {name!r}")
        self._names.append(name)
        self._items.append(item)
        return self

    def put(self, name: N, request: Put) -> Transaction[N]:
        """Add a Put named ``name``."""
        return self._add(name, {"Put": request.body()})

    def update(self, name: N, request: Update) -> Transaction[N]:
        """Add an Update named ``name``."""
        return self._add(name, {"Update": request.body()})

    def delete(self, name: N, request: Delete) -> Transaction[N]:
        """Add a Delete named ``name``."""
        return self._add(name, {"Delete": request.body()})

    def check(self, name: N, request: Check) -> Transaction[N]:
        """Add a ConditionCheck named ``name``."""
        return self._add(name, {"ConditionCheck": request.body()})

    def extend(self, other: Transaction[N]) -> Transaction[N]:
        """Append ``other``'s actions, names included (names stay unique across the two)."""
        if set(other._names) & set(self._names):
            raise ValueError("the two transactions share an action name")
        self._names.extend(other._names)
        self._items.extend(other._items)
        return self

    def delete_each(self, name: N, requests: Iterable[Delete]) -> Transaction[N]:
        """One Delete per request, every one under ``name`` (e.g. a compaction chunk's entries):
        the cancellation reports ``name`` failed when any of them failed."""
        if name in self._names:
            raise ValueError(f"two actions named {name!r}")
        for request in requests:
            self._names.append(name)
            self._items.append({"Delete": request.body()})
        return self

    def items(self) -> list[Params]:
        """The ``TransactItems``."""
        return list(self._items)

    def __iter__(self) -> Iterator[N]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def cancellation(self, failure: Classified | None) -> Cancellation[N]:
        """What each named action's cancellation reason says (empty when there was none)."""
        reasons = failure.reasons if failure is not None else ()
        by_name: dict[N, CancellationReason] = {}
        for name, reason in zip(self._names, reasons, strict=False):
            if name not in by_name or reason.get("Code") == "ConditionalCheckFailed":  # a group: any failed one
                by_name[name] = reason
        return Cancellation(by_name)


class Cancellation(_Request, Generic[N]):
    """A cancelled transaction's reasons, by action name."""

    __slots__ = ("reasons",)

    def __init__(self, reasons: Mapping[N, CancellationReason]) -> None:
        self.reasons = reasons

    def failed(self, name: N) -> bool:
        """``name``'s condition failed."""
        return (self.reasons.get(name) or {}).get("Code") == "ConditionalCheckFailed"

    def old(self, name: N) -> Record | None:
        """The item ``name`` found (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), as Python values;
        ``None`` when there was none (no item, or the action's condition did not fail)."""
        item: Item | None = (self.reasons.get(name) or {}).get("Item")
        return from_item(item) if item else None

    def any_failed(self) -> bool:
        """Some action's condition failed."""
        return any(self.failed(n) for n in self.reasons)


def old_item(failure: Classified | None) -> Record | None:
    """The item a single-item write's failed condition found (``ALL_OLD``), as Python values."""
    if failure is None or not failure.reasons:
        return None
    item: Item | None = failure.reasons[0].get("Item")
    return from_item(item) if item else None
