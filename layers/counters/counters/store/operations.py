"""Operation records: ``OP#<operationId>`` / ``OP``, a deferred request's status (PENDING, then final).

The record is written PENDING when a request is deferred ([`counters.deferral.queue`][counters.deferral.queue]), made
final once by the replay that settles it, and read by ``GET /operations/{id}``. Its owner (the
verified caller, with authorization on) decides who may read it.
"""

from __future__ import annotations

import time
from typing import NotRequired, TypedDict

from counters.core.engine import Report, Stop, read, run
from counters.core.failures import Classified
from counters.core.items import Record
from counters.core.json import JSONObject
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.store.base import Store
from counters.store.expr import Delete, Get, Key, Path, Put, Update, old_item
from counters.store.items import from_item
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import HOME, ONCE, WriterRule

PENDING = "PENDING"
TTL_SECONDS = 7 * 24 * 3600
STATUS, RESULT, COMPLETED_AT, OWNER, OP, CREATED_AT, EXPIRES_AT = "status", "result", "completedAt", "owner", "op", "createdAt", "expiresAt"
PUBLIC = ("operationId", "op", "status", "createdAt", "completedAt", "result")

SHAPES = (
    Shape("operation", "OP#<operationId>", "OP", "a deferred request: `PENDING`, then its outcome; 7-day TTL ([retries.md](retries.md))"),
)
WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "operation",
        "OP#<operationId>",
        "OP",
        HOME,
        ONCE,
        ONCE,
        "its id is the request's id (the time and 64 random bits, never chosen by a client); its outcome is written by the "
        "Region whose queue took the request",
    ),
)
TABLE = Table("operations", WRITERS, {"operation": Op("an operation record", ("operation",))})
"""The operation records' (operation x mode) table."""


def operation_key(operation_id: str) -> dict[str, str]:
    """The key of an operation record."""
    return {"PK": f"OP#{operation_id}", "SK": "OP"}


IS_PENDING = Path(STATUS) == PENDING
"""Only a PENDING record changes: a redelivered command leaves the first outcome in place."""


class PublicOperation(TypedDict):
    """What `GET /operations/{id}` shows of an operation record: `completedAt` (epoch s) and
    `result` (the answer the request would have had) once it is final."""

    operationId: str
    op: str
    status: str
    """`PENDING`, then `APPLIED`, `DUPLICATE` or `REJECTED`."""
    createdAt: int
    completedAt: NotRequired[int]
    result: NotRequired[JSONObject]


@dataclass(frozen=True)
class Operation:
    """An operation record as stored."""

    operation_id: str
    op: str
    status: str
    owner: str | None
    public: PublicOperation
    """What ``GET /operations/{id}`` shows of it."""

    @classmethod
    def of(cls, item: Record) -> Operation:
        """The operation read from its stored item."""
        public: PublicOperation = {
            "operationId": item["operationId"],
            "op": item[OP],
            "status": item[STATUS],
            "createdAt": item[CREATED_AT],
        }  # PUBLIC's order; put_pending writes these four, the outcome the other two
        if COMPLETED_AT in item:
            public["completedAt"] = item[COMPLETED_AT]
        if RESULT in item:
            public["result"] = item[RESULT]
        return cls(
            operation_id=str(item.get("operationId", "")),
            op=str(item.get(OP, "")),
            status=str(item.get(STATUS, "")),
            owner=item.get(OWNER),
            public=public,
        )


def outcome_update(table_name: str, operation_id: str, status: str, result: JSONObject) -> Update:
    """The write that makes a PENDING operation final (an UpdateItem, or a transaction's Update)."""
    return (
        Update(table_name, operation_key(operation_id))
        .set(STATUS, status)
        .set(RESULT, result)
        .set(COMPLETED_AT, int(time.time()))
        .when(IS_PENDING)
    )


class OperationRecords(Store):
    """The store of operation records: every call they need, with typed answers."""

    def put_pending(self, operation_id: str, op: str, created_at: int, owner: str | None) -> bool:
        """Store the PENDING record (an operation id is used once); True when stored, including by an
        attempt whose answer was lost (the record found after an unknown outcome is this op's)."""
        item: dict[str, object] = {
            **operation_key(operation_id),
            "operationId": operation_id,
            OP: op,
            STATUS: PENDING,
            CREATED_AT: created_at,
            EXPIRES_AT: created_at + TTL_SECONDS,
        }
        if owner is not None:
            item[OWNER] = owner  # whose request it is: only they (or an admin) may read it
        put = Put(self.table_name, item=item).when(Path("PK").missing())
        report = run(self.dynamodb.put_item, put.params(), policy=self.retry, write=True)
        if report.outcome is Outcome.APPLIED:
            return True
        stored = old_item(report.failure)
        return report.outcome is Outcome.REJECTED and report.unknown_seen and stored is not None and stored.get(OP) == op

    def set_outcome(self, operation_id: str, status: str, result: JSONObject) -> bool | None:
        """Make the record final: True (this call wrote it, or an attempt of it whose answer was
        lost), False (it was already final: a redelivery), None (the budget ran out)."""

        def final(report: Report, failure: Classified) -> Stop:
            stored = old_item(failure) or {}
            # after an unknown outcome, finding our own status means our write committed
            return Stop(report.unknown_seen and stored.get(STATUS) == status and stored.get(RESULT) == result)

        params = outcome_update(self.table_name, operation_id, status, result).params()
        report = run(self.dynamodb.update_item, params, policy=self.retry, write=True, on_condition=final)
        if report.stopped:
            return bool(report.value)
        return True if report.outcome is Outcome.APPLIED else None

    def delete_pending(self, operation_id: str) -> bool:
        """Remove a PENDING record (never a recorded outcome); False when the budget ran out."""
        delete = Delete(self.table_name, key=operation_key(operation_id)).when(IS_PENDING)
        delete.on_failure = False
        return run(self.dynamodb.delete_item, delete.params(), policy=self.retry, write=True).outcome is not Outcome.CONTENTION

    def get(self, operation_id: str) -> Operation | None:
        """The operation record (strongly consistent), or None."""
        key: Key = operation_key(operation_id)
        response = read(self.dynamodb.get_item, self.retry, **Get(self.table_name, key).strongly().params())
        found = from_item(response.get("Item"))
        return None if found is None else Operation.of(found)
