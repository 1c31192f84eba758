"""A BatchGetItem as the store shapes it: the request for some keys of one table, and what a
response found and left unprocessed; the engine sends it and asks the unprocessed keys again
([`read_keys`][counters.core.engine.read_keys])."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from counters.core.client import Params
from counters.core.items import Item
from counters.store.expr import Get


class BatchGet:
    """BatchGetItem of keys of one table, shaped like a [`Get`][counters.store.expr.Get] (its
    projection and consistency; its own key is only the template's): the request for some keys,
    and what a response found and left unprocessed. The engine sends it
    ([`read_keys`][counters.core.engine.read_keys]) and asks the unprocessed keys again."""

    __slots__ = ("get",)

    def __init__(self, get: Get) -> None:
        self.get = get

    def params(self, keys: Sequence[Item]) -> Params:
        """The BatchGetItem parameters for ``keys`` (DynamoDB JSON, at most 100)."""
        shape = {k: v for k, v in self.get.params().items() if k not in ("TableName", "Key")}
        return {"RequestItems": {self.get.table: {**shape, "Keys": list(keys)}}, "ReturnConsumedCapacity": "TOTAL"}

    def answer(self, response: Mapping[str, object]) -> tuple[list[Item], list[Item]]:
        """(the items found, the keys left unprocessed) of one response."""
        found = response.get("Responses") or {}
        left = response.get("UnprocessedKeys") or {}
        assert isinstance(found, Mapping) and isinstance(left, Mapping)
        return list(found.get(self.get.table) or []), list((left.get(self.get.table) or {}).get("Keys") or [])
