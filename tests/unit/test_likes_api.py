"""The likes handler in-process on moto: routing, validation, error shapes (no network).

moto is only trusted here for request/response shapes; idempotency and concurrency are
proven against DynamoDB Local in tests/integration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from tests.conftest import api_event, invoke, item_count, load_event


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch, load_function: Any) -> Iterator[Any]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    from counters.core import client as dynamo

    with mock_aws():
        dynamo.reset_client()
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb, read_stack("tally-unit"))
        module = load_function("LikesFunction", "tally-unit")
        module.ddb = ddb
        yield module
        dynamo.reset_client()


BAD_REQUESTS = [
    ("POST", "/posts", "{not json", "invalid_json"),
    ("POST", "/posts", None, "validation_error"),
    ("POST", "/posts", {"authorId": "a", "body": "x", "unknown": 1}, "validation_error"),
    ("POST", "/posts", {"authorId": 7, "body": "x"}, "validation_error"),
    ("POST", "/posts", {"authorId": "a", "body": ""}, "validation_error"),
    ("POST", "/posts", {"authorId": "a", "body": "x" * 4001}, "validation_error"),
    ("POST", "/posts", {"postId": "x" * 65, "authorId": "a", "body": "x"}, "validation_error"),
    ("POST", "/posts", {"postId": "has space", "authorId": "a", "body": "x"}, "validation_error"),
    ("POST", "/posts", {"postId": "POST#x", "authorId": "a", "body": "x"}, "validation_error"),
    ("POST", "/posts", [1, 2], "validation_error"),
    ("PUT", "/posts/p1/likes/" + "u" * 65, None, "validation_error"),
    ("PUT", "/posts/p%231/likes/u1", None, "validation_error"),
    ("GET", "/posts/p1/likes?limit=101", None, "validation_error"),
    ("GET", "/posts/p1/likes?limit=-1", None, "validation_error"),
    ("GET", "/posts/p1/likes?limit=x", None, "validation_error"),
    ("GET", "/posts/p1/likes?cursor=" + "c" * 1025, None, "validation_error"),
]


@pytest.mark.parametrize(("method", "path", "body", "code"), BAD_REQUESTS)
def test_bad_input_is_400_with_a_json_error_and_writes_nothing(app: Any, method: str, path: str, body: Any, code: str) -> None:
    before = item_count(app.ddb, "tally-unit")
    status, answer = invoke(app, api_event(method, path, body))
    assert status == 400
    assert answer["error"] == code and answer["message"]
    assert set(answer) == {"error", "message"}
    assert item_count(app.ddb, "tally-unit") == before


def test_round_trip_and_not_found_shapes(app: Any) -> None:
    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "x"}))[0] == 201
    assert invoke(app, api_event("GET", "/posts/p1"))[1]["likeTally"] == 0
    status, body = invoke(app, api_event("GET", "/posts/p2"))
    assert (status, body["error"]) == (404, "not_found")


def test_unexpected_errors_are_500_without_internals(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(app.function.service.posts, "get_post", boom)
    status, body = invoke(app, api_event("GET", "/posts/p1"))
    assert status == 500
    assert body == {"error": "internal_error", "message": "internal error; the request may be retried"}


def test_sample_events_route_to_handlers(app: Any) -> None:
    status, body = invoke(app, load_event("likes/create_post.json"))
    assert status == 201 and body["postId"] == "p1"
    assert invoke(app, load_event("likes/get_post.json"))[0] == 200


def test_non_json_media_types_are_415_and_write_nothing(app: Any) -> None:
    for content_type in ("text/plain", "multipart/form-data", "application/x-www-form-urlencoded"):
        event = api_event("POST", "/posts", {"authorId": "a", "body": "x"})
        event["headers"]["Content-Type"] = content_type
        assert invoke(app, event) == (415, {"error": "unsupported_media_type", "message": "send the body as application/json"})
    assert item_count(app.ddb, "tally-unit") == 0


def test_undecodable_bodies_are_400(app: Any) -> None:
    event = api_event("POST", "/posts", b"Z\xff(Y\x1c\xfe")
    assert event["isBase64Encoded"] is True
    assert invoke(app, event)[1]["error"] == "invalid_json"


def test_an_array_holding_a_valid_object_is_refused(app: Any) -> None:
    status, body = invoke(app, api_event("POST", "/posts", [{"authorId": "a", "body": "x"}]))
    assert (status, body["error"]) == (400, "validation_error")
    assert item_count(app.ddb, "tally-unit") == 0


def test_oversized_bodies_are_413_before_parsing(app: Any) -> None:
    from counters.http.resolver import MAX_BODY_BYTES

    big = {"authorId": "a", "body": "x", "padding": "é" * (MAX_BODY_BYTES // 2)}  # 2 bytes a character
    status, body = invoke(app, api_event("POST", "/posts", big))
    assert (status, body["error"]) == (413, "payload_too_large")
    assert item_count(app.ddb, "tally-unit") == 0
    largest_post = {"authorId": "a", "body": "\u2603" * 4000}  # 4,000 three-byte characters, escaped as \\uXXXX
    assert invoke(app, api_event("POST", "/posts", largest_post))[0] == 201


def test_a_response_that_breaks_its_model_is_a_500_not_a_4xx(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        app.function.service.posts, "get_post", lambda post_id: {"postId": post_id, "likeTally": "many"}
    )  # a bug in the layer
    status, body = invoke(app, api_event("GET", "/posts/p1"))
    assert (status, body) == (500, {"error": "internal_error", "message": "internal error; the request may be retried"})


def test_a_deferred_request_is_counted_as_the_deferred_metric(
    app: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every 202 adds 1 to ``Deferred`` (the dashboard's 202s), in the EMF blob of its invocation."""
    import json

    from counters.core.commands import Command
    from counters.core.errors import ContentionError

    command = Command("like", {"postId": "p1", "userId": "u1"})

    class Queue:
        def defer(self, cmd: Command, *, owner: str | None = None) -> Command:
            return cmd

    def contended(*_: Any, **__: Any) -> Any:
        raise ContentionError(command=command)

    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "x"}))[0] == 201
    monkeypatch.setattr(app.function, "_make_deferrer", lambda _settings: Queue())
    monkeypatch.setattr(app.function, "_deferrer", None)
    monkeypatch.setattr(app.function.service.toggling, "like", contended)
    capsys.readouterr()
    status, body = invoke(app, api_event("PUT", "/posts/p1/likes/u1"))
    assert (status, body["operationId"]) == (202, command.operation_id)
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [b["Deferred"] for b in blobs if "Deferred" in b] == [[1.0]], blobs


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _flip_padding_bits(part: str) -> str:
    """The same bytes, another spelling: the last character's bits below the data it carries changed
    (16 bytes end with 2 data bits and 4 spare ones; the payload's length decides its own)."""
    spare = {2: 4, 3: 2}.get(len(part) % 4, 0)  # bits of the last character that carry no data
    assert spare, part
    index = B64URL.index(part[-1])
    return part[:-1] + B64URL[index ^ 1]


def test_a_cursor_spelled_with_other_padding_bits_is_400_invalid_cursor(app: Any) -> None:
    """A cursor is accepted only as the listing spelled it: base64url decoding ignores a last
    character's spare bits (and characters outside the alphabet), so the cursor is re-encoded and
    compared (docs/likes.md: anything else is 400)."""
    assert invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "x"}))[0] == 201
    for user in ("u1", "u2", "u3"):
        assert invoke(app, api_event("PUT", f"/posts/p1/likes/{user}"))[0] == 200
    status, page = invoke(app, api_event("GET", "/posts/p1/likes?limit=1"))
    assert status == 200 and page["cursor"], page
    body, tag = page["cursor"].split(".")
    assert invoke(app, api_event("GET", f"/posts/p1/likes?limit=1&cursor={body}.{tag}"))[0] == 200
    forged = [f"{body}.{_flip_padding_bits(tag)}", f"{body}.{tag}!", f"{body}.{tag}="]
    if {2: 4, 3: 2}.get(len(body) % 4):
        forged.append(f"{_flip_padding_bits(body)}.{tag}")
    for cursor in forged:
        status, answer = invoke(app, api_event("GET", f"/posts/p1/likes?limit=1&cursor={cursor}"))
        assert (status, answer.get("error")) == (400, "invalid_cursor"), (cursor, answer)
