"""What every family's store holds: the table, the client and the retry budget of its calls, and
the one way a group of items is written ([`Store.write_group`][counters.store.base.Store.write_group])."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from counters.core.client import DynamoDBClient, client
from counters.core.engine import Report, run
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.core.policy import Writes
from counters.store.expr import Transaction

K = TypeVar("K", bound=Enum)


class Store:
    """A family's store on one table: every call it makes goes through the retry engine under
    ``retry``, on ``dynamodb`` (the layer's process-wide client unless one is given: a test's
    stub or fault injector)."""

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The client: the one given, or the process's."""
        return self._dynamodb or client()

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
