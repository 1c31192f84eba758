"""Orders and LAST_ORDER on the local global table (testkit.regions): replication with seeded delays,
reordering and duplicates, partitions and heals. The per-call rules (strided ids, the key record's
own answer, the refusals, the writer guard) are in test_orders_regions.py; this file checks what only
replication shows: the pointer after a heal, and the proof's schedules."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.errors import IntegrityError
from counters.core.failures import RetryPolicy
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.pointer import Pointer
from counters.services.orders import POINTER, Orders, order_policy
from proof.regions import orders as proof_orders
from testkit.regions import Delays, GlobalTable, Mode, WriterRuleViolation

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
A, B = "eu-west-1", "us-east-1"


@pytest.fixture
def mrec(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    # fixed 5 s deliveries, some twice: every write of a step is still in flight at the next step
    gt = GlobalTable(
        dynamodb_endpoint, f"tally-go-{uuid.uuid4().hex[:8]}", (A, B), Mode.MREC, seed=3, delays=Delays.fixed(5.0, duplicate=0.3)
    )
    gt.create()
    yield gt
    gt.delete()


def _pointer(gt: GlobalTable, region: str, policy: RegionPolicy) -> Pointer:
    return Pointer(gt.table_name, POINTER, attribute="orderId", dynamodb=gt.client(region), retry=FAST, policy=policy)


def _interleave_and_heal(gt: GlobalTable, policies: dict[str, RegionPolicy]) -> dict[str, list[int]]:
    """Each Region's pointer function sees its own orders: A's reach 9 while B's reach 4, both in a
    partition; B's function moves last. Then heal and settle. Returns every read of each Region."""
    feeds = {r: proof_orders.StreamFeed(gt, r, _pointer(gt, r, policies[r]), proof_orders._admin(gt, r)) for r in (A, B)}
    orders = {r: Orders(gt.table_name, dynamodb=gt.client(r), retry=FAST, policy=policies[r]) for r in (A, B)}
    reads: dict[str, list[int]] = {A: [], B: []}

    def read_all() -> None:
        for r in (A, B):
            reads[r].append(feeds[r].pointer.read()[0] or 0)

    gt.partition(A, B)
    for n in range(4):
        orders[A].place(key=f"a{n}", customer_id="alice", items=[{"sku": "a", "quantity": 1}])
        gt.advance(1)
        feeds[A].poll()
        read_all()
    gt.advance(120)  # two minutes apart
    for n in range(2):
        orders[B].place(key=f"b{n}", customer_id="bob", items=[{"sku": "b", "quantity": 1}])
        gt.advance(1)
        feeds[B].poll()
        read_all()
    gt.heal()
    for _ in range(3):
        gt.advance(2)
        read_all()
    gt.settle()
    for feed in feeds.values():
        feed.poll()
    gt.settle()
    read_all()
    return reads


def test_the_pointer_is_monotonic_in_every_region_after_a_heal(mrec: GlobalTable) -> None:
    reads = _interleave_and_heal(mrec, {r: order_policy(Topology(GlobalTableMode.MREC, r, (A, B))) for r in (A, B)})
    assert reads[A][3] == 7 and reads[B][5] == 4  # A: 1, 3, 5, 7; B: 2, 4 (strided ids)
    for region, seen in reads.items():
        assert seen == sorted(seen), (region, seen)
        assert seen[-1] == 7, (region, seen)
    assert mrec.converged()


def test_one_shared_pointer_item_goes_backward_after_the_same_heal(mrec: GlobalTable) -> None:
    """The hazards issue 21 measured, on the same schedule with the single-Region items (one
    sequence, one pointer, moved by both Regions): A read its pointer at 4, then lower after the
    heal (B's later write won last-writer-wins), and bob's orders 1 and 2 overwrote alice's, so her
    key record now names bob's ORDER#1: her re-send is refused, never answered with bob's items.
    (If this stops showing the hazards, the emulator no longer models them and the test above
    proves nothing.) The emulator's writer-rule check is off here, so the hazard plays out: the
    test below shows the check refusing these writes."""
    mrec.writers = None
    reads = _interleave_and_heal(mrec, dict.fromkeys((A, B), ONE_REGION_POLICY))
    assert reads[A][3] == 4 and min(reads[A][4:]) < 4, reads  # backward after the heal
    order_1 = next(i for i in mrec.items(A) if i["PK"] == "ORDER#1")
    assert (order_1["customerId"], order_1["idempotencyKey"]) == ("bob", "b0")  # alice's order 1 is gone
    with pytest.raises(IntegrityError):
        Orders(mrec.table_name, dynamodb=mrec.client(A), retry=FAST).place(
            key="a0", customer_id="alice", items=[{"sku": "a", "quantity": 1}]
        )


def test_the_emulator_flags_the_single_region_items_written_in_two_regions(mrec: GlobalTable) -> None:
    """The same schedule with the check on: the single-Region pointer is refused on MREC by its
    writer rule (counters.store.sequences WRITERS), so the first pump fails the run."""
    with pytest.raises(WriterRuleViolation, match="wrote pointer PK='POINTER#LAST_ORDER'.*refused on MREC"):
        _interleave_and_heal(mrec, dict.fromkeys((A, B), ONE_REGION_POLICY))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_proof_schedules_hold(dynamodb_endpoint: str, seed: int) -> None:
    """A few of the proof's seeded schedules (faults, delays, a partition, failovers) per mode."""
    reports = proof_orders.scenarios(dynamodb_endpoint, seed, schedules=8)
    assert [(r.name, r.verdict) for r in reports if r.verdict == "VIOLATED"] == []
    assert all(r.faults for r in reports if "pointer" in r.name), [(r.name, r.faults) for r in reports]
    exercised: dict[str, Any] = {r.name.split(";")[0]: r.notes for r in reports}  # a title may go on with its documented caveat
    assert any("partitions" in n for n in exercised["regions: orders + pointer (MREC, 2 Regions)"])
