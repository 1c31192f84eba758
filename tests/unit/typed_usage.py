"""What a caller of the public services gets, as mypy sees it (checked by
tests/unit/test_typed_results.py with `mypy --strict`; never run). Each result is a typed object,
so its fields have the types the API documents, with no narrowing from `JSONValue`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_type

from counters import Ledgers, Likes, Orders, Reservations
from counters.deferral.operations import Operations
from counters.primitives import sharding
from counters.primitives.approaches import Approach, TakeFacts
from counters.primitives.ledger import Ledger
from counters.primitives.pointer import Pointer
from counters.primitives.refcount import RefCount
from counters.primitives.sequence import Sequence
from counters.services.likes.model import LikeState, PublicLiker, PublicPost
from counters.services.orders import PublicOrder
from counters.services.reservations import PublicReservation, PublicResource, RegionShare, ReservationDetails, Transferred
from counters.store.resources_records import Record


def likes(service: Likes) -> None:
    post, created = service.posts.create_post(author_id="alice", body="hello", idempotency_key="k")
    assert_type(post, PublicPost)
    assert_type(created, bool)
    assert_type(post["postId"], str)
    assert_type(post["likeTally"], int)
    assert_type(post.get("asOf"), int | None)  # a hot post's only
    assert_type(service.posts.get_post(post["postId"])["mode"], str)
    switched, changed = service.posts.switch_mode(post["postId"], "hot")
    assert_type(switched["modeEpoch"], int)
    assert_type(service.posts.like_state(post["postId"], "bob"), LikeState)
    assert_type(service.posts.like_state(post["postId"], "bob")["liked"], bool)
    page = service.posts.likers(post["postId"], limit=10)
    assert_type(page.user_ids, list[PublicLiker])
    assert_type(page.user_ids[0]["userId"], str)
    assert_type(service.toggling.like(post["postId"], "bob").liked, bool)


def reservations(service: Reservations) -> None:
    resource = service.create_resource("r1", capacity=10, strategy="atomic")
    assert_type(resource, PublicResource)
    assert_type(service.get_resource("r1")["available"], int)
    regions = service.get_resource("r1").get("regions", {})
    assert_type(regions, dict[str, RegionShare])
    taken = service.reserve("r1", 2, "key-1")
    assert_type(taken.body, PublicReservation)
    assert_type(taken.body["reservationId"], str)
    assert_type(service.release("r1", taken.body["reservationId"]).body, PublicReservation)
    details = service.get_reservation("r1", taken.body["reservationId"])
    assert_type(details, ReservationDetails)
    assert_type(details.get("releasedAt"), int | None)
    sent = service.escrow.transfer("r1", "eu-west-1", 1, "t-1")
    assert_type(sent.body, Transferred)
    assert_type(sent.body["from"], str)
    assert_type(service.escrow.receive("r1"), int)


def orders(service: Orders) -> None:
    placed = service.place(key="k", customer_id="alice", items=[{"sku": "a", "quantity": 1}])
    assert_type(placed.order, PublicOrder)
    assert_type(placed.order["orderId"], int)
    assert_type(service.read(placed.order["orderId"])["items"][0]["quantity"], int)


def ledgers(service: Ledgers) -> None:
    entry_id, created, _ = service.post_entry("l1", 5, "k")
    assert_type(entry_id, str)
    checkpoint = service.balance("l1").checkpoint
    if checkpoint is not None:
        assert_type(checkpoint["balance"], int)
        assert_type(checkpoint["mergedThrough"], str | None)


def operations(service: Operations) -> None:
    operation = service.read("op-1")
    if operation is not None:
        assert_type(operation["status"], str)
        assert_type(operation["createdAt"], int)


def primitives(approach: Approach, pointer: Pointer, sequence: Sequence, ledger: Ledger, refcount: RefCount) -> None:
    """Where a primitive documents its ``Result.value``, mypy sees that type (issue 25 item 5)."""
    taken = approach.apply({"PK": "RES#r", "SK": "META"}, 1, token="t")
    assert_type(taken.value, TakeFacts)
    assert_type(taken.value.allocation, Mapping[str, int] | None)
    assert_type(taken.value.marker, Record | None)
    assert_type(taken.value.available, int | None)
    split = sharding.take(approach, [sharding.shard_key("r", 0)], 1, token="t")
    assert_type(split.value, TakeFacts)
    assert_type(pointer.advance(5).value, int | None)
    assert_type(sequence.next().value, int | None)
    assert_type(ledger.append("l1", 5, "k").value, str)
    assert_type(refcount.link({"PK": "P", "SK": "META"}, {"PK": "P", "SK": "C"}).value, Mapping[str, Any] | None)
