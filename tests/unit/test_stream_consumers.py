"""What only a stream consumer counts is refused where none was declared, never accepted and left
uncounted (docs/layer.md "What needs a stream consumer"): a hot post's likes (the like aggregator),
the latest order (the order pointer function), an MREC escrow transfer (the escrow function).

The stack declares its consumers (template.yaml's ``TALLY_STREAM_CONSUMERS``, read into every
function's settings); a library user declares them with ``stream_consumers=True``. On moto here;
tests/integration/test_stream_consumers_local.py runs the quickstart's case on DynamoDB Local.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from counters import Likes, Orders, Reservations
from counters.core.errors import ConfigurationError, CounterError, StreamConsumerMissing
from counters.core.regions import GlobalTableMode, Topology
from counters.core.settings import STREAM_CONSUMERS_ENV, Settings, stream_consumers
from counters.services.likes.model import LikeSettings
from devstack.template import read_stack
from tests.conftest import item_count, moto_table

TABLE = "tally-consumers"


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv(STREAM_CONSUMERS_ENV, raising=False)  # a user's process: nothing declared
    with moto_table(monkeypatch, TABLE) as client:
        yield client


def test_a_hot_post_is_refused_at_once_naming_what_to_run_and_nothing_is_written(ddb: Any) -> None:
    likes = Likes(TABLE)
    with pytest.raises(StreamConsumerMissing) as raised:
        likes.posts.create_post(author_id="alice", body="hello", mode="hot", idempotency_key="k1")
    error = raised.value
    assert isinstance(error, ConfigurationError) and isinstance(error, CounterError)
    assert error.code == "stream_consumer_missing"
    for named in ("LikeAggregatorFunction", "stream_consumers=True", "TALLY_STREAM_CONSUMERS=true", "mode='standard'"):
        assert named in error.message, named
    assert item_count(ddb, TABLE) == 0


def test_standard_likes_are_unaffected_and_a_switch_to_hot_is_refused(ddb: Any) -> None:
    likes = Likes(TABLE)
    post, _ = likes.posts.create_post(author_id="alice", body="hello")
    assert post["mode"] == "standard"
    likes.toggling.like(post["postId"], "bob")
    assert likes.posts.get_post(post["postId"])["likeTally"] == 1
    with pytest.raises(StreamConsumerMissing, match="may not switch to hot"):
        likes.posts.switch_mode(post["postId"], "hot")
    assert likes.posts.get_post(post["postId"])["mode"] == "standard"


def test_a_like_of_a_post_another_process_made_hot_is_refused_and_writes_nothing(ddb: Any) -> None:
    declared = Likes(TABLE, stream_consumers=True)  # e.g. the stack, which runs the aggregator
    post, _ = declared.posts.create_post(author_id="alice", body="hello", mode="hot")
    before = item_count(ddb, TABLE)
    with pytest.raises(StreamConsumerMissing, match="would never be counted"):
        Likes(TABLE).toggling.like(post["postId"], "bob")
    assert item_count(ddb, TABLE) == before
    assert declared.toggling.like(post["postId"], "bob").changed  # declared: accepted, for the aggregator to count


def test_promotion_under_pressure_needs_the_aggregator_so_it_is_refused_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STREAM_CONSUMERS_ENV, raising=False)
    with pytest.raises(StreamConsumerMissing, match="hot_after_retries=3"):
        Likes(TABLE, hot_after_retries=3)
    assert Likes(TABLE, hot_after_retries=3, stream_consumers=True).toggling.hot_after_retries == 3


def test_on_mrsc_a_post_is_hot_so_it_is_refused_with_the_reason(ddb: Any) -> None:
    mrsc = Topology(GlobalTableMode.MRSC, "us-east-1", ("us-east-1", "us-east-2", "us-west-2"))
    with pytest.raises(StreamConsumerMissing, match="on MRSC a post is hot"):
        Likes(TABLE, topology=mrsc).posts.create_post(author_id="alice", body="hello")


def test_the_latest_order_is_refused_rather_than_a_pointer_nothing_moves(ddb: Any) -> None:
    orders = Orders(TABLE)
    orders.place(key="key-1", customer_id="c1", items=[{"sku": "a", "quantity": 1}])  # placing needs no consumer
    with pytest.raises(StreamConsumerMissing, match="OrderPointerFunction"):
        orders.latest()
    assert Orders(TABLE, stream_consumers=True).latest() is None  # declared: the pointer, as it stands


def test_an_escrow_transfer_is_refused_before_anything_is_debited(ddb: Any) -> None:
    mrec = Topology(GlobalTableMode.MREC, "us-east-1", ("eu-west-1", "us-east-1"))
    Reservations(TABLE, topology=mrec, stream_consumers=True).create_resource("r1", capacity=10, strategy="marker")
    before = item_count(ddb, TABLE)
    with pytest.raises(StreamConsumerMissing, match="EscrowFunction"):
        Reservations(TABLE, topology=mrec).escrow.transfer("r1", "eu-west-1", 2, "move-1")
    assert item_count(ddb, TABLE) == before


def test_the_stack_declares_its_consumers_on_every_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """template.yaml sets the variable in Globals; each function's settings read it, and a service
    built from them accepts hot likes (the deployed stack and `make dev` run the consumers)."""
    monkeypatch.delenv(STREAM_CONSUMERS_ENV, raising=False)  # only the template's environment counts here
    stack = read_stack("t")
    for function in stack.functions.values():
        assert Settings.from_env(function.environment).stream_consumers is True, function.name
    settings = LikeSettings.from_env(stack.functions["LikesFunction"].environment)
    assert Likes.from_settings(settings).posts.stream_consumers is True


@pytest.mark.parametrize(
    ("declared", "variable", "expected"),
    [(None, None, False), (None, "true", True), (None, "0", False), (False, "true", False), (True, None, True)],
)
def test_an_argument_wins_over_the_variable_and_nothing_means_no_consumer(
    monkeypatch: pytest.MonkeyPatch, declared: bool | None, variable: str | None, expected: bool
) -> None:
    if variable is None:
        monkeypatch.delenv(STREAM_CONSUMERS_ENV, raising=False)
    else:
        monkeypatch.setenv(STREAM_CONSUMERS_ENV, variable)
    assert stream_consumers(declared) is expected


def test_on_mrsc_a_post_without_a_mode_is_hot_and_the_docs_say_so_where_users_read(ddb: Any) -> None:
    """The default mode is standard, except on MRSC (no transactions): docs/likes.md's route table and
    Global tables section, and the API contract's field description, say so."""
    from pathlib import Path

    mrsc = Topology(GlobalTableMode.MRSC, "us-east-1", ("us-east-1", "us-east-2", "us-west-2"))
    post, _ = Likes(TABLE, topology=mrsc, stream_consumers=True).posts.create_post(author_id="alice", body="hello")
    assert post["mode"] == "hot"
    docs = Path(__file__).resolve().parents[2] / "docs"
    route = next(line for line in (docs / "likes.md").read_text().splitlines() if line.startswith("| `POST /posts` "))
    assert "except on an MRSC global table, where it is `hot`" in route
    assert "A post created\n  without a `mode` on MRSC **is** hot" in (docs / "likes.md").read_text()
    assert "a post created without a `mode` is hot on MRSC" in (docs / "regions.md").read_text()
