"""MREC escrow with no operator (issue 28, item 4): each Region's ``EscrowFunction`` reads its own
stream and credits arriving transfers and gives back failover double takes; nobody calls
``POST /resources/{id}/transfers/receive`` or ``Reservations.escrow.reconcile``.

Two Regions on one DynamoDB Local (tests/integration/regions_support.py: explicit replication, a
stream per Region); each Region's consumer is the template's subscription over that Region's stream
(:class:`testkit.escrow.EscrowConsumers`), and one test runs the handler module itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.regions import GlobalTableMode
from counters.primitives.approaches import NAMES, approach_class, names
from counters.services.escrow_automation import EscrowAutomation
from devstack.runtime import LambdaContext
from devstack.streams import StreamPoller
from testkit.escrow import FUNCTION, EscrowConsumers, subscription
from testkit.faults import FaultInjector
from tests.integration.regions_support import A, B, Regions
from tests.integration.test_reservations_regions import conserved, reserve_all, shares

MREC = GlobalTableMode.MREC


@pytest.fixture
def regions(dynamodb_endpoint: str) -> Iterator[Regions]:
    found = Regions(dynamodb_endpoint, f"tally-escrow-{uuid.uuid4().hex[:10]}")
    yield found
    found.drop()


def consumers(regions: Regions) -> EscrowConsumers:
    return EscrowConsumers(regions.table, regions.endpoint, regions.plain, {r: regions.service(r) for r in regions.regions})


def share_of(regions: Regions, region: str, resource_id: str) -> dict[str, int]:
    """``region``'s own share (unsharded), as its replica holds it."""
    return shares(regions, region, resource_id)[f"RES#{resource_id}@{region}"]


@pytest.mark.parametrize("strategy", NAMES)
def test_a_transfer_is_usable_in_the_target_with_nobody_calling_receive(regions: Regions, strategy: str) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=10, strategy=strategy, shares={A: 10, B: 0})
    regions.replicate(A, B)
    streams = consumers(regions)
    streams.poll()
    a.escrow.transfer("r0", B, 4, "move")
    streams.poll()  # A's stream has the transfer, but it is to B; B's replica has not got it
    assert share_of(regions, B, "r0")["capacity"] == 0
    regions.replicate(A, B)
    regions.replicate(A, B)  # a duplicate delivery: the receipt credits once
    streams.poll()
    assert share_of(regions, B, "r0") == {"capacity": 4, "reserved": 0, "available": 4}  # before any take asks
    assert streams.credited == 4
    regions.settle()
    streams.poll()
    assert streams.credited == 4
    conserved(regions, "r0", 10)
    assert reserve_all(b, "r0", 5, "b") == (4, 1)


def test_a_failover_double_take_is_given_back_with_nobody_calling_reconcile(regions: Regions) -> None:
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=2, strategy="atomic")
    regions.replicate(A, B)
    streams = consumers(regions)
    first = a.reserve("r0", 1, "k1")
    second = b.reserve("r0", 1, "k1")  # partitioned: A's record is not in B's replica
    assert first.created and second.created
    streams.poll()  # each Region sees only its own record: nothing to give back
    assert streams.reconciled == 0
    regions.settle()  # the heal: each record arrives in the other Region's stream
    streams.poll()
    assert streams.reconciled == 1  # B (its record is not the first) gave its own back, once
    regions.settle()
    streams.poll()
    assert streams.reconciled == 1
    rid = str(first.body["reservationId"])
    for region in (A, B):
        assert regions.service(region).get_resource("r0")["reserved"] == 1
        assert regions.service(region).get_reservation("r0", rid)["status"] == "CONFIRMED"
    conserved(regions, "r0", 2)


def test_a_double_take_whose_twin_arrived_before_its_own_record_is_given_back(regions: Regions, monkeypatch: pytest.MonkeyPatch) -> None:
    """B read no record, then A's arrived (B's consumer: nothing of B's to give back), then B wrote
    its own. The consumer acts on a Region's own records too, so the double take is not left held."""
    a, b = regions.service(A), regions.service(B)
    a.create_resource("r0", capacity=2, strategy="crt")
    regions.replicate(A, B)
    streams = consumers(regions)
    a.reserve("r0", 1, "k1")
    regions.replicate(A, B, where="RSV#")
    streams.poll()
    assert streams.reconciled == 0
    monkeypatch.setattr(b.shared, "known", lambda _rid: None)  # B's read ran before A's record arrived
    b.reserve("r0", 1, "k1")
    monkeypatch.undo()
    streams.poll()  # B's own record, in B's stream
    assert streams.reconciled == 1
    regions.settle()
    conserved(regions, "r0", 2)
    assert all(regions.service(r).get_resource("r0")["reserved"] == 1 for r in (A, B))


def test_a_credit_that_meets_contention_is_redelivered_not_dropped(regions: Regions) -> None:
    """Guard: the consumer raises while the arrived transfer is not credited, so the event source
    redelivers the record; a record consumed without its credit would leave the units in flight
    until some take or an operator asked."""
    a = regions.service(A)
    a.create_resource("r0", capacity=10, strategy="crt", shares={A: 10, B: 0})
    regions.replicate(A, B)
    streams = consumers(regions)
    streams.poll()
    a.escrow.transfer("r0", B, 4, "move")
    regions.replicate(A, B)
    faults = FaultInjector(regions.clients[B], seed=1)
    faults.add("conflict", operations={"TransactWriteItems"}, limit=10)  # more than one call's attempts: that call fails
    try:
        streams.poll()
    finally:
        faults.detach()
    assert sum(faults.injected.values()) == 10
    assert streams.failed >= 1
    assert share_of(regions, B, "r0")["capacity"] == 4
    conserved(regions, "r0", 10)


def test_the_handler_credits_and_reconciles_from_its_regions_stream(regions: Regions, load_function: Any) -> None:
    """functions/escrow/app.py itself (Powertools' BatchProcessor) on B's stream."""
    params = {
        "GlobalTableMode": "mrec",
        "ReplicaRegions": f"{A},{B}",
        "HomeRegion": A,
        "GlobalTableName": regions.table,
        # B is outside the home Region: the template asks for its replica's stream (read locally by the table's name)
        "ReplicaStreamArn": f"arn:aws:dynamodb:{B}:123456789012:table/{regions.table}/stream/local",
    }
    b = regions.service(B)
    module = load_function(FUNCTION, regions.table, params=params, build=lambda _s: EscrowAutomation(b))
    context = LambdaContext.for_function(FUNCTION, 512, 10)
    poller = StreamPoller(
        regions.table,
        regions.endpoint,
        {FUNCTION: lambda event: ("ok", module.lambda_handler(event, context))},
        [subscription()],
        ddb=regions.plain[B],
    )
    a = regions.service(A)
    a.create_resource("r0", capacity=4, strategy="set", shares={A: 4, B: 0})
    regions.replicate(A, B)
    a.escrow.transfer("r0", B, 2, "move")
    a.reserve("r0", 1, "k1")
    regions.replicate(A, B)
    assert poller.poll_once() >= 2  # the transfer and A's record passed the template's filter
    assert share_of(regions, B, "r0") == {"capacity": 2, "reserved": 0, "available": 2}
    regions.settle()
    conserved(regions, "r0", 4)


@pytest.mark.parametrize("strategy", [n for n in names(keyed=True) if not approach_class(n).writes_record])
def test_a_take_whose_record_put_fails_is_deferred_and_its_replay_writes_the_record(regions: Regions, strategy: str) -> None:
    """Guard: the units a take holds are never left without a record (what the proofs count as
    stranded: nobody could release them). The take applied, its record's Put ran out of attempts:
    the 503 carries the take's re-drive (the retry queue's 202); the replay is answered by the
    approach's token (duplicate, nothing taken twice) and writes the record."""
    a = regions.service(A)
    a.create_resource("r0", capacity=4, strategy=strategy, shares={A: 4, B: 0})
    faults = FaultInjector(regions.clients[A], seed=2)
    faults.add("throttle", operations={"PutItem"}, limit=100)
    try:
        with pytest.raises(ContentionError) as busy:
            a.reserve("r0", 2, "k1")
    finally:
        faults.detach()
    assert share_of(regions, A, "r0")["reserved"] == 2  # taken, and no record yet
    command = busy.value.command
    assert command is not None and command.op == "reserve"
    verdict = a.replayables()[command.op].run(command)
    assert verdict.status == "APPLIED"
    assert share_of(regions, A, "r0")["reserved"] == 2  # the replay took nothing more
    rid = str(verdict.result["reservationId"])
    assert a.get_reservation("r0", rid)["status"] == "CONFIRMED"
    a.release("r0", rid)
    assert share_of(regions, A, "r0")["reserved"] == 0


def test_the_multi_region_proof_breaks_when_no_region_consumes_its_stream(dynamodb_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard for the proof: its MREC rows call no route, so with the consumers off the transfers
    stay in flight and the failover double takes stay held, and the rows say so (breaches)."""
    from proof.regions import reservations as proof

    monkeypatch.setattr(EscrowConsumers, "poll", lambda _self: 0)
    reports = proof._mrec_rows(dynamodb_endpoint, seed=3, per_row=1)
    notes = [n for r in reports for n in r.notes]
    assert any(r.breaches for r in reports)
    assert any("never credited after the heal" in n for n in notes), notes
    assert any("held twice" in n for n in notes), notes
