"""The ledger compaction route's contract (pydantic): the source of docs/openapi.json and of
counters.http.schemas, read by the OpenAPI generator and the tests, never by the function."""

from counters.http.models import Body, IdPath

__all__ = ["Compaction", "IdPath"]


class Compaction(Body):
    ledgerId: str
    outcome: str
    merged: int
    chunks: int
    lostRaces: int
    complete: bool
