"""The operations API's contract: the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function.
Its answer is the store's result type."""

from counters.http.models import OperationIdPath, Read
from counters.store.operations import PublicOperation

__all__ = ["Operation", "OperationIdPath"]

Operation = PublicOperation

READS = {
    "GET /operations/{operationId}": Read(
        strong="one strongly consistent read of the operation record (PENDING until the retry worker has finished it)"
    ),
}
