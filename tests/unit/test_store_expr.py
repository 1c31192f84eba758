"""The request builder (counters.store.expr): placeholders, clauses, named transaction actions."""

from __future__ import annotations

from enum import Enum

import pytest

from counters.core.failures import Classified, Failure
from counters.store.expr import Check, Delete, Get, Path, Put, Query, Transaction, Update, if_not_exists, old_item, plus


def test_an_update_names_every_attribute_and_value_once() -> None:
    mode = Path("mode")
    params = (
        Update("T", {"PK": "POST#p", "SK": "META"})
        .set("mode", "hot")
        .set("n", plus(if_not_exists("n", 0), 1))
        .add("modeEpoch", 1)
        .remove("old")
        .when(Path("PK").exists() & (mode.missing() | (mode != "hot")))
        .returning("ALL_NEW")
        .params()
    )
    assert params["UpdateExpression"] == "SET #mode = :v0, #n = if_not_exists(#n, :v1) + :v2 ADD #modeEpoch :v3 REMOVE #old"
    assert params["ConditionExpression"] == "(attribute_exists(#PK) AND (attribute_not_exists(#mode) OR #mode <> :v4))"
    assert params["ExpressionAttributeNames"] == {"#mode": "mode", "#n": "n", "#modeEpoch": "modeEpoch", "#old": "old", "#PK": "PK"}
    assert params["ExpressionAttributeValues"][":v4"] == {"S": "hot"}
    assert params["Key"] == {"PK": {"S": "POST#p"}, "SK": {"S": "META"}}
    assert params["ReturnValues"] == "ALL_NEW" and params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_paths_into_maps_and_odd_names_get_safe_placeholders() -> None:
    params = Update("T", {"PK": "x"}).set(Path("aggSeq", "S3"), "9").set("a-b", 1).params()
    assert params["UpdateExpression"] == "SET #aggSeq.#S3 = :v0, #n2 = :v1"
    assert params["ExpressionAttributeNames"]["#n2"] == "a-b"


def test_requests_without_a_condition_carry_no_condition_fields() -> None:
    put = Put("T", item={"PK": "a", "v": 1}).params()
    assert set(put) == {"TableName", "Item"}
    get = Get("T", {"PK": "a"}).project("mode", "spread").strongly().params()
    assert get["ProjectionExpression"] == "#mode, #spread" and get["ConsistentRead"] is True
    assert "ConditionExpression" not in Delete("T", key={"PK": "a"}).params()
    with pytest.raises(ValueError):
        Check("T", key={"PK": "a"}).body()
    with pytest.raises(ValueError):
        Update("T", {"PK": "a"}).params()


def test_a_query_renders_its_key_filter_and_start() -> None:
    q = Query("T", Path("PK") == "POST#p", limit=5, start={"PK": "POST#p", "SK": "LIKE#a"}, forward=False)
    params = q.where(Path("liked") != False).params()  # noqa: E712 - builds a condition
    assert params["KeyConditionExpression"] == "#PK = :v0" and params["FilterExpression"] == "#liked <> :v1"
    assert params["ExclusiveStartKey"] == {"PK": {"S": "POST#p"}, "SK": {"S": "LIKE#a"}} and params["ScanIndexForward"] is False


class Act(Enum):
    STATE = "state"
    PARENT = "parent"


def test_a_transaction_reads_cancellation_reasons_by_name() -> None:
    tx: Transaction[Act] = Transaction()
    tx.update(Act.STATE, Update("T", {"PK": "a"}).set("x", 1).when(Path("PK").missing()))
    tx.check(Act.PARENT, Check("T", key={"PK": "p"}).when(Path("PK").exists()))
    assert [list(i) for i in tx.items()] == [["Update"], ["ConditionCheck"]]
    failure = Classified(
        Failure.CONDITION, "ConditionalCheckFailed", ({"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": {"n": {"N": "2"}}})
    )
    reasons = tx.cancellation(failure)
    assert not reasons.failed(Act.STATE) and reasons.failed(Act.PARENT)
    assert reasons.old(Act.PARENT) == {"n": 2} and reasons.old(Act.STATE) is None
    with pytest.raises(ValueError):
        tx.check(Act.PARENT, Check("T", key={"PK": "p"}).when(Path("PK").exists()))


def test_deletes_under_one_name_fail_together() -> None:
    tx: Transaction[Act] = Transaction()
    tx.update(Act.STATE, Update("T", {"PK": "a"}).set("x", 1))
    tx.delete_each(Act.PARENT, [Delete("T", key={"PK": f"e{i}"}).when(Path("PK").exists()) for i in range(3)])
    assert [list(i) for i in tx.items()] == [["Update"], ["Delete"], ["Delete"], ["Delete"]] and len(tx) == 4
    none = {"Code": "None"}
    failure = Classified(Failure.CONDITION, "ConditionalCheckFailed", (none, none, {"Code": "ConditionalCheckFailed"}, none))
    reasons = tx.cancellation(failure)
    assert reasons.failed(Act.PARENT) and not reasons.failed(Act.STATE)
    assert not tx.cancellation(Classified(Failure.CONDITION, "ConditionalCheckFailed", (none,) * 4)).any_failed()
    with pytest.raises(ValueError):
        tx.delete_each(Act.PARENT, [])


def test_old_item_of_a_single_write() -> None:
    failure = Classified(
        Failure.CONDITION, "ConditionalCheckFailedException", ({"Code": "ConditionalCheckFailed", "Item": {"v": {"S": "x"}}},)
    )
    assert old_item(failure) == {"v": "x"} and old_item(None) is None
