"""The layer's JSON type aliases: what a body, a payload or a public record may hold.

``JSONValue`` is any value `json.dumps` writes (and `json.loads` reads back), nested to
any depth; ``JSONObject`` is a JSON object (a response body, a deferred command's payload, an
operation's result). They are the public API's types for such data instead of ``Any``, so a caller
must narrow (``isinstance``) before using a field.

Records read from DynamoDB may also hold `Decimal` (a number that is not whole) and
``bytes``/``set`` (binary and set attributes): [`Record`][counters.core.items.Record] in
[`counters.core.items`][counters.core.items] types those. This module imports nothing at run time (and shadows the
standard library's ``json`` only for code that writes ``from counters.core import json``; the
layer never does).
"""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""Any JSON value (recursive)."""

JSONObject: TypeAlias = "dict[str, JSONValue]"
"""A JSON object: a body, a payload, a result."""

__all__ = ["JSONObject", "JSONValue"]
