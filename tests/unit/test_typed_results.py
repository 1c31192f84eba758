"""The services' typed results (issue 27 item 2): what mypy sees of them, and the one place that
turns them into JSON for the HTTP answers and the stored operation results."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from counters.core.json import json_object
from counters.services.likes.model import public_post
from counters.store.post_items import Post

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_service_returns_typed_results() -> None:
    """`mypy --strict` (the project's settings) over tests/unit/typed_usage.py: each public
    method's result has the field types the API documents (`assert_type`)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(ROOT / "tests" / "unit" / "typed_usage.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_json_object_is_the_typed_result_itself() -> None:
    """No copy, no reordering: the JSON is the result's own keys in their order (the answers stay
    byte-for-byte what they were when the services returned dicts)."""
    post = public_post(Post(post_id="p1", author_id="alice", body="hi", tally=2, created_at=1, mode="hot", stored_epoch=1))
    assert json_object(post) is post
    assert json.dumps(json_object(post)) == (
        '{"postId": "p1", "authorId": "alice", "body": "hi", "likeTally": 2, "createdAt": 1, '
        '"mode": "hot", "modeEpoch": 1, "asOf": null, "lagMs": null}'
    )


@pytest.mark.parametrize(
    "value",
    [Decimal("1.5"), b"bytes", {"a"}, ("a", 1), [Decimal(1)], {"nested": {"n": Decimal(2)}}, {1: "int key"}, object()],
    ids=["decimal", "bytes", "set", "tuple", "in-a-list", "nested", "int-key", "object"],
)
def test_json_object_refuses_a_value_that_is_not_json(value: object) -> None:
    """A result holding what DynamoDB reads (a Decimal, bytes, a set) unconverted is a bug to
    report, not an answer to send."""
    with pytest.raises(TypeError, match="not a JSON object"):
        json_object({"postId": "p1", "field": value})


def test_json_object_refuses_a_key_that_is_not_a_string() -> None:
    with pytest.raises(TypeError, match="values that are not JSON: 1"):
        json_object({"postId": "p1", 1: "an int key"})  # type: ignore[dict-item]
