"""The quickstart's table on DynamoDB Local (created as docs/layer.md does: PK/SK, no stream, so no
consumer can ever read it): a hot post is refused at once with the fix, where it used to accept
every like and leave ``likeTally`` at 0 (docs/layer.md "What needs a stream consumer")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters import Likes
from counters.core.errors import StreamConsumerMissing
from counters.core.settings import STREAM_CONSUMERS_ENV
from tests.conftest import item_count


@pytest.fixture
def quickstart_table(ddb: Any, layer_client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv(STREAM_CONSUMERS_ENV, raising=False)  # a user's script: nothing declared
    name = f"quickstart-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
    )
    yield name
    ddb.delete_table(TableName=name)


def test_a_library_hot_post_is_refused_with_the_fix_and_a_standard_one_counts(ddb: Any, quickstart_table: str) -> None:
    likes = Likes(quickstart_table)
    with pytest.raises(StreamConsumerMissing) as raised:
        likes.posts.create_post(author_id="alice", body="hello", mode="hot", idempotency_key="hot-1")
    assert "LikeAggregatorFunction" in raised.value.message and "stream_consumers=True" in raised.value.message
    assert item_count(ddb, quickstart_table) == 0  # refused before anything was written
    post, _ = likes.posts.create_post(author_id="alice", body="hello", idempotency_key="standard-1")
    for user in ("bob", "carol"):
        likes.toggling.like(post["postId"], user)
    assert likes.posts.get_post(post["postId"])["likeTally"] == 2  # standard: counted in the like's own transaction
