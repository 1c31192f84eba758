"""The orders feature's primitives read their Region policy's capabilities, never the mode (issue 25,
item 3): a [`Sequence`][counters.primitives.sequence.Sequence] and a
[`Pointer`][counters.primitives.pointer.Pointer] built with a policy, on moto (requests only: what
is written where; the races are test_orders_regions.py's, on DynamoDB Local)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import boto3
import pytest
from moto import mock_aws

from counters.core import client as dynamo
from counters.core.errors import UnsupportedInMode
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.pointer import Pointer
from counters.primitives.sequence import Sequence
from counters.services.orders import order_policy
from counters.store.expr import Put, Transaction
from devstack.dynamodb_local import create_table
from devstack.template import read_stack

A, B, C = "eu-west-1", "us-east-1", "us-west-2"
TABLE = "policy-orders-unit"


@dataclass
class Calls:
    """Every write operation the client sent, with the PKs it wrote."""

    sent: list[tuple[str, list[str]]] = field(default_factory=list)

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            bodies = [next(iter(action.values())) for action in params["TransactItems"]]
            pks = [(body.get("Item") or body["Key"])["PK"]["S"] for body in bodies]
            self.sent.append((model.name, pks))
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
            self.sent.append((model.name, [(params.get("Item") or params["Key"])["PK"]["S"]]))


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Calls]]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)  # moto, not DynamoDB Local
    with mock_aws():
        dynamo.reset_client()
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, read_stack(TABLE))
        calls = Calls()
        client.meta.events.register("provide-client-params.dynamodb", calls)
        yield client, calls
    dynamo.reset_client()


def mrec(region: str) -> RegionPolicy:
    return order_policy(Topology(GlobalTableMode.MREC, region, (A, B)))


def mrsc(region: str) -> RegionPolicy:
    return order_policy(Topology(GlobalTableMode.MRSC, region, (A, B, C)))


class Action(Enum):
    ITEM = "item"


def items_for(value: int) -> Transaction[Enum]:
    tx: Transaction[Enum] = Transaction()
    return tx.put(Action.ITEM, Put(TABLE, item={"PK": f"ITEM#{value}", "SK": "META"}))


def test_mrec_policy_a_fast_sequence_and_a_pointer_write_and_read_their_regions_items(ddb: tuple[Any, Calls]) -> None:
    client, calls = ddb
    seqs = {r: Sequence(TABLE, "S", dynamodb=client, policy=mrec(r)) for r in (A, B)}
    assert [seqs[r].next().value for r in (A, B, A, B)] == [1, 2, 3, 4]  # strided: A odd, B even
    pointers = {r: Pointer(TABLE, "P", dynamodb=client, policy=mrec(r)) for r in (A, B)}
    pointers[A].advance(9)
    pointers[B].advance(4)
    assert [p.read()[0] for p in pointers.values()] == [9, 9]  # the max over every Region's item (one moto database here)
    assert [pks for _op, pks in calls.sent] == [["SEQ#S#" + r] for r in (A, B, A, B)] + [[f"POINTER#P#{A}"], [f"POINTER#P#{B}"]]


def test_one_region_and_mrsc_policies_use_the_one_shared_item(ddb: tuple[Any, Calls]) -> None:
    client, calls = ddb
    for policy in (ONE_REGION_POLICY, mrsc(A), mrsc(B)):
        Sequence(TABLE, "S", dynamodb=client, policy=policy).next()
        Pointer(TABLE, "P", dynamodb=client, policy=policy).advance(1)
    assert {pk for _op, pks in calls.sent for pk in pks} == {"SEQ#S", "POINTER#P"}
    assert Sequence(TABLE, "S", dynamodb=client, policy=mrsc(C)).current()[0] == 3


def test_without_transactions_a_fast_claim_writes_its_items_one_by_one(ddb: tuple[Any, Calls]) -> None:
    """MRSC has no TransactWriteItems: the policy's ``transactions`` is off, and the caller's items
    are single writes. (Fails if the claim sends a transaction whatever the policy.)"""
    client, calls = ddb
    claim = Sequence(TABLE, "S", dynamodb=client, policy=mrsc(A)).claim(items_for)
    assert (claim.result.outcome.value, claim.value) == ("applied", 1)
    assert [op for op, _pks in calls.sent] == ["UpdateItem", "PutItem"]
    claim = Sequence(TABLE, "S", dynamodb=client).claim(items_for)  # one Region: one transaction for the items
    assert [op for op, _pks in calls.sent[2:]] == ["UpdateItem", "TransactWriteItems"]


def test_gapless_is_refused_by_the_policys_rows_before_anything_is_written(ddb: tuple[Any, Calls]) -> None:
    client, calls = ddb
    home_a = order_policy(Topology(GlobalTableMode.MREC, B, (A, B), A))
    for policy, match in ((mrsc(A), "gapless sequence is not available on an MRSC global table"), (home_a, f"home Region {A}")):
        with pytest.raises(UnsupportedInMode, match=match):
            Sequence(TABLE, "S", mode="gapless", dynamodb=client, policy=policy).next()
    assert calls.sent == []
