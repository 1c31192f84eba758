"""Reservations across Regions (issue 21): MREC escrow and MRSC refusals, on DynamoDB Local.

Two Regions are two ``region_name`` s on one DynamoDB Local (tests/integration/regions_support.py);
replication is delivered explicitly where a test says, so each schedule is deterministic.
The resource ``r0`` is created in A, its home Region (on MREC an id is created only there:
docs/regions.md "Creations"; tests/integration/test_creations_regions.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.errors import IdempotencyKeyReused, InsufficientCapacity, UnsupportedInMode
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.approaches import NAMES, names
from counters.services.reservations import Reservations
from counters.store.resources_transfers import Transfer
from tests.integration.regions_support import A, B, C, Regions

MREC, MRSC = GlobalTableMode.MREC, GlobalTableMode.MRSC

APPROACHES = [pytest.param(n, 1, id=n) for n in NAMES] + [pytest.param(n, 2, id=f"{n}-2-shards") for n in names(shardable=True)]


@pytest.fixture
def regions(dynamodb_endpoint: str) -> Iterator[Regions]:
    found = Regions(dynamodb_endpoint, f"tally-regions-{uuid.uuid4().hex[:10]}")
    yield found
    found.drop()


@pytest.fixture
def mrsc(dynamodb_endpoint: str) -> Iterator[Regions]:
    found = Regions(dynamodb_endpoint, f"tally-mrsc-{uuid.uuid4().hex[:10]}", (A, B, C), MRSC)
    yield found
    found.drop()


def shares(regions: Regions, region: str, resource_id: str) -> dict[str, dict[str, int]]:
    """Every share item's capacity/reserved/available as ``region`` holds them (by PK)."""
    found = {}
    for (pk, _sk), item in regions.items(region).items():
        if pk.startswith(f"RES#{resource_id}@"):
            found[pk] = {k: int(item[k]) for k in ("capacity", "reserved", "available")}
    return found


def in_flight(regions: Regions, region: str, resource_id: str) -> int:
    items = regions.items(region)
    sent = {sk: int(i["quantity"]) for (pk, sk), i in items.items() if pk == f"RES#{resource_id}#XFER" and not sk.endswith("#IN")}
    received = {sk.removesuffix("#IN") for (pk, sk) in items if pk == f"RES#{resource_id}#XFER" and sk.endswith("#IN")}
    return sum(q for tid, q in sent.items() if tid not in received)


def conserved(regions: Regions, resource_id: str, capacity: int) -> None:
    """After settling: every share item is consistent and shares + in flight == capacity, in every Region."""
    for region in regions.regions:
        items = shares(regions, region, resource_id)
        assert all(s["reserved"] + s["available"] == s["capacity"] and s["available"] >= 0 for s in items.values()), items
        assert sum(s["capacity"] for s in items.values()) + in_flight(regions, region, resource_id) == capacity, (region, items)


def reserve_all(service: Reservations, resource_id: str, count: int, prefix: str) -> tuple[int, int]:
    ok = refused = 0
    for n in range(count):
        try:
            service.reserve(resource_id, 1, f"{prefix}-{n}")
            ok += 1
        except InsufficientCapacity:
            refused += 1
    return ok, refused


# ------------------------------------------------------------------------------- the oversell
def test_one_counter_for_every_region_oversells(regions: Regions) -> None:
    """The issue's finding on the old path (one META counter, written in both Regions): capacity
    10, 10 reservations CONFIRMED in each Region, and after replication META says 10."""
    old_a, old_b = (regions.service(r, topology=Topology()) for r in (A, B))
    old_a.create_resource("r0", capacity=10, strategy="crt")
    regions.replicate(A, B)
    assert reserve_all(old_a, "r0", 10, "a") == (10, 0)
    assert reserve_all(old_b, "r0", 10, "b") == (10, 0)
    regions.replicate(A, B, where="RSV#")
    regions.replicate(B, A)  # B's META version is the later write: it wins everywhere
    records = [i for (pk, _), i in regions.items(A).items() if pk.startswith("RSV#") and i["status"] == "CONFIRMED"]
    assert len(records) == 20
    assert int(regions.items(A)[("RES#r0", "META")]["reserved"]) == 10  # 20 held against a capacity of 10


def test_the_old_path_is_refused_on_an_mrec_table(regions: Regions) -> None:
    regions.service(A, topology=Topology()).create_resource("r0", capacity=10, strategy="crt")
    with pytest.raises(UnsupportedInMode, match="one counter for every Region"):
        regions.service(A).reserve("r0", 1, "k")


@pytest.mark.parametrize(("strategy", "shards"), APPROACHES)
def test_escrow_never_oversells(regions: Regions, strategy: str, shards: int) -> None:
    """The same schedule with escrow: each Region sells its own share (5 + 5), then answers 409."""
    a, b = regions.service(A), regions.service(B)
    created = a.create_resource("r0", capacity=10, strategy=strategy, shards=shards)
    assert created["capacity"] == 10
    regions.replicate(A, B)
    assert reserve_all(a, "r0", 10, "a") == (5, 5)
    assert reserve_all(b, "r0", 10, "b") == (5, 5)
    regions.settle()
    for region in (A, B):
        view = regions.service(region).get_resource("r0")
        assert (view["reserved"], view["available"]) == (10, 0)
        records = [i for (pk, _), i in regions.items(region).items() if pk.startswith("RSV#") and i["status"] == "CONFIRMED"]
        assert len(records) == 10
    conserved(regions, "r0", 10)


def test_escrow_does_not_spend_another_regions_share(regions: Regions) -> None:
    """Guard: a Region's takes (and transfers) touch only its own share items. All 10 units are
    A's: B refuses (409, naming A), and nothing of A's share changes in either Region."""
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=10, strategy="atomic", shares={A: 10, B: 0})
    regions.replicate(A, B)
    before = shares(regions, B, "r0")
    with pytest.raises(InsufficientCapacity, match=f"{A} 10"):
        b.reserve("r0", 1, "k1")
    with pytest.raises(InsufficientCapacity):
        b.escrow.transfer("r0", A, 1, "t1")
    assert shares(regions, B, "r0") == before
    assert reserve_all(a, "r0", 11, "a") == (10, 1)
    assert shares(regions, A, "r0")[f"RES#r0@{A}"] == {"capacity": 10, "reserved": 10, "available": 0}
    assert shares(regions, A, "r0")[f"RES#r0@{B}"] == {"capacity": 0, "reserved": 0, "available": 0}


# ------------------------------------------------------------------------------- transfers
@pytest.mark.parametrize(("strategy", "shards"), APPROACHES)
def test_a_transfer_moves_units_exactly_once(regions: Regions, strategy: str, shards: int) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=10, strategy=strategy, shards=shards, shares={A: 8, B: 2})
    regions.replicate(A, B)
    first = a.escrow.transfer("r0", B, 3, "move-1")
    again = a.escrow.transfer("r0", B, 3, "move-1")  # a re-send: the same transfer, nothing debited twice
    assert first.created and not again.created and again.body["transferId"] == first.body["transferId"]
    with pytest.raises(IdempotencyKeyReused):
        a.escrow.transfer("r0", B, 4, "move-1")
    assert sum(s["capacity"] for pk, s in shares(regions, A, "r0").items() if f"@{A}" in pk) == 5
    conserved(regions, "r0", 10)  # 5 + 2 + 3 in flight, in A; B has not seen it: 8 + 2
    assert b.escrow.receive_transfers("r0") == 0  # not replicated yet: nothing to credit
    regions.replicate(A, B)
    regions.replicate(A, B)  # a duplicate delivery changes nothing
    assert b.escrow.receive_transfers("r0") == 3
    assert b.escrow.receive_transfers("r0") == 0
    regions.settle()
    conserved(regions, "r0", 10)
    assert reserve_all(b, "r0", 6, "b") == (5, 1)  # its 2 and the 3 it received
    assert reserve_all(a, "r0", 6, "a") == (5, 1)
    regions.settle()
    conserved(regions, "r0", 10)


def test_a_take_that_finds_its_share_short_receives_transfers_first(regions: Regions) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=4, strategy="set", shares={A: 4, B: 0})
    a.escrow.transfer("r0", B, 2, "move")
    regions.replicate(A, B)
    assert reserve_all(b, "r0", 3, "b") == (2, 1)


def test_a_stale_listing_never_credits_a_transfer_twice(regions: Regions, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard: two receivers in B race (each listed the transfer before the other's receipt): the
    receipt's attribute_not_exists lets only one credit it."""
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=10, strategy="crt", shares={A: 5, B: 5})
    a.escrow.transfer("r0", B, 3, "move")
    regions.replicate(A, B)
    listed = b.store.transfers("r0")
    assert b.escrow.receive_transfers("r0") == 3
    stale = [Transfer(t.transfer_id, t.source, t.target, t.quantity, t.request_id, received=False) for t in listed]
    monkeypatch.setattr(b.store, "transfers", lambda *_a, **_k: stale)
    assert b.escrow.receive_transfers("r0") == 0
    assert shares(regions, B, "r0")[f"RES#r0@{B}"]["capacity"] == 8


@pytest.mark.parametrize("strategy", ["occ", "occ_history"])
def test_an_optimistic_take_planned_before_a_transfer_does_not_undo_it(regions: Regions, strategy: str) -> None:
    """Guard: a transfer's debit moves the item's tag/version, so an optimistic write planned from
    a read made before it fails its condition and re-plans (it would otherwise set ``available``
    back and create capacity)."""
    a = regions.service(A)
    a.create_resource("r0", capacity=10, strategy=strategy, shares={A: 10, B: 0})
    client = regions.clients[A]
    fired = []

    def transfer_in_between(**_: object) -> None:
        if not fired:
            fired.append(True)
            a.escrow.transfer("r0", B, 4, "move")

    client.meta.events.register("before-call.dynamodb.UpdateItem", transfer_in_between, unique_id=f"between-{uuid.uuid4()}")
    try:
        a.reserve("r0", 1, "k1")
    finally:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", unique_id=None)
    assert fired
    share = shares(regions, A, "r0")[f"RES#r0@{A}"]
    assert share == {"capacity": 6, "reserved": 1, "available": 5}


def test_transfers_are_refused_outside_mrec(mrsc: Regions, regions: Regions) -> None:
    mrsc.service(A).create_resource("r0", capacity=10, strategy="set")
    with pytest.raises(UnsupportedInMode, match="MREC"):
        mrsc.service(A).escrow.transfer("r0", B, 1, "t")
    single = regions.service(A, topology=Topology())
    single.create_resource("r2", capacity=10, strategy="set")
    with pytest.raises(UnsupportedInMode):
        single.escrow.transfer("r2", B, 1, "t")


# ------------------------------------------------------------------------------- releases, failover
def test_a_release_gives_back_to_the_share_it_was_taken_from(regions: Regions) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=4, strategy="marker")
    regions.replicate(A, B)
    taken = a.reserve("r0", 2, "k1")
    regions.replicate(A, B)
    rid = str(taken.body["reservationId"])
    with pytest.raises(UnsupportedInMode, match=f"release the reservation there .*; this is {B} "):
        b.release("r0", rid)
    assert a.release("r0", rid).created
    assert shares(regions, A, "r0")[f"RES#r0@{A}"] == {"capacity": 2, "reserved": 0, "available": 2}
    regions.settle()
    conserved(regions, "r0", 4)


def test_a_failover_resend_after_replication_is_answered_from_the_record(regions: Regions) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=4, strategy="crt")
    regions.replicate(A, B)
    first = a.reserve("r0", 1, "k1")
    regions.replicate(A, B)
    again = b.reserve("r0", 1, "k1")
    assert first.created and not again.created and again.body == first.body
    assert shares(regions, B, "r0")[f"RES#r0@{B}"]["reserved"] == 0


def test_a_failover_resend_during_a_partition_is_taken_twice_then_reconciled(regions: Regions) -> None:
    """B cannot see A's record, so it takes from its own share too (never oversold: each Region
    spent its own). Each Region keeps its own record (no last-writer-wins between them, nothing
    acknowledged is lost); once both are visible, the later Region gives its own back, once."""
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=2, strategy="atomic")
    regions.replicate(A, B)
    first = a.reserve("r0", 1, "k1")
    second = b.reserve("r0", 1, "k1")  # partitioned: A's record is not here
    assert first.created and second.created and first.body == second.body
    regions.settle()
    assert a.get_resource("r0")["reserved"] == 2
    rid = str(first.body["reservationId"])
    records = {(pk, sk): i["status"] for (pk, sk), i in regions.items(A).items() if pk == f"RSV#{rid}"}
    assert records == {(f"RSV#{rid}", f"RSV@{A}"): "CONFIRMED", (f"RSV#{rid}", f"RSV@{B}"): "CONFIRMED"}
    assert not a.escrow.reconcile("r0", rid)  # A's record comes first (same second: the Region name decides)
    assert b.escrow.reconcile("r0", rid)
    assert not b.escrow.reconcile("r0", rid)
    regions.settle()
    for region in (A, B):
        assert regions.service(region).get_resource("r0")["reserved"] == 1
        assert regions.service(region).get_reservation("r0", rid)["status"] == "CONFIRMED"
    conserved(regions, "r0", 2)


def test_a_failover_claim_dropped_in_b_never_deletes_an_acknowledged_record(dynamodb_endpoint: str) -> None:
    """atomic/occ claim the key first; B, partitioned, claims it too, finds its share empty and
    drops its claim. With one record per token, that delete would replicate (last-writer-wins,
    deletes included: the emulator models it) and erase A's acknowledged reservation; each
    Region's own record keeps it."""
    from testkit.regions import Delays, GlobalTable, Mode

    gt = GlobalTable(
        dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", regions=(A, B), mode=Mode.MREC, seed=5, delays=Delays.fixed(0.5)
    )
    gt.create()
    try:
        a, b = (Reservations(gt.table_name, dynamodb=gt.client(r), topology=Topology(MREC, r, (A, B))) for r in (A, B))
        a.create_resource("r0", capacity=1, strategy="occ", shares={A: 1, B: 0})
        gt.settle()
        gt.partition(A, B)
        rid = str(a.reserve("r0", 1, "k1").body["reservationId"])
        gt.advance(1.0)
        with pytest.raises(InsufficientCapacity):
            b.reserve("r0", 1, "k1")
        gt.advance(1.0)
        gt.heal()
        gt.settle()
        for service in (a, b):
            assert service.get_reservation("r0", rid)["status"] == "CONFIRMED"
    finally:
        gt.delete()


# ------------------------------------------------------------------------------- MRSC
@pytest.mark.parametrize(("strategy", "shards"), [(n, 1) for n in names(transactional=True)] + [(n, 2) for n in names(shardable=True)])
def test_mrsc_refuses_transactional_strategies_at_creation(mrsc: Regions, strategy: str, shards: int) -> None:
    with pytest.raises(UnsupportedInMode, match="MRSC") as refused:
        mrsc.service(B).create_resource("r0", capacity=10, strategy=strategy, shards=shards)
    assert refused.value.status == 409 and refused.value.code == "unsupported_in_region_mode"
    assert mrsc.items(A) == {}


def test_mrsc_refuses_a_transactional_strategy_at_first_call(mrsc: Regions) -> None:
    """A resource whose strategy is named in an item already there (e.g. created before the mode)."""
    item = {"PK": {"S": "RES#r0"}, "SK": {"S": "META"}, "resourceId": {"S": "r0"}, "capacity": {"N": "5"}}
    item |= {"strategy": {"S": "crt"}, "shards": {"N": "1"}, "reserved": {"N": "0"}, "available": {"N": "5"}}
    mrsc.plain[A].put_item(TableName=mrsc.table, Item=item)
    with pytest.raises(UnsupportedInMode, match="TransactWriteItems"):
        mrsc.service(C).reserve("r0", 1, "k1")


@pytest.mark.parametrize("strategy", names(transactional=False))
def test_mrsc_single_item_strategies_stay_exact_without_transactions(mrsc: Regions, strategy: str) -> None:
    services = {r: mrsc.service(r) for r in (A, B, C)}
    services[A].create_resource("r0", capacity=5, strategy=strategy)
    taken = []
    for n in range(9):
        region = (A, B, C)[n % 3]
        try:
            taken.append((region, services[region].reserve("r0", 1, f"k{n}")))
        except InsufficientCapacity:
            pass
    assert len(taken) == 5
    again = services[C].reserve("r0", 1, "k0")  # a failover re-send: answered from the record
    assert not again.created
    region, first = taken[0]
    rid = str(first.body["reservationId"])
    assert services[B].release("r0", rid).created  # any Region: one strongly consistent item
    assert not services[C].release("r0", rid).created
    view = services[C].get_resource("r0")
    assert (view["reserved"], view["available"]) == (4, 1)
    assert services[B].get_reservation("r0", rid)["status"] == "RELEASED"


def test_an_interrupted_mrsc_release_is_redriven_by_a_token_strategy(mrsc: Regions) -> None:
    a = mrsc.service(A)
    a.create_resource("r0", capacity=3, strategy="set")
    rid = str(a.reserve("r0", 2, "k1").body["reservationId"])
    assert a.store.mark_releasing(rid, "crashed-request")[0].value == "applied"
    answer = mrsc.service(B).release("r0", rid)  # the re-drive: the give-back and the last step
    assert answer.body["status"] == "RELEASED"
    assert mrsc.service(B).release("r0", rid).body["status"] == "RELEASED"
    view = a.get_resource("r0")
    assert (view["reserved"], view["available"]) == (0, 3)


# ------------------------------------------------------------------------------- on the emulator
def test_on_the_emulator_a_partitioned_transfer_and_failover_never_oversell(dynamodb_endpoint: str) -> None:
    """The same rules under testkit.regions' last-writer-wins replication with seeded delays and
    duplicates: 12 reservations per Region against a capacity of 10, a transfer and a failover
    re-send during a partition; after heal + settle no Region holds more than 10."""
    from testkit.regions import Delays, GlobalTable, Mode

    gt = GlobalTable(
        dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", regions=(A, B), mode=Mode.MREC, seed=3, delays=Delays(duplicate=0.3)
    )
    gt.create()
    try:
        svc = {r: Reservations(gt.table_name, dynamodb=gt.client(r), topology=Topology(MREC, r, (A, B))) for r in (A, B)}
        svc[A].create_resource("r0", capacity=10, strategy="set")
        gt.settle()
        gt.partition(A, B)
        taken = {A: [], B: []}
        for n in range(12):
            for region, wanted in ((A, 12), (B, 3)):
                if n < wanted:
                    try:
                        taken[region].append(svc[region].reserve("r0", 1, f"{region}-{n}").body["reservationId"])
                    except InsufficientCapacity:
                        pass
                gt.advance(1.0)
        assert (len(taken[A]), len(taken[B])) == (5, 3)  # each Region sold its own share only
        svc[B].reserve("r0", 1, f"{A}-0")  # a failover re-send: A's record has not arrived, B takes from its own share
        svc[A].release("r0", str(taken[A][1]))
        svc[A].escrow.transfer("r0", B, 1, "move")
        gt.advance(300.0)
        gt.heal()
        gt.settle()
        assert svc[B].escrow.receive_transfers("r0") == 1
        rid = str(svc[A].get_reservation("r0", str(taken[A][0]))["reservationId"])
        assert [svc[r].escrow.reconcile("r0", rid) for r in (A, B)] == [False, True]  # B's take of A's key goes back
        gt.settle()
        assert gt.converged()
        for region in (A, B):
            view = svc[region].get_resource("r0")
            shares = view["regions"]
            assert (view["reserved"], view["available"], view["inFlight"]) == (7, 3, 0), view
            assert shares == {A: {"capacity": 4, "reserved": 4, "available": 0}, B: {"capacity": 6, "reserved": 3, "available": 3}}
    finally:
        gt.delete()


# ------------------------------------------------------------------------------- through the handler
def test_transfer_routes_through_the_handler(load_function: Any, table: str, layer_client: Any) -> None:
    """The function takes its topology from its settings (GLOBAL_TABLE_MODE, TABLE_REGIONS,
    AWS_REGION); this Region is us-east-1 (the tests' AWS_REGION)."""
    from counters.core.failures import RetryPolicy
    from tests.conftest import api_event, invoke

    fast = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
    mrec = Topology(MREC, B, (A, B))
    app = load_function("ReservationsFunction", table, build=lambda s: Reservations(table, retry=fast, topology=mrec))

    def post(path: str, body: Any, key: str | None = None) -> tuple[int, Any]:
        return invoke(app, api_event("POST", path, body, headers={"Idempotency-Key": key} if key else None))

    status, body = post("/resources", {"resourceId": "r1", "capacity": 10, "strategy": "set", "shares": {A: 2, B: 8}})
    assert status == 201, body
    status, body = post("/resources/r1/transfers", {"to": A, "quantity": 3}, "move-1")
    assert status == 201 and body["from"] == B and body["to"] == A and body["quantity"] == 3, body
    assert post("/resources/r1/transfers", {"to": A, "quantity": 3}, "move-1")[0] == 200
    assert post("/resources/r1/transfers", {"to": A, "quantity": 4}, "move-1")[0] == 422
    assert post("/resources/r1/transfers", {"to": A, "quantity": 3})[0] == 400
    assert post("/resources/r1/transfers", {"to": B, "quantity": 3}, "move-2")[0] == 400  # to itself
    assert post("/resources/r1/transfers", {"to": A, "quantity": 6}, "move-3")[0] == 409  # 5 left here
    status, view = invoke(app, api_event("GET", "/resources/r1"))
    assert status == 200 and view["inFlight"] == 3 and view["regions"][B] == {"capacity": 5, "reserved": 0, "available": 5}, view
    assert post("/resources/r1/transfers/receive", None) == (200, {"resourceId": "r1", "credited": 0})
    single = load_function("ReservationsFunction", table, build=lambda s: Reservations(table, retry=fast))
    status, body = invoke(single, api_event("POST", "/resources/r1/transfers", {"to": A, "quantity": 1}, headers={"Idempotency-Key": "k"}))
    assert (status, body["error"]) == (409, "unsupported_in_region_mode")


def test_region_settings_reach_the_reservations_service() -> None:
    from counters.services.reservations import ReservationSettings

    settings = ReservationSettings.from_env({"TABLE_NAME": "t", "GLOBAL_TABLE_MODE": "mrec", "AWS_REGION": B, "TABLE_REGIONS": f"{B},{A}"})
    service = Reservations.from_settings(settings)
    assert service.policy.topology == Topology(MREC, B, (A, B))
    assert Reservations.from_settings(ReservationSettings.from_env({"TABLE_NAME": "t"})).policy.topology == Topology()


def test_the_multi_region_proof_holds_on_a_few_schedules(dynamodb_endpoint: str) -> None:
    """proof/regions/reservations.py, one schedule per row: every row holds (or is refused)."""
    from proof.regions.reservations import scenarios

    reports = scenarios(dynamodb_endpoint, seed=3, schedules=11)
    assert len(reports) == 12
    assert all(r.breaches == 0 and r.verdict in ("holds", "UNDERPOWERED") for r in reports), [(r.name, r.verdict, r.notes) for r in reports]
    assert any("refused 9 of 9" in note for note in reports[-1].notes)
