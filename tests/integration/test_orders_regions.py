"""Orders and LAST_ORDER across Regions, on DynamoDB Local: each Region is a client with its own
``region_name`` on the one DynamoDB Local (it keeps a database per Region), so nothing replicates
here unless a test copies an item, as last-writer-wins would. Replication with delays, partitions
and heals: test_orders_global.py (the emulator).

What must hold (issue 21, docs/orders.md "Global tables"):
* MREC fast ids never collide across Regions, and each Region writes only its own sequence and
  pointer items (the guard: one writing Region per item updated in place);
* a re-send never answers another customer's order, even when an order item was overwritten;
* a key record that arrived before its order answers from the record (MREC) or completes the order
  (MRSC, where order and key record are two writes, never a transaction);
* gapless ids are refused on MRSC and outside the MREC home Region.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from counters.core import client as dynamo
from counters.core.errors import IntegrityError, UnsupportedInMode
from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.pointer import Pointer
from counters.services.orders import POINTER, Orders, order_policy
from devstack.dynamodb_local import create_table
from devstack.template import read_stack
from testkit.faults import FaultInjector

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
A, B, C = "eu-west-1", "us-east-1", "us-west-2"
ALICE = [{"sku": "book", "quantity": 1}]
BOB = [{"sku": "lamp", "quantity": 7}]


@dataclass
class Region:
    """One Region of the table: the layer's client (engine-guarded, its writes recorded) and an
    admin client for arranging and asserting."""

    name: str
    client: Any
    admin: Any
    writes: list[tuple[str, str]] = field(default_factory=list)  # (operation, PK) of every write the layer sent

    def orders(self, topology: Topology, mode: str = "fast") -> Orders:
        return Orders(TABLE[0], mode=mode, dynamodb=self.client, retry=FAST, policy=order_policy(topology))

    def pointer(self, topology: Topology) -> Pointer:
        return Pointer(TABLE[0], POINTER, attribute="orderId", dynamodb=self.client, retry=FAST, policy=order_policy(topology))

    def get(self, pk: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.admin.get_item(
            TableName=TABLE[0], Key={"PK": {"S": pk}, "SK": {"S": "META"}}, ConsistentRead=True
        ).get("Item")
        return item

    def copy_to(self, other: Region, pk: str) -> None:
        """Replicate one item's current version to ``other`` (a whole-item put, as LWW applies it)."""
        item = self.get(pk)
        assert item is not None, pk
        other.admin.put_item(TableName=TABLE[0], Item=item)


TABLE: list[str] = [""]


def _client(endpoint: str, region: str) -> Any:
    return boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=region).client(
        "dynamodb", endpoint_url=endpoint, config=dynamo.CLIENT_CONFIG
    )


def _record_writes(region: Region) -> None:
    def provide_params(params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name == "TransactWriteItems":
            for action in params["TransactItems"]:
                (kind, body), *_rest = action.items()
                pk = (body.get("Item") or body.get("Key"))["PK"]["S"]
                region.writes.append((f"Transact{kind}", pk))
        elif name in ("PutItem", "UpdateItem", "DeleteItem"):
            pk = (params.get("Item") or params.get("Key"))["PK"]["S"]
            region.writes.append((name, pk))

    region.client.meta.events.register("provide-client-params.dynamodb", provide_params)


@pytest.fixture
def regions(dynamodb_endpoint: str) -> Iterator[dict[str, Region]]:
    """Three Regions, each with the template's table (fresh name per test)."""
    TABLE[0] = f"tally-regions-{uuid.uuid4().hex[:10]}"
    made: dict[str, Region] = {}
    for name in (A, B, C):
        layer, admin = _client(dynamodb_endpoint, name), _client(dynamodb_endpoint, name)
        dynamo.guard(layer.meta.events, "dynamodb")
        region = made[name] = Region(name, layer, admin)
        _record_writes(region)
        create_table(admin, read_stack(TABLE[0]))
    yield made
    for region in made.values():
        region.admin.delete_table(TableName=TABLE[0])


def mrec(region: str, home: str = "") -> Topology:
    return Topology(GlobalTableMode.MREC, region, (A, B), home)


def mrsc(region: str) -> Topology:
    return Topology(GlobalTableMode.MRSC, region, (A, B, C))


# ---------------------------------------------------------------------------- fast ids
def test_mrec_fast_ids_are_region_strided_and_never_collide(regions: dict[str, Region]) -> None:
    """Both Regions take 10 ids without seeing each other (a partition, or just replication lag):
    A takes 1, 3, 5..., B 2, 4, 6...: no id is taken twice, so no order can overwrite another."""
    a, b = regions[A].orders(mrec(A)), regions[B].orders(mrec(B))
    ids = {A: [], B: []}
    for n in range(10):
        ids[A].append(a.place(key=f"a{n}", customer_id="alice", items=ALICE).order["orderId"])
        ids[B].append(b.place(key=f"b{n}", customer_id="bob", items=BOB).order["orderId"])
    assert ids[A] == list(range(1, 21, 2)) and ids[B] == list(range(2, 21, 2))
    assert a.sequence.current()[0] == 19 and b.sequence.current()[0] == 20
    order = regions[A].get("ORDER#1")
    assert order is not None and order["writerRegion"] == {"S": A}  # the pointer of A follows it


def test_each_region_writes_only_its_own_sequence_and_pointer_items(regions: dict[str, Region]) -> None:
    """The guard of "one writing Region per item updated in place": on MREC every SEQ# and POINTER#
    item written is the writing Region's own. (Fails if A writes B's item, or both write one.)"""
    for name in (A, B):
        orders, pointer = regions[name].orders(mrec(name)), regions[name].pointer(mrec(name))
        for n in range(3):
            placed = orders.place(key=f"{name}-{n}", customer_id="c1", items=ALICE)
            pointer.advance(int(placed.order["orderId"]))
    writers: dict[str, set[str]] = {}
    for name in (A, B):
        for _operation, pk in regions[name].writes:
            if pk.startswith(("SEQ#", "POINTER#")):
                writers.setdefault(pk, set()).add(name)
    assert writers == {f"SEQ#ORDER#{A}": {A}, f"SEQ#ORDER#{B}": {B}, f"POINTER#LAST_ORDER#{A}": {A}, f"POINTER#LAST_ORDER#{B}": {B}}


def test_one_region_keeps_its_ids_and_items(regions: dict[str, Region]) -> None:
    """Mode none: the one SEQ#ORDER and POINTER#LAST_ORDER, ids 1, 2, 3, no writerRegion."""
    orders, pointer = regions[A].orders(Topology()), regions[A].pointer(Topology())
    assert [orders.place(key=f"k{n}", customer_id="c1", items=ALICE).order["orderId"] for n in range(3)] == [1, 2, 3]
    pointer.advance(3)
    assert {pk for _op, pk in regions[A].writes if pk.startswith(("SEQ#", "POINTER#"))} == {"SEQ#ORDER", "POINTER#LAST_ORDER"}
    order = regions[A].get("ORDER#1")
    assert order is not None and "writerRegion" not in order


# ---------------------------------------------------------------------------- the wrong customer's answer
def test_a_resend_never_answers_another_customers_order(regions: dict[str, Region]) -> None:
    """Issue 21, replayed: two Regions without strided ids both take id 1 (alice in A, bob in B);
    last-writer-wins puts bob's ORDER#1 over alice's in A. Alice's client re-sends her key: it must
    not answer 200 with bob's items. Her key record and ORDER#1 disagree: 409 integrity_error."""
    a, b = regions[A].orders(Topology()), regions[B].orders(Topology())  # the old, unstrided ids
    assert a.place(key="ka", customer_id="alice", items=ALICE).order["orderId"] == 1
    assert b.place(key="kb", customer_id="bob", items=BOB).order["orderId"] == 1
    regions[B].copy_to(regions[A], "ORDER#1")  # LWW: bob's order wins in A
    with pytest.raises(IntegrityError, match="another request's order"):
        a.place(key="ka", customer_id="alice", items=ALICE)
    # bob's own re-send, after his order reached A, is still answered (it is his)
    regions[B].copy_to(regions[A], "ORDERKEY#kb")
    again = a.place(key="kb", customer_id="bob", items=BOB)
    assert (again.created, again.order["customerId"], again.order["items"]) == (False, "bob", BOB)


def test_a_key_record_that_arrived_before_its_order_answers_from_the_record(regions: dict[str, Region]) -> None:
    """MREC: a transaction's items replicate separately. A client fails over from A to B and
    re-sends; B has A's key record but not yet ORDER#n: the answer is the record's own order."""
    first = regions[A].orders(mrec(A)).place(key="k1", customer_id="alice", items=ALICE)
    regions[A].copy_to(regions[B], "ORDERKEY#k1")
    again = regions[B].orders(mrec(B)).place(key="k1", customer_id="alice", items=ALICE)
    assert (again.created, again.order) == (False, first.order)
    assert regions[B].get(f"ORDER#{first.order['orderId']}") is None  # B wrote nothing: A's order replicates
    assert not [w for w in regions[B].writes if w[1].startswith("ORDER")]


# ---------------------------------------------------------------------------- MRSC
@pytest.fixture
def mrsc_regions(regions: dict[str, Region]) -> dict[str, Region]:
    """MRSC: one strongly consistent table seen from three Regions (here: A's database)."""
    store = regions[A]
    shared = {name: Region(name, store.client if name == A else r.client, store.admin) for name, r in regions.items()}
    for name in (B, C):
        shared[name].client = _client(store.client.meta.endpoint_url, A)
        _record_writes(shared[name])
    shared[A].writes = store.writes
    return shared


def test_mrsc_fast_ids_use_one_sequence_and_no_transaction(mrsc_regions: dict[str, Region]) -> None:
    ids = [
        mrsc_regions[r].orders(mrsc(r)).place(key=f"k{n}-{r}", customer_id="c1", items=ALICE).order["orderId"]
        for n in range(2)
        for r in (A, B, C)
    ]
    assert ids == [1, 2, 3, 4, 5, 6]
    writes = [w for r in (A, B, C) for w in mrsc_regions[r].writes]
    assert not [w for w in writes if w[0].startswith("Transact")]  # MRSC has no transactions
    assert {pk for _op, pk in writes if pk.startswith("SEQ#")} == {"SEQ#ORDER"}
    # the key record is written before its order, so an order never exists without its key
    assert [pk.split("#")[0] for _op, pk in mrsc_regions[A].writes if not pk.startswith("SEQ#")][:2] == ["ORDERKEY", "ORDER"]


def test_mrsc_a_resend_completes_an_order_whose_request_died_after_its_key_record(mrsc_regions: dict[str, Region]) -> None:
    a = mrsc_regions[A].orders(mrsc(A))
    first = a.place(key="k1", customer_id="alice", items=ALICE)
    order_id = first.order["orderId"]
    stored = mrsc_regions[A].get(f"ORDER#{order_id}")
    mrsc_regions[A].admin.delete_item(
        TableName=TABLE[0], Key={"PK": {"S": f"ORDER#{order_id}"}, "SK": {"S": "META"}}
    )  # as if never written
    again = mrsc_regions[B].orders(mrsc(B)).place(key="k1", customer_id="alice", items=ALICE)  # the client fails over to B
    assert (again.created, again.order) == (False, first.order)
    assert mrsc_regions[A].get(f"ORDER#{order_id}") == stored  # completed, exactly as the request would have written it
    # and a twin in C finds the one key record: still one order
    assert mrsc_regions[C].orders(mrsc(C)).place(key="k1", customer_id="alice", items=ALICE).order == first.order
    assert mrsc_regions[A].orders(mrsc(A)).sequence.current()[0] == 1


# ---------------------------------------------------------------------------- gapless
def test_gapless_is_refused_on_mrsc_and_outside_the_mrec_home_region(regions: dict[str, Region]) -> None:
    with pytest.raises(UnsupportedInMode, match="MRSC") as refused:
        regions[A].orders(mrsc(A), mode="gapless").place(key="k", customer_id="c1", items=ALICE)
    assert refused.value.status == 409 and refused.value.code == "unsupported_in_region_mode"
    with pytest.raises(UnsupportedInMode, match=f"home Region {A}"):
        regions[B].orders(mrec(B, home=A), mode="gapless").place(key="k", customer_id="c1", items=ALICE)
    with pytest.raises(UnsupportedInMode, match="HOME_REGION"):
        regions[A].orders(mrec(A), mode="gapless").place(key="k", customer_id="c1", items=ALICE)
    assert not [w for r in (A, B) for w in regions[r].writes]  # refused before anything was written
    home = regions[A].orders(mrec(A, home=A), mode="gapless")
    assert [home.place(key=f"k{n}", customer_id="c1", items=ALICE).order["orderId"] for n in range(3)] == [1, 2, 3]
    assert {pk for _op, pk in regions[A].writes if pk.startswith("SEQ#")} == {"SEQ#ORDER"}  # the home Region's one counter


# ---------------------------------------------------------------------------- the pointer
def test_mrec_pointer_reads_the_max_over_regions_and_never_goes_back(regions: dict[str, Region]) -> None:
    """A moves its pointer to 9, B (not having seen 9) to 4. One shared item under LWW would end at
    4 in both Regions (B wrote last). Per-Region items: every Region reads 9 once both replicated,
    and a read never goes below what it answered before."""
    pa, pb = regions[A].pointer(mrec(A)), regions[B].pointer(mrec(B))
    pa.advance(9)
    pb.advance(4)
    assert (pa.read()[0], pb.read()[0]) == (9, 4)  # nothing replicated yet
    regions[B].copy_to(regions[A], f"POINTER#LAST_ORDER#{B}")
    regions[A].copy_to(regions[B], f"POINTER#LAST_ORDER#{A}")
    assert (pa.read()[0], pb.read()[0]) == (9, 9)
    assert pb.advance(6).outcome.value == "applied" and pb.read()[0] == 9  # B's own item moves; the max holds
    assert pa.advance(5).reason == "stale"


def test_mrsc_an_order_write_whose_answer_was_lost_is_this_requests_order(mrsc_regions: dict[str, Region]) -> None:
    """MRSC writes the order after its key record, as a plain PutItem: its answer is lost (a 500
    after it applied), the retry fails ``attribute_not_exists`` on the order it wrote itself. That
    is this request's order (the order's ``requestId``), not a sequence behind its orders."""
    region = mrsc_regions[B]
    faults = FaultInjector(region.client, seed=3)

    def arm_on_the_order_put(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "PutItem" and params["Item"]["PK"]["S"].startswith("ORDER#") and not faults.rules:
            faults.add("after_commit", operations={"PutItem"}, limit=1)

    region.client.meta.events.register("provide-client-params.dynamodb", arm_on_the_order_put)
    try:
        placed = region.orders(mrsc(B)).place(key="k1", customer_id="alice", items=ALICE)
    finally:
        faults.detach()
    assert faults.injected["after_commit"] == 1
    assert (placed.created, placed.order["orderId"], placed.order["items"]) == (True, 1, ALICE)
