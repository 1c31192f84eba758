"""Creations across Regions (issue 25, item 4) on the multi-Region emulator, in process.

On MREC a conditional create sees only its own replica and last-writer-wins keeps one whole item,
so two Regions creating one id within the replication lag used to both succeed and one creation
vanished (a post, a resource; an oversell through the replaced shares; a transfer record two
Regions wrote under one id). Now a post's and a resource's id is created only in its home Region
(409 ``wrong_region`` naming it elsewhere, nothing written) and a transfer's id names its source
Region (docs/regions.md "Creations"). On MRSC the conditional create sees every Region.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.errors import AlreadyExists, InsufficientCapacity, WrongRegion
from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode, Topology, home_of
from counters.services.likes import Likes
from counters.services.reservations import Reservations
from testkit.regions import Delays, GlobalTable, Mode

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.01)
A, B, C = "eu-west-1", "us-east-1", "us-west-2"


@pytest.fixture
def mrec(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    gt = GlobalTable(dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", (A, B), Mode.MREC, 11, Delays.fixed(0.5)).create()
    yield gt
    gt.delete()


@pytest.fixture
def mrsc(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    gt = GlobalTable(dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", (A, B, C), Mode.MRSC, 11).create()
    yield gt
    gt.delete()


def topology(gt: GlobalTable, region: str) -> Topology:
    mode = GlobalTableMode.MRSC if gt.mode is Mode.MRSC else GlobalTableMode.MREC
    return Topology(mode, region, tuple(sorted(gt.regions)))


def likes(gt: GlobalTable) -> dict[str, Likes]:
    return {r: Likes(gt.table_name, dynamodb=gt.client(r), retry=FAST, topology=topology(gt, r)) for r in gt.regions}


def reservations(gt: GlobalTable) -> dict[str, Reservations]:
    return {r: Reservations(gt.table_name, dynamodb=gt.client(r), retry=FAST, topology=topology(gt, r)) for r in gt.regions}


def homed(region: str, prefix: str, regions: tuple[str, ...] = (A, B)) -> str:
    """An id whose home Region is ``region``."""
    return next(f"{prefix}{n}" for n in itertools.count() if home_of(f"{prefix}{n}", regions) == region)


def keys_of(gt: GlobalTable, region: str, pk_prefix: str) -> list[dict[str, Any]]:
    return [i for i in gt.items(region) if str(i["PK"]).startswith(pk_prefix)]


# ------------------------------------------------------------------------------- 1. posts
@pytest.mark.parametrize("first", [A, B], ids=["home-first", "other-first"])
def test_a_post_created_with_one_id_in_two_regions_at_once_is_created_once(mrec: GlobalTable, first: str) -> None:
    """The issue's finding: alice and bob create ``postId`` sq1 in two Regions within the lag; both
    201, and after convergence one author is gone. Now the Region that is not the id's home
    refuses (409 ``wrong_region`` naming it) before writing anything, and the one post stays."""
    services = likes(mrec)
    post_id = "sq1"
    home = home_of(post_id, (A, B))
    other = B if home == A else A
    users = {home: "alice", other: "bob"}
    answers: dict[str, object] = {}
    for region in (first, B if first == A else A):  # no replication in between: "at once"
        try:
            answers[region] = services[region].posts.create_post(author_id=users[region], body=users[region], post_id=post_id)[1]
        except WrongRegion as refused:
            answers[region] = refused
        mrec.pump()
    assert answers[home] is True
    refused = answers[other]
    assert isinstance(refused, WrongRegion) and refused.region == home and refused.status == 409
    assert refused.details() == {"region": home}
    assert keys_of(mrec, other, f"POST#{post_id}") == []  # the refusal wrote nothing
    mrec.settle()
    assert mrec.converged()
    for region in (A, B):
        assert services[region].posts.get_post(post_id)["authorId"] == "alice"


def test_a_post_id_derived_from_a_key_is_created_in_its_home_only(mrec: GlobalTable) -> None:
    """An Idempotency-Key's post id is a shared identity too: the same author and key sent to both
    Regions at once (with different bodies: one would vanish) is created in one Region only."""
    services = likes(mrec)
    answers = {}
    for region in (A, B):
        try:
            answers[region] = services[region].posts.create_post(author_id="carol", body=region, idempotency_key="k-1")
        except WrongRegion as refused:
            answers[region] = refused
    created = [r for r, a in answers.items() if not isinstance(a, WrongRegion)]
    assert len(created) == 1
    mrec.settle()
    post = answers[created[0]]
    assert not isinstance(post, WrongRegion)
    for region in (A, B):
        assert services[region].posts.get_post(str(post[0]["postId"]))["body"] == created[0]


def test_a_post_without_an_id_is_created_in_any_region(mrec: GlobalTable) -> None:
    """Ids the service draws are drawn with this Region as home: no request without an id is refused."""
    services = likes(mrec)
    for region in (A, B):
        for _ in range(6):
            post, created = services[region].posts.create_post(author_id="dan", body="b")
            assert created and home_of(str(post["postId"]), (A, B)) == region


def test_mrsc_conditional_creates_see_every_region(mrsc: GlobalTable) -> None:
    """MRSC: no home Region is needed, the second creation of one id (any Region) is 409 already_exists."""
    services = likes(mrsc)
    assert services[A].posts.create_post(author_id="alice", body="a", post_id="sq1", mode="hot")[1]
    with pytest.raises(AlreadyExists):
        services[B].posts.create_post(author_id="bob", body="b", post_id="sq1", mode="hot")
    res = reservations(mrsc)
    res[B].create_resource("r1", capacity=10, strategy="set")
    with pytest.raises(AlreadyExists):
        res[C].create_resource("r1", capacity=40, strategy="atomic")
    assert res[A].get_resource("r1")["capacity"] == 10


# ------------------------------------------------------------------------------- 2. resources
@pytest.mark.parametrize("home", [A, B])
def test_a_resource_created_with_one_id_in_two_regions_at_once_is_created_once(mrec: GlobalTable, home: str) -> None:
    """Two admins create one ``resourceId`` (10, crt) and (40, set) in two Regions at once: both
    were 201 and one resource replaced the other. Now only the id's home creates it."""
    services = reservations(mrec)
    rid = homed(home, "res-")
    other = B if home == A else A
    with pytest.raises(WrongRegion) as refused:
        services[other].create_resource(rid, capacity=40, strategy="set")
    assert refused.value.region == home
    mrec.pump()
    assert keys_of(mrec, other, f"RES#{rid}") == []
    services[home].create_resource(rid, capacity=10, strategy="crt")
    mrec.settle()
    for region in (A, B):
        view = services[region].get_resource(rid)
        assert (view["capacity"], view["strategy"], view["reserved"]) == (10, "crt", 0)


# ------------------------------------------------------------------------------- 3. oversell
def test_a_conflicting_create_cannot_replace_the_share_a_reservation_was_taken_from(mrec: GlobalTable) -> None:
    """The issue's oversell: A creates ``ov`` (10), alice takes 4; within the lag B creates ``ov``
    (40); the converged A share used to read capacity 20, reserved 0, and 20 more were granted (24
    CONFIRMED against 20). Now B's creation is refused and nothing can take more than 10."""
    services = reservations(mrec)
    rid = "ov"
    assert home_of(rid, (A, B)) == A
    services[A].create_resource(rid, capacity=10, strategy="crt")
    mrec.pump()
    assert services[A].reserve(rid, 4, "alice").created
    mrec.pump()
    with pytest.raises(WrongRegion):
        services[B].create_resource(rid, capacity=40, strategy="crt")
    mrec.settle()
    confirmed = 4
    for region in (A, B):
        for n in range(20):
            try:
                services[region].reserve(rid, 1, f"{region}-{n}")
                confirmed += 1
            except InsufficientCapacity:
                break
    mrec.settle()
    assert confirmed == 10
    for region in (A, B):
        view = services[region].get_resource(rid)
        assert (view["capacity"], view["reserved"], view["available"]) == (10, 10, 0), view
        held = [i for i in keys_of(mrec, region, "RSV#") if i["status"] == "CONFIRMED"]
        assert sum(int(i["quantity"]) for i in held) == 10


# ------------------------------------------------------------------------------- 4. transfers
def test_one_transfer_key_sent_in_two_regions_at_once_is_two_transfers(mrec: GlobalTable) -> None:
    """The same Idempotency-Key in both Regions at once (A->B 2, B->A 3): both were 201 with one
    transferId, last-writer-wins kept one record and the other debit was never credited. The id
    now names its source Region: two transfers, each credited once, capacity conserved."""
    services = reservations(mrec)
    rid = homed(A, "t-")
    services[A].create_resource(rid, capacity=10, strategy="set", shares={A: 5, B: 5})
    mrec.settle()
    to_b = services[A].escrow.transfer(rid, B, 2, "same-key")
    to_a = services[B].escrow.transfer(rid, A, 3, "same-key")
    assert to_b.created and to_a.created
    assert to_b.body["transferId"] != to_a.body["transferId"]
    assert services[A].escrow.transfer(rid, B, 2, "same-key").body == to_b.body  # a re-send in its Region: the same transfer
    mrec.settle()
    assert services[A].escrow.receive_transfers(rid) == 3
    assert services[B].escrow.receive_transfers(rid) == 2
    mrec.settle()
    for region in (A, B):
        view = services[region].get_resource(rid)
        shares = {r: s["capacity"] for r, s in view["regions"].items()}
        assert shares == {A: 6, B: 4} and view["inFlight"] == 0, view


# ------------------------------------------------------------------------------- the proof's rows
def test_the_creations_proof_holds_on_a_few_schedules(dynamodb_endpoint: str) -> None:
    """proof/regions/creations.py, two schedules per row: no acknowledged creation vanishes, no
    oversell, no debit lost, in either mode."""
    from proof.regions.creations import scenarios

    reports = scenarios(dynamodb_endpoint, seed=3, schedules=10)
    assert len(reports) == 5
    assert all(r.breaches == 0 and r.over == 0 and r.under == 0 for r in reports), [(r.name, r.notes) for r in reports]
    assert all(r.verdict in ("holds", "UNDERPOWERED") for r in reports), [(r.name, r.verdict, r.notes) for r in reports]
    assert sum(r.acknowledged for r in reports) >= 10
