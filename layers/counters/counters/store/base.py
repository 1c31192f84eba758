"""What every family's store holds: the table, the client and the retry budget of its calls, the
families it writes and the one check of their tables ([`Store.admit`][counters.store.base.Store.admit] before an
operation, [`Guarded`][counters.store.base.Guarded] on every write), and the one way a group of items is written
([`Store.write_group`][counters.store.base.Store.write_group])."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, ClassVar, TypeVar, cast

from counters.core.client import DynamoDBClient, Params, Response, client
from counters.core.engine import Report, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy, Writes
from counters.core.regions import Topology
from counters.store.expr import Transaction
from counters.store.tables import Table, admit

K = TypeVar("K", bound=Enum)


def _plain(value: object) -> object:
    """An attribute value as the key shapes read it (``{"S": "x"}`` -> ``"x"``)."""
    if isinstance(value, Mapping) and len(value) == 1:
        (kind, inner), *_ = value.items()
        return inner if kind in ("S", "N") else value
    return value


def _written(operation: str, params: Params) -> list[tuple[Mapping[str, Any], Mapping[str, object] | None]]:
    """The (key, new image when known) of every item a write call writes."""
    if operation == "transact_write_items":
        actions = [next(iter(a.items())) for a in params.get("TransactItems", ())]
        return [(b.get("Key") or b.get("Item") or {}, b.get("Item")) for kind, b in actions if kind != "ConditionCheck"]
    if operation == "batch_write_item":
        requests = [r for rows in params.get("RequestItems", {}).values() for r in rows]
        return [(b.get("Key") or b.get("Item") or {}, b.get("Item")) for r in requests for b in r.values()]
    return [(params.get("Key") or params.get("Item") or {}, params.get("Item"))]


class Guarded:
    """A store's client: every write's keys are first admitted by the store's families' tables
    ([`admit`][counters.store.tables.admit]), so nothing outside them is ever sent; reads and
    everything else pass through."""

    def __init__(self, inner: DynamoDBClient, families: tuple[Table, ...], topology: Topology) -> None:
        self._inner, self._families, self._topology = inner, families, topology

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _send(self, operation: str, params: Params) -> Response:
        for key, image in _written(operation, params):
            plain = None if image is None else {k: _plain(v) for k, v in image.items()}
            admit(self._families, self._topology, None, str(_plain(key.get("PK"))), str(_plain(key.get("SK"))), plain)
        response: Response = getattr(self._inner, operation)(**params)
        return response

    def put_item(self, **params: Any) -> Response:
        """PutItem, admitted."""
        return self._send("put_item", params)

    def update_item(self, **params: Any) -> Response:
        """UpdateItem, admitted."""
        return self._send("update_item", params)

    def delete_item(self, **params: Any) -> Response:
        """DeleteItem, admitted."""
        return self._send("delete_item", params)

    def transact_write_items(self, **params: Any) -> Response:
        """TransactWriteItems, every action admitted before any is sent."""
        return self._send("transact_write_items", params)

    def batch_write_item(self, **params: Any) -> Response:
        """BatchWriteItem, every request admitted before any is sent."""
        return self._send("batch_write_item", params)


class Store:
    """A family's store on one table: every call it makes goes through the retry engine under
    ``retry``, on ``dynamodb`` (the layer's process-wide client unless one is given: a test's
    stub or fault injector), guarded by the tables of the families it writes (``FAMILIES``)
    in the mode of ``policy``'s topology."""

    FAMILIES: ClassVar[tuple[Table, ...]] = ()
    """The tables of the item families this store writes (it is their only writer)."""
    GUARDED: ClassVar[bool] = True
    """Whether every written key is admitted by ``FAMILIES`` (``False``: a primitive's store, whose keys are its caller's)."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        policy: RegionPolicy | None = None,
    ) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()
        self.guarded = policy is not None
        """Writes are admitted by the tables (a store built without its feature's policy does not know the mode)."""
        self.policy = policy or ONE_REGION_POLICY

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client (the one given, or the process's), guarded by the store's tables."""
        inner = self._dynamodb or client()
        if not (self.FAMILIES and self.GUARDED and self.guarded):
            return inner
        return cast("DynamoDBClient", Guarded(inner, self.FAMILIES, self.policy.topology))  # it answers every call of the client

    def _table(self, op: str) -> Table:
        found = [table for table in self.FAMILIES if op in table.ops]
        if not found:
            raise KeyError(f"{type(self).__name__} has no operation {op!r} in its tables")
        return found[0]

    def admit(self, op: str, *, item_id: str = "", region: str = "", detail: str = "") -> None:
        """Refuse ``op`` on this table as its family's table says, before any call
        ([`Table.admit`][counters.store.tables.Table.admit])."""
        self._table(op).admit(op, self.policy.topology, item_id=item_id, region=region, detail=detail)

    def refused(self, op: str) -> str | None:
        """The message refusing ``op`` outright on this table, or ``None`` (it runs here)."""
        return self._table(op).refused(op, self.policy.topology)

    def write_group(self, tx: Transaction[K], writes: Writes, *, capacity: Capacity | None = None) -> tuple[Report, K | None]:
        """Write ``tx``'s actions as ``writes`` says ([`Writes`][counters.core.policy.Writes]): one
        ``TransactWriteItems`` under the token rule (answering ``None`` as the failed action: the
        cancellation reasons name it), or one single-item write each, in order, stopping at the
        first that does not apply and answering its action name (``None``: all applied)."""
        return writes.choose(together=self._write_together, in_order=self._write_in_order)(tx, capacity)

    def _write_together(self, tx: Transaction[K], capacity: Capacity | None) -> tuple[Report, K | None]:
        params = {"TransactItems": tx.items()}
        return run(self.dynamodb.transact_write_items, params, policy=self.retry, capacity=capacity, write=True, token=True), None

    def _write_in_order(self, tx: Transaction[K], capacity: Capacity | None) -> tuple[Report, K | None]:
        report = Report(outcome=Outcome.APPLIED, capacity=capacity if capacity is not None else Capacity())
        calls = {"Put": self.dynamodb.put_item, "Update": self.dynamodb.update_item, "Delete": self.dynamodb.delete_item}
        for name, action in zip(tx, tx.items(), strict=True):
            (kind, body), *_ = action.items()
            step = run(calls[kind], dict(body), policy=self.retry, capacity=report.capacity, write=True)
            report.attempts += step.attempts
            report.unknown_seen = report.unknown_seen or step.unknown_seen
            if step.outcome is not Outcome.APPLIED:
                report.outcome, report.failure = step.outcome, step.failure
                return report, name
        return report, None
