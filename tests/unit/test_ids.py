"""Ids are path segments: none may be a dot segment (``.``, ``..``, only dots), whatever route or
field carries it (counters.core.ids). In-process on moto: a 400 JSON error, and nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.ids import valid_id
from counters.primitives.ledger import new_key
from tests.conftest import api_event, invoke, item_count, moto_table

TABLE = "tally-ids"
DOTS = [".", "..", "...", "." * 64]


@pytest.fixture
def moto_ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with moto_table(monkeypatch, TABLE) as client:
        yield client


# (function, method, path, body, headers), "{}" where the dotted id goes: every id a route takes
ROUTES = [
    ("LikesFunction", "POST", "/posts", {"postId": "{}", "authorId": "a", "body": "x"}, {}),
    ("LikesFunction", "POST", "/posts", {"authorId": "{}", "body": "x"}, {}),
    ("LikesFunction", "POST", "/posts", {"authorId": "a", "body": "x"}, {"Idempotency-Key": "{}"}),
    ("LikesFunction", "GET", "/posts/{}", None, {}),
    ("LikesFunction", "PUT", "/posts/{}/likes/u1", None, {}),
    ("LikesFunction", "PUT", "/posts/p1/likes/{}", None, {}),
    ("LikesFunction", "DELETE", "/posts/p1/likes/{}", None, {}),
    ("LikesFunction", "GET", "/posts/p1/likes/{}", None, {}),
    ("LikesFunction", "GET", "/posts/{}/likes", None, {}),
    ("LikesFunction", "GET", "/posts/{}/audit", None, {}),
    ("LikesFunction", "PUT", "/posts/{}/mode", {"mode": "hot"}, {}),
    ("LikesFunction", "POST", "/audits", {"postIds": ["{}"]}, {}),
    ("ReservationsFunction", "POST", "/resources", {"resourceId": "{}", "capacity": 1, "strategy": "atomic"}, {}),
    ("ReservationsFunction", "GET", "/resources/{}", None, {}),
    ("ReservationsFunction", "POST", "/resources/{}/reservations", {"quantity": 1}, {}),
    ("ReservationsFunction", "GET", "/resources/r1/reservations/{}", None, {}),
    ("ReservationsFunction", "DELETE", "/resources/r1/reservations/{}", None, {}),
    ("LedgerFunction", "POST", "/ledgers/{}/entries", {"amount": 1}, {"Idempotency-Key": "K"}),
    ("LedgerFunction", "GET", "/ledgers/{}", None, {}),
    ("LedgerCompactionFunction", "POST", "/ledgers/{}/compact", None, {}),
    ("OrdersFunction", "POST", "/orders", {"customerId": "{}", "items": [{"sku": "s", "quantity": 1}]}, {"Idempotency-Key": "k1"}),
    ("OrdersFunction", "POST", "/orders", {"customerId": "c1", "items": [{"sku": "{}", "quantity": 1}]}, {"Idempotency-Key": "k1"}),
    ("OrdersFunction", "POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": 1}]}, {"Idempotency-Key": "{}"}),
]


def filled(value: Any, dots: str) -> Any:
    if isinstance(value, str):
        return dots if value == "{}" else value.replace("{}", dots)
    if isinstance(value, list):
        return [filled(v, dots) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, dots) for k, v in value.items()}
    return value


@pytest.mark.parametrize("dots", ["..", "."])
@pytest.mark.parametrize(
    ("function", "method", "path", "body", "headers"), ROUTES, ids=[f"{r[0]}-{r[1]}-{r[2]}-{i}" for i, r in enumerate(ROUTES)]
)
def test_a_dot_segment_is_no_id_anywhere(
    moto_ddb: Any, load_function: Any, function: str, method: str, path: str, body: Any, headers: dict[str, str], dots: str
) -> None:
    module = load_function(function, TABLE)
    headers = {k: new_key() if v == "K" else filled(v, dots) for k, v in headers.items()}
    status, answer = invoke(module, api_event(method, filled(path, dots), filled(body, dots), headers=headers))
    assert status == 400, answer
    assert answer["error"] == "validation_error" and answer["message"]
    assert set(answer) == {"error", "message"}
    assert item_count(moto_ddb, TABLE) == 0


def test_only_dots_is_never_an_id_but_dots_inside_one_are_fine() -> None:
    assert not any(valid_id(d) for d in DOTS)
    assert all(valid_id(i) for i in ("a", "a.b", "a..", "v1.2.3", "_", "-", "x" * 64))
    assert not valid_id("x" * 65) and not valid_id("") and not valid_id("a#b")
