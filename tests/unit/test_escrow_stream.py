"""The escrow consumer's records: what :func:`counters.streams.escrow.escrow_event` reads, and what
the template's filter (EscrowFunction) lets through, as the local event source mapping applies it."""

from __future__ import annotations

from typing import Any

import pytest

from counters.streams.escrow import RecordArrived, TransferArrived, escrow_event
from devstack.streams import matches
from testkit.escrow import subscription

TID = "7d0f7d8e-0000-5000-8000-000000000001"


def record(event: str, pk: str, sk: str, **image: dict[str, Any]) -> dict[str, Any]:
    keys = {"PK": {"S": pk}, "SK": {"S": sk}}
    return {"eventName": event, "dynamodb": {"Keys": keys, "NewImage": {**keys, **image}, "SequenceNumber": "1"}}


TRANSFER = record(
    "INSERT",
    "RES#r0#XFER",
    TID,
    source={"S": "eu-west-1"},
    target={"S": "us-east-1"},
    quantity={"N": "4"},
    requestId={"S": "req"},
)
RECEIPT = record("INSERT", "RES#r0#XFER", TID + "#IN", source={"S": "eu-west-1"}, target={"S": "us-east-1"}, quantity={"N": "4"})
CONFIRMED = record("MODIFY", "RSV#abc", "RSV@us-east-1", resourceId={"S": "r0"}, status={"S": "CONFIRMED"}, quantity={"N": "1"})
RELEASED = record("MODIFY", "RSV#abc", "RSV@us-east-1", resourceId={"S": "r0"}, status={"S": "RELEASED"}, quantity={"N": "1"})
PENDING = record("INSERT", "RSV#abc", "RSV@us-east-1", resourceId={"S": "r0"}, status={"S": "PENDING"}, quantity={"N": "1"})
SHARE = record("MODIFY", "RES#r0@us-east-1", "SHARE", capacity={"N": "4"}, reserved={"N": "0"}, available={"N": "4"})
REMOVED = {**TRANSFER, "eventName": "REMOVE"}


def passes(rec: dict[str, Any]) -> bool:
    return any(matches(p, rec) for p in subscription().filters)


def test_a_transfer_is_read_with_its_resource_and_target() -> None:
    assert escrow_event(TRANSFER) == TransferArrived("r0", TID, "eu-west-1", "us-east-1")
    assert passes(TRANSFER)


def test_a_confirmed_record_is_read_with_its_region() -> None:
    assert escrow_event(CONFIRMED) == RecordArrived("r0", "abc", "us-east-1")
    assert passes(CONFIRMED)


@pytest.mark.parametrize("rec", [RECEIPT, RELEASED, PENDING, SHARE, REMOVED], ids=["receipt", "released", "pending", "share", "removed"])
def test_receipts_other_statuses_and_other_items_are_nothing_and_filtered_out(rec: dict[str, Any]) -> None:
    assert escrow_event(rec) is None
    assert not passes(rec)


def test_the_mapping_reports_partial_failures_and_bisects() -> None:
    sub = subscription()
    assert sub.report_failures and sub.bisect and sub.on_failure == "EscrowDLQ"
