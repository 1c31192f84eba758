"""A stranger's likers cursors on a grown post, through the HTTP handler (docs/likes.md "The likers
cursor", "A spread that grows").

A cursor may name a lane added by a growth (8 -> 16 -> 32 -> 64): the listing checks such a lane
against the spread it reads then. These tests hold that the check refuses what it must: a lane beyond
the spread read now (also when it is signed with the deployment's key: only the key's holder could
make one, so the bound, not the tag, is what is tested), a cursor signed for another grown post,
one re-signed with a guessed key, a new lane's cursor replayed on a post that never grew. Each is
``400 invalid_cursor`` with one message whatever was wrong, and writes nothing (a full scan of the
table before and after). A genuine cursor into a lane >= 8 still works after the post grows again.

Against DynamoDB Local, with the real LikesFunction handler (its process keeps each post's spread
cached, as a warm Lambda does). No aggregator: listing reads like items, not the tally.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from counters.services.likes.cursor import cursor_key, encode_cursor
from counters.store.post_items import FIRST_SPREAD, MAX_SPREAD
from tests.conftest import api_event, invoke
from tests.integration.test_spread_reads import users_in

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
SECRET = "the-deployment-secret"  # the app's CURSOR_SECRET (the template sets it to the stack id)
REFUSED = (400, {"error": "invalid_cursor", "message": "cursor is not valid"})


@pytest.fixture
def app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST, cursor_secret=SECRET))


def scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    """Every item of the table, strongly consistent, in a stable order."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def lane_of_cursor(cursor: str) -> int:
    body = cursor.split(".")[0]
    lane: int = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))[0]
    return lane


def page(app: Any, post: str, limit: int, cursor: str | None = None) -> tuple[list[str], str | None]:
    """One page of likers over HTTP: (user ids, next cursor)."""
    status, body = invoke(app, api_event("GET", f"/posts/{post}/likes?limit={limit}" + (f"&cursor={cursor}" if cursor else "")))
    assert status == 200, body
    return [liker["userId"] for liker in body["likers"]], body["cursor"]


def list_all(app: Any, post: str, limit: int, cursor: str | None = None) -> list[str]:
    listed: list[str] = []
    while True:
        users, cursor = page(app, post, limit, cursor)
        listed.extend(users)
        if cursor is None:
            return listed


def hot_post(likes: Likes, post: str, spread: int, users: list[str]) -> None:
    """A hot post grown 8 -> ... -> ``spread`` (one step at a time, as the writes grow it), ``users`` liking."""
    likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot")
    size = FIRST_SPREAD
    while size < spread:
        size *= 2
        assert likes.posts.grow(post, likes.posts.info(post), size).spread == size
    for user in users:
        assert likes.toggling.like(post, user).changed


def assert_refused(app: Any, ddb: Any, table: str, post: str, cursors: list[str]) -> None:
    """Every cursor is ``400 invalid_cursor`` with the one message, and the table is unchanged after each."""
    before = scan(ddb, table)
    for cursor in cursors:
        assert invoke(app, api_event("GET", f"/posts/{post}/likes?limit=2&cursor={cursor}")) == REFUSED, cursor
        assert scan(ddb, table) == before, cursor


def test_forged_and_tampered_cursors_on_a_post_grown_to_16_are_refused_and_write_nothing(
    app: Any, table: str, ddb: Any, layer_client: Any
) -> None:
    likes = Likes(table, retry=FAST)
    hot_post(likes, "p1", 16, users_in(range(8, 16), 16, 6, "c"))  # lanes 0-7 empty: the first page ends in a lane >= 8
    hot_post(likes, "p2", 16, users_in(range(8, 16), 16, 6, "d"))
    hot_post(likes, "p3", FIRST_SPREAD, users_in(range(FIRST_SPREAD), FIRST_SPREAD, 6, "e"))  # never grows
    first, genuine = page(app, "p1", 1)
    assert first and genuine is not None and lane_of_cursor(genuine) >= FIRST_SPREAD
    other, of_p2 = page(app, "p2", 1)
    assert other and of_p2 is not None and lane_of_cursor(of_p2) >= FIRST_SPREAD
    key = cursor_key(SECRET, table)
    body = genuine.split(".")[0]
    payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    _, after = json.loads(payload)

    def resigned(guess: bytes) -> str:
        return encode_cursor(guess, "p1", lane_of_cursor(genuine), after)

    assert_refused(
        app,
        ddb,
        table,
        "p1",
        [
            encode_cursor(key, "p1", 40, None),  # beyond the spread read now (16), signed with the real key
            encode_cursor(key, "p1", 16, after),  # one past the last lane
            encode_cursor(key, "p1", -1, None),
            encode_cursor(key, "p1", MAX_SPREAD, None),
            b64(json.dumps([True, None]).encode()) + "." + genuine.split(".")[1],  # not an int, the genuine tag
            b64(json.dumps([40, after]).encode()) + "." + genuine.split(".")[1],  # the lane tampered, the genuine tag
            of_p2,  # signed for another grown post
            encode_cursor(key, "p2", lane_of_cursor(genuine), after),
            resigned(cursor_key("", table)),  # the key of a deployment without a secret (derived from the table name)
            resigned(cursor_key("guess", table)),
            resigned(b"\0" * 32),
            resigned(SECRET.encode()),  # the secret itself, not the key derived from it
        ],
    )
    assert_refused(
        app,
        ddb,
        table,
        "p3",
        [
            genuine,  # p1's cursor into a new lane, replayed on a post that never grew
            encode_cursor(key, "p3", lane_of_cursor(genuine), None),  # a new lane signed for p3: it has no such lane
            encode_cursor(key, "p3", 2 * FIRST_SPREAD - 1, None),
        ],
    )
    assert sorted(first + list_all(app, "p1", 1, genuine)) == sorted(users_in(range(8, 16), 16, 6, "c"))  # still works


def test_forged_lanes_on_a_post_grown_to_64_are_refused_and_its_last_lane_listed(app: Any, table: str, ddb: Any, layer_client: Any) -> None:
    likes = Likes(table, retry=FAST)
    last = users_in(range(MAX_SPREAD - 1, MAX_SPREAD), MAX_SPREAD, 2, "z")  # both in lane 63
    hot_post(likes, "p1", MAX_SPREAD, last)
    key = cursor_key(SECRET, table)
    assert_refused(
        app,
        ddb,
        table,
        "p1",
        [
            encode_cursor(key, "p1", MAX_SPREAD, None),
            encode_cursor(key, "p1", 2 * MAX_SPREAD, None),
            encode_cursor(key, "p1", -1, None),
            encode_cursor(cursor_key("", table), "p1", MAX_SPREAD - 1, None),  # a guessed key
        ],
    )
    users, cursor = page(app, "p1", 1, encode_cursor(key, "p1", MAX_SPREAD - 1, None))
    assert users == sorted(last)[:1] and cursor is not None and lane_of_cursor(cursor) == MAX_SPREAD - 1
    assert list_all(app, "p1", 1, cursor) == sorted(last)[1:]


def test_a_genuine_cursor_into_a_lane_past_8_still_works_after_the_post_grows_again(
    app: Any, load_function: Any, table: str, layer_client: Any
) -> None:
    likes = Likes(table, retry=FAST)
    mid = users_in(range(8, 16), 16, 6, "m")
    hot_post(likes, "p1", 16, mid)
    first, cursor = page(app, "p1", 2)  # this process reads the spread (16) now and keeps it cached
    assert cursor is not None and lane_of_cursor(cursor) >= FIRST_SPREAD
    assert likes.posts.grow("p1", likes.posts.info("p1"), 32).spread == 32
    new = users_in(range(16, 32), 32, 6, "n")
    for user in new:
        assert likes.toggling.like("p1", user).changed
    rest = list_all(app, "p1", 2, cursor)
    assert sorted(first + rest) == sorted(mid + new) and len(first + rest) == len(mid) + len(new)
    assert likes.posts.grow("p1", likes.posts.info("p1"), 64).spread == 64  # and once more, listed by a fresh process
    fresh = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST, cursor_secret=SECRET))
    assert sorted(first + list_all(fresh, "p1", 2, cursor)) == sorted(mid + new)
