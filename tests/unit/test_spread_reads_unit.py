"""The reads of a grown post, without network: PostStore.liking (one strongly consistent
BatchGetItem for a grown post's likers page) and the audit's count as stored (``Audits._count``).

DynamoDB may answer a BatchGetItem with some keys in ``UnprocessedKeys`` (throttling, or a 16 MB
answer): those are sent again, and keys still left after the retry budget are a 503 (ContentionError),
never silently taken as "no item" (which would list a duplicate).
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity
from counters.store.posts import PostStore

NO_WAIT = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, sleep=lambda _: None)


def key(lane: int, user: str) -> dict[str, str]:
    return {"PK": f"POST#p1#S{lane}", "SK": f"LIKE#USER#{user}"}


def item(lane: int, user: str, liked: bool | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"PK": {"S": f"POST#p1#S{lane}"}, "SK": {"S": f"LIKE#USER#{user}"}}
    if liked is not None:
        found["liked"] = {"BOOL": liked}
    return found


class Batches:
    """A client whose BatchGetItem answers from a script, one answer a call."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers, self.calls = answers, []  # type: list[dict[str, Any]]

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        return self.answers.pop(0)


def test_unprocessed_keys_are_sent_again_and_tombstones_do_not_count() -> None:
    left = {"t": {"Keys": [{"PK": {"S": "POST#p1#S3"}, "SK": {"S": "LIKE#USER#c"}}], "ConsistentRead": True}}
    client = Batches(
        [
            {"Responses": {"t": [item(1, "a"), item(2, "b", liked=False)]}, "UnprocessedKeys": left},
            {"Responses": {"t": [item(3, "c", liked=True)]}},
        ]
    )
    store = PostStore("t", dynamodb=client)  # type: ignore[arg-type]
    found = store.liking([key(1, "a"), key(2, "b"), key(3, "c")], NO_WAIT, Capacity())
    assert found == {("POST#p1#S1", "LIKE#USER#a"), ("POST#p1#S3", "LIKE#USER#c")}
    first, again = client.calls
    assert first["RequestItems"]["t"]["ConsistentRead"] is True and len(first["RequestItems"]["t"]["Keys"]) == 3
    assert again["RequestItems"]["t"]["Keys"] == left["t"]["Keys"] and again["RequestItems"]["t"]["ConsistentRead"] is True


def test_keys_still_unprocessed_after_the_budget_are_a_503_not_an_absence() -> None:
    left = {"t": {"Keys": [{"PK": {"S": "POST#p1#S3"}, "SK": {"S": "LIKE#USER#c"}}], "ConsistentRead": True}}
    client = Batches([{"Responses": {"t": []}, "UnprocessedKeys": left} for _ in range(NO_WAIT.max_attempts)])
    store = PostStore("t", dynamodb=client)  # type: ignore[arg-type]
    with pytest.raises(ContentionError):
        store.liking([key(3, "c")], NO_WAIT, Capacity())
    assert len(client.calls) == NO_WAIT.max_attempts


def test_more_than_100_keys_take_one_call_per_100() -> None:
    client = Batches([{"Responses": {"t": []}}, {"Responses": {"t": []}}])
    store = PostStore("t", dynamodb=client)  # type: ignore[arg-type]
    assert store.liking([key(8 + n % 8, f"u{n}") for n in range(150)], NO_WAIT, Capacity()) == set()
    assert [len(call["RequestItems"]["t"]["Keys"]) for call in client.calls] == [100, 50]


class Lanes:
    """A store whose lanes hold these users (each lane's in key order, as a Query returns them)."""

    def __init__(self, lanes: dict[str, list[str]]) -> None:
        self.lanes = lanes

    def lane_users(self, pk: str, counted: Any, retry: RetryPolicy, capacity: Capacity) -> Any:
        return iter(self.lanes[pk])


def test_the_audit_counts_items_as_stored_and_a_user_in_three_lanes_is_one_duplicate() -> None:
    from counters.services.likes.audit import Audits

    store = Lanes({"S0": ["a", "c", "e"], "S8": ["b", "c"], "S16": ["c", "d"], "S24": ["e"]})
    audits = Audits(store, None, None, retry=NO_WAIT)  # type: ignore[arg-type]
    assert audits._count(["S0", "S8", "S16", "S24"], Capacity()) == (8, 2)  # c in three lanes, e in two
    assert audits._count(["S8"], Capacity()) == (2, 0)
