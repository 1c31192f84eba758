"""Item conversion: Python values <-> DynamoDB attribute values (the wire form botocore sends).

[`to_item`][counters.store.items.to_item] / [`from_item`][counters.store.items.from_item] convert as boto3's ``TypeSerializer``/``TypeDeserializer`` do
(floats refused, numbers exact in DynamoDB's 38-digit context), except that whole numbers come back
as ``int`` (counters, stamps and ids are whole) and binary values as ``bytes``. A number that is not
whole comes back as `Decimal`, exactly as stored: never a ``float``, which would
round it. The wire types are [`counters.core.items`][counters.core.items].

Only the store converts items; everything above it sees typed facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

from counters.core.items import AttributeValue, Item, Record

# DynamoDB numbers: 38 digits of precision, exponents -130..125; anything inexact is an error.
_NUMBERS = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])


def _number(value: int | Decimal) -> str:
    return str(_NUMBERS.create_decimal(value))


def serialize(value: object) -> AttributeValue:
    """One Python value -> one DynamoDB attribute value."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, (int, Decimal)):
        return {"N": _number(value)}
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use int or Decimal types instead.")
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, (bytes, bytearray)):
        return {"B": bytes(value)}
    if isinstance(value, Set):
        if not value:
            raise TypeError("an empty set is not a DynamoDB value")
        if all(isinstance(v, str) for v in value):
            return {"SS": list(value)}
        if all(isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in value):
            return {"NS": [_number(v) for v in value]}
        if all(isinstance(v, (bytes, bytearray)) for v in value):
            return {"BS": [bytes(v) for v in value]}
        raise TypeError("a set must hold only strings, only numbers or only bytes")
    if isinstance(value, (list, tuple)):
        return {"L": [serialize(v) for v in value]}
    if isinstance(value, Mapping):
        return {"M": {str(k): serialize(v) for k, v in value.items()}}
    raise TypeError(f"unsupported type {type(value)!r} for value {value!r}")


def _plain_number(text: str) -> int | Decimal:
    number = Decimal(text)
    return int(number) if number == number.to_integral_value() else number


def deserialize(value: AttributeValue) -> Any:
    """One DynamoDB attribute value -> one Python value (``Any``: see [`Record`][counters.core.items.Record])."""
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return _plain_number(data)
    if kind == "BOOL":
        return data
    if kind == "NULL":
        return None
    if kind == "B":
        return bytes(data)
    if kind == "M":
        return {k: deserialize(v) for k, v in data.items()}
    if kind == "L":
        return [deserialize(v) for v in data]
    if kind == "SS":
        return set(data)
    if kind == "NS":
        return {_plain_number(v) for v in data}
    if kind == "BS":
        return {bytes(v) for v in data}
    raise TypeError(f"unknown DynamoDB type {kind!r}")


def to_item(values: Mapping[str, object]) -> Item:
    """Python values -> DynamoDB attribute values."""
    return {k: serialize(v) for k, v in values.items()}


def from_item(item: Mapping[str, AttributeValue] | None) -> Record | None:
    """DynamoDB attribute values -> Python values; numbers (nested ones too) come back as
    ``int`` when whole, `Decimal` otherwise."""
    if item is None:
        return None
    return {k: deserialize(v) for k, v in item.items()}
