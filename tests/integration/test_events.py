"""Every sample event in events/ is valid for its handler (as `sam local invoke -e` would use it)."""

from __future__ import annotations

from typing import Any

from tests.conftest import invoke, load_event

LIKES_SEQUENCE = [
    ("likes/create_post.json", 201),
    ("likes/get_post.json", 200),
    ("likes/like.json", 200),
    ("likes/list_likers.json", 200),
    ("likes/audit.json", 200),
    ("likes/unlike.json", 200),
]


def test_likes_events_run_in_order(load_function: Any, table: str, layer_client: Any) -> None:
    app = load_function("LikesFunction", table)
    answers = {}
    for name, expected in LIKES_SEQUENCE:
        status, body = invoke(app, load_event(name))
        assert status == expected, (name, body)
        answers[name] = body
    assert answers["likes/like.json"]["changed"] is True
    assert answers["likes/list_likers.json"]["likers"][0]["userId"] == "u1"
    assert answers["likes/audit.json"]["drift"] == 0
    assert answers["likes/unlike.json"]["changed"] is True
