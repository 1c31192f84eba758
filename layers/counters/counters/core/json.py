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

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TypeGuard

JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
"""Any JSON value (recursive)."""

JSONObject: TypeAlias = "dict[str, JSONValue]"
"""A JSON object: a body, a payload, a result."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def is_json(value: object) -> TypeGuard[JSONValue]:
    """Whether `value` is JSON as `json.dumps` writes it with no `default`: `str`, `int`,
    `float`, `bool`, `None` (or a subclass: an enum of them), lists of them and dicts with `str`
    keys (a `Decimal`, `bytes`, a `set`, a tuple or a dataclass is not)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is list and isinstance(value, list):  # isinstance narrows for mypy
        return all(map(is_json, value))
    if kind is dict:
        return is_json_object(value)
    return isinstance(value, (str, int, float))


def is_json_object(value: object) -> TypeGuard[JSONObject]:
    """Whether `value` is a JSON object ([is_json][counters.core.json.is_json]): a `dict` itself, not a subclass."""
    if type(value) is not dict or not isinstance(value, dict):  # isinstance narrows for mypy
        return False
    return all(type(k) is str for k in value) and all(map(is_json, value.values()))


def json_object(result: Mapping[str, object]) -> JSONObject:
    """A typed result (one of the services' `TypedDict`s, e.g.
    [PublicPost][counters.services.likes.model.PublicPost]) as the JSON object it already is: the same
    dict, checked, so the HTTP answers and stored operation results are the typed results' exact keys
    and values, in the same order. mypy checks each result where a service builds it; a `TypedDict`
    is not assignable to `dict[str, JSONValue]` (it may hold more keys), so this is the one place
    that turns it into JSON. Raises `TypeError` on a value that is not JSON (a `Decimal` read
    from DynamoDB and put in a result unconverted)."""
    if is_json_object(result):
        return result
    bad = sorted(str(k) for k, v in result.items() if type(k) is not str or not is_json(v)) if isinstance(result, dict) else []
    raise TypeError(f"not a JSON object: {type(result).__name__} (values that are not JSON: {', '.join(bad) or 'none'})")


__all__ = ["JSONObject", "JSONValue", "is_json", "is_json_object", "json_object"]
