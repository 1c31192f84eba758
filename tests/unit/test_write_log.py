"""The write log (testkit/write_log.py): what a Region's function workers wrote, as the HTTP MRSC
proof's writer check reads it. moto stands in for DynamoDB (fast; nothing here is about concurrency):
every attempt the store took is logged once, faults or not, and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.faults import FaultInjector
from testkit.regions import Mode, WriterCheck
from testkit.write_log import WriteLog, install, written
from tests.conftest import moto_table

TABLE = "tally-write-log"


def s(value: str) -> dict[str, str]:
    return {"S": value}


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    with moto_table(monkeypatch, TABLE) as made:  # a plain client: the layer's refuses calls outside its engine
        install(made, tmp_path, "Fn")
        yield made, WriteLog([tmp_path], TABLE)


def test_every_committed_write_is_logged_with_its_region_key_and_put_item(logged: Any) -> None:
    made, log = logged
    made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("META"), "authorId": s("a")})
    made.update_item(
        TableName=TABLE,
        Key={"PK": s("POST#p"), "SK": s("TALLY#us-east-1")},
        UpdateExpression="ADD t :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    made.get_item(TableName=TABLE, Key={"PK": s("POST#p"), "SK": s("META")})  # a read: not logged
    made.delete_item(TableName=TABLE, Key={"PK": s("POST#p"), "SK": s("META")})
    got = log.drain()
    assert [(w.region, w.operation, w.key["SK"]["S"]) for w in got] == [
        ("us-east-1", "PutItem", "META"),
        ("us-east-1", "UpdateItem", "TALLY#us-east-1"),
        ("us-east-1", "DeleteItem", "META"),
    ]
    assert got[0].item is not None and got[0].item["authorId"] == s("a")
    assert log.drain() == []  # read once


def test_a_refused_write_is_not_logged(logged: Any) -> None:
    made, log = logged
    made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("META")})
    with pytest.raises(made.exceptions.ConditionalCheckFailedException):
        made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("META")}, ConditionExpression="attribute_not_exists(PK)")
    assert len(log.drain()) == 1


@pytest.mark.parametrize(("kind", "times"), [("after_commit", 1), ("resend", 2), ("unavailable", 0), ("replicated_conflict", 0)])
def test_faults_do_not_hide_or_invent_a_write(logged: Any, kind: str, times: int) -> None:
    """A write whose answer is replaced by a 500 was taken (logged); one botocore sends twice was
    taken twice; one cancelled before sending was not."""
    made, log = logged
    faults = FaultInjector(made, seed=1)
    faults.add(kind, operations={"PutItem"}, rate=1.0, limit=1)
    try:
        made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("META")})
    except made.exceptions.ClientError:
        pass
    finally:
        faults.detach()
    assert len(log.drain()) == times


def test_the_writer_check_sees_a_write_against_its_mrsc_rule(logged: Any) -> None:
    made, log = logged
    check = WriterCheck(Mode.MRSC, ("eu-west-1", "us-east-1", "us-west-2"))
    made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("TALLY#us-east-1")})  # its own Region's tally
    made.put_item(TableName=TABLE, Item={"PK": s("POST#p"), "SK": s("TALLY#eu-west-1")})  # another Region's
    made.put_item(TableName=TABLE, Item={"PK": s("WIDGET#1"), "SK": s("META")})  # no family
    assert log.check(check) == 3
    assert len(check.violations) == 2
    assert "us-east-1 wrote like tally of a Region" in check.violations[0] and "a per-Region item of eu-west-1" in check.violations[0]
    assert "no item family declares" in check.violations[1]


def test_other_tables_and_partial_lines_are_left_for_later(tmp_path: Path) -> None:
    line = '{"region": "r", "table": "%s", "operation": "PutItem", "key": {}, "item": null}\n'
    path = tmp_path / "Fn-1.jsonl"
    path.write_text(line % "other" + line % TABLE + (line % TABLE)[:20])
    log = WriteLog([tmp_path], TABLE)
    assert len(log.drain()) == 1
    with open(path, "a") as out:
        out.write((line % TABLE)[20:])
    assert len(log.drain()) == 1


def test_batches_leave_out_their_unprocessed_items_and_transactions_list_every_write() -> None:
    put = {"PutRequest": {"Item": {"PK": s("A"), "SK": s("1"), "x": s("y")}}}
    delete = {"DeleteRequest": {"Key": {"PK": s("B"), "SK": s("2")}}}
    got = written("BatchWriteItem", {"RequestItems": {TABLE: [put, delete]}}, {"UnprocessedItems": {TABLE: [delete]}})
    assert got == [(TABLE, {"PK": s("A"), "SK": s("1")}, put["PutRequest"]["Item"])]
    actions = [
        {"Put": {"TableName": TABLE, "Item": {"PK": s("A"), "SK": s("1")}}},
        {"Update": {"TableName": TABLE, "Key": {"PK": s("B"), "SK": s("2")}}},
        {"ConditionCheck": {"TableName": TABLE, "Key": {"PK": s("C"), "SK": s("3")}}},
    ]
    assert [k["PK"]["S"] for _, k, _ in written("TransactWriteItems", {"TransactItems": actions}, {})] == ["A", "B"]
