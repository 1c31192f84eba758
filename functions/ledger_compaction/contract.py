"""The ledger compaction route's contract: the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function.
Its answer is the service's result type."""

from counters.http.models import IdPath
from counters.primitives.ledger.compaction import PublicCompaction

__all__ = ["Compaction", "IdPath"]

Compaction = PublicCompaction
