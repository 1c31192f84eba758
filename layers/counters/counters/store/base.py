"""What every family's store holds: the table, the client and the retry budget of its calls."""

from __future__ import annotations

from counters.core.client import DynamoDBClient, client
from counters.core.failures import RetryPolicy


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
