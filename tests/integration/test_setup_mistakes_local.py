"""A table of another layout on DynamoDB Local, met as a library user meets it (docs/layer.md's
quickstart calls): each answer is a `TableLayoutMismatch` naming the table and the fix, not
botocore's ValidationException (tests/unit/test_setup_mistakes.py has the rest)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters import Likes
from counters.core.configuration import LAMBDA_ENV
from counters.core.errors import TableLayoutMismatch
from counters.core.failures import RetryPolicy

FAST = RetryPolicy(max_attempts=2, sleep=lambda _s: None)


@pytest.fixture
def make_table(ddb: Any, layer_client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv(LAMBDA_ENV, raising=False)  # a user's script
    made: list[str] = []

    def make(keys: list[tuple[str, str, str]]) -> str:
        name = f"layout-{uuid.uuid4().hex[:8]}"
        ddb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t, _ in keys],
            KeySchema=[{"AttributeName": n, "KeyType": k} for n, _, k in keys],
        )
        made.append(name)
        return name

    yield make
    for name in made:
        ddb.delete_table(TableName=name)


@pytest.mark.parametrize(
    "keys",
    [
        [("id", "S", "HASH")],  # another key schema: "One of the required keys was not given a value"
        [("PK", "S", "HASH")],  # PK only: "The number of conditions on the keys is invalid" (AWS: "...does not match the schema")
        [("PK", "N", "HASH"), ("SK", "S", "RANGE")],  # a key of another type: "Type mismatch for key"
    ],
)
def test_a_table_with_another_key_names_the_key_the_layer_writes(make_table: Any, keys: list[tuple[str, str, str]]) -> None:
    table = make_table(keys)
    likes = Likes(table, retry=FAST)
    with pytest.raises(TableLayoutMismatch) as raised:
        post, _ = likes.posts.create_post(author_id="alice", body="hello", idempotency_key="k1")
        likes.posts.get_post(post["postId"])
    assert f"'{table}'" in raised.value.message
    assert "PK (string, HASH) and SK (string, RANGE)" in raised.value.message and "TABLE_NAME" in raised.value.message


def test_a_counter_stored_as_a_string_names_the_item(make_table: Any, ddb: Any) -> None:
    table = make_table([("PK", "S", "HASH"), ("SK", "S", "RANGE")])
    likes = Likes(table, retry=FAST)
    post, _ = likes.posts.create_post(author_id="alice", body="hello", post_id="s1")
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": "POST#s1"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :s",
        ExpressionAttributeValues={":s": {"S": "0"}},
    )
    with pytest.raises(TableLayoutMismatch) as raised:
        likes.toggling.like(post["postId"], "bob")
    assert "is not a number" in raised.value.message and "PK='POST#s1' SK='META'" in raised.value.message
