"""Request bodies every route shares (counters.http.resolver.TallyResolver), in-process on moto:
JSON that json.loads cannot take safely is a 400, and JSON media types are matched as HTTP does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from counters.primitives.ledger import new_key
from tests.conftest import api_event, invoke, item_count, moto_table

TABLE = "tally-bodies"


@pytest.fixture
def moto_ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with moto_table(monkeypatch, TABLE) as client:
        yield client


HUGE_INT = "1" * 5000  # beyond Python's 4,300-digit int-string conversion limit
DEEP = "[" * 5000 + "]" * 5000  # beyond the interpreter's recursion limit

# (function, path, extra headers, body template with {} where the hostile value goes)
ROUTES = [
    ("LikesFunction", "/posts", {}, '{{"postId": "p1", "authorId": "a", "body": "x", "extra": {}}}'),
    ("LikesFunction", "/posts", {}, '{{"postId": "p1", "authorId": {}, "body": "x"}}'),
    ("LedgerFunction", "/ledgers/alice/entries", {"Idempotency-Key": "K"}, '{{"amount": {}}}'),
    ("OrdersFunction", "/orders", {"Idempotency-Key": "k1"}, '{{"customerId": "c1", "items": [{{"sku": "s", "quantity": {}}}]}}'),
]


@pytest.mark.parametrize(
    "hostile", [HUGE_INT, "-" + HUGE_INT, DEEP, '{"a":' * 3000 + "1" + "}" * 3000], ids=["int", "negative-int", "arrays", "objects"]
)
@pytest.mark.parametrize(("function", "path", "headers", "template"), ROUTES, ids=["posts", "posts-author", "ledger", "orders"])
def test_json_that_json_loads_cannot_take_is_a_400_and_writes_nothing(
    moto_ddb: Any, load_function: Any, function: str, path: str, headers: dict[str, str], template: str, hostile: str
) -> None:
    module = load_function(function, TABLE)
    headers = {k: (new_key() if v == "K" else v) for k, v in headers.items()}
    status, answer = invoke(module, api_event("POST", path, template.format(hostile), headers=headers))
    assert status == 400, answer
    assert answer["error"] in ("invalid_json", "validation_error") and answer["message"]
    assert set(answer) == {"error", "message"}
    assert item_count(moto_ddb, TABLE) == 0


def test_long_digit_runs_inside_strings_and_moderate_nesting_are_fine(moto_ddb: Any, load_function: Any) -> None:
    likes = load_function("LikesFunction", TABLE)
    status, answer = invoke(likes, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "1" * 3990 + '[{"\\"'}))
    assert status == 201, answer


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/JSON", "Application/Json; charset=UTF-8", "application/vnd.api+json", "application/problem+JSON"],
)
def test_json_media_types_are_case_insensitive_and_plus_json_is_json(moto_ddb: Any, load_function: Any, content_type: str) -> None:
    likes = load_function("LikesFunction", TABLE)
    event = api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "x"}, headers={"Content-Type": content_type})
    status, answer = invoke(likes, event)
    assert status == 201, answer
    ledger = load_function("LedgerFunction", TABLE)
    event = api_event("POST", "/ledgers/alice/entries", {"amount": 3}, headers={"Content-Type": content_type, "Idempotency-Key": new_key()})
    status, answer = invoke(ledger, event)
    assert status == 201, answer


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/jsonx"])
def test_other_media_types_are_still_415(moto_ddb: Any, load_function: Any, content_type: str) -> None:
    likes = load_function("LikesFunction", TABLE)
    event = api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "x"}, headers={"Content-Type": content_type})
    status, answer = invoke(likes, event)
    assert (status, answer["error"]) == (415, "unsupported_media_type")
    assert item_count(moto_ddb, TABLE) == 0
