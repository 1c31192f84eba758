"""The layer's client: endpoint variables honoured, SDK retries off."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from counters.core import client as dynamo
from counters.store import items


@pytest.fixture(autouse=True)
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    dynamo.reset_client()
    yield
    dynamo.reset_client()


def test_service_specific_endpoint_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:2222")
    assert dynamo.client().meta.endpoint_url == "http://127.0.0.1:2222"


def test_global_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    assert dynamo.client().meta.endpoint_url == "http://127.0.0.1:1111"


def test_region_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert dynamo.client().meta.region_name == "eu-west-1"


def test_sdk_retries_are_off() -> None:
    # One attempt in total: the primitives decide what is safe to resend.
    assert dynamo.client().meta.config.retries["total_max_attempts"] == 1


VALUES = [
    {"s": "x", "n": 7, "neg": -3, "big": 10**37, "d": Decimal("1.25"), "t": True, "f": False, "none": None},
    {"m": {"a": [1, "b", {"c": None}], "e": {}}, "l": [], "ss": {"a", "b"}, "ns": {1, 2}, "b": b"\x00\x01", "bs": {b"x"}},
]


@pytest.mark.parametrize("values", VALUES)
def test_items_are_serialised_as_boto3_does(values: dict) -> None:
    """The layer has its own converter (no boto3 import at cold start): same wire format as boto3's."""
    from boto3.dynamodb.types import TypeSerializer

    ours, theirs = items.to_item(values), {k: TypeSerializer().serialize(v) for k, v in values.items()}
    for key in values:
        if "SS" in theirs[key] or "NS" in theirs[key] or "BS" in theirs[key]:
            kind = next(iter(theirs[key]))
            assert sorted(map(bytes if kind == "BS" else str, ours[key][kind])) == sorted(
                map(bytes if kind == "BS" else str, theirs[key][kind])
            )
        elif "B" in theirs[key]:
            assert ours[key] == {"B": bytes(theirs[key]["B"])}
        else:
            assert ours[key] == theirs[key], key


def test_items_round_trip_with_plain_numbers() -> None:
    back = items.from_item(items.to_item({**VALUES[0], **VALUES[1]}))
    assert back["n"] == 7 and type(back["n"]) is int and back["big"] == 10**37
    assert back["d"] == Decimal("1.25") and type(back["d"]) is Decimal  # exact, never a float
    assert back["m"] == {"a": [1, "b", {"c": None}], "e": {}} and back["ns"] == {1, 2} and back["b"] == b"\x00\x01"


@pytest.mark.parametrize("bad", [1.5, set(), {1, "a"}, object(), 10**40])
def test_values_dynamodb_cannot_hold_exactly_are_refused(bad: object) -> None:
    with pytest.raises((TypeError, ArithmeticError)):
        items.to_item({"v": bad})
