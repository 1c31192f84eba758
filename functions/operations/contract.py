"""The operations API's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function."""

from counters.http.models import Body, OperationIdPath

__all__ = ["Operation", "OperationIdPath"]


class Operation(Body):
    operationId: str
    op: str
    status: str
    createdAt: int
