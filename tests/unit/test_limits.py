"""The local model of DynamoDB's limits (testkit.limits): buckets, charges, errors, conflicts.

The mechanics run on moto (no network) with an injected clock, so every number is exact; the
concurrency test runs two real threads against DynamoDB Local (the session fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from counters.core.failures import Failure, classify
from testkit.limits import LimitModel, item_size

NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1", config=NO_RETRIES)
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock()


def model(ddb: Any, clock: Clock, **kwargs: Any) -> LimitModel:
    # scale 100: 10 WCU/s and 30 RCU/s per partition key, 1 s of burst
    return LimitModel(ddb, scale=100, clock=clock, **kwargs)


def put(ddb: Any, pk: str, sk: str, **extra: Any) -> dict[str, Any]:
    return ddb.put_item(TableName="t", Item={"PK": {"S": pk}, "SK": {"S": sk}}, **extra)


def like(pk: str, sk: str) -> list[dict[str, Any]]:
    """Seed 01's like: the child Put and the tally ADD, both on one partition key."""
    return [
        {"Put": {"TableName": "t", "Item": {"PK": {"S": pk}, "SK": {"S": sk}}, "ConditionExpression": "attribute_not_exists(SK)"}},
        {"Update": {"TableName": "t", "Key": {"PK": {"S": pk}, "SK": {"S": "META"}}, "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}},
    ]  # fmt: skip


def failure(call: Any) -> tuple[Any, ClientError]:
    with pytest.raises(ClientError) as info:
        call()
    return classify(info.value), info.value


def test_the_bucket_refills_at_the_scaled_rate(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock)
    partition = limits.partition("t", {"S": "hot"})
    for i in range(10):  # the burst: 1 s of 10 WCU/s
        put(ddb, "hot", f"s{i}")
    failed, _ = failure(lambda: put(ddb, "hot", "over"))
    assert failed.kind is Failure.THROTTLED
    put(ddb, "cold", "s0")  # another partition key has its own bucket
    clock.now += 0.5  # half a second refills 5 WCU
    assert limits.tokens(partition) == pytest.approx(5.0)
    for i in range(5):
        put(ddb, "hot", f"t{i}")
    assert failure(lambda: put(ddb, "hot", "over2"))[0].kind is Failure.THROTTLED
    clock.now += 60  # never more than the burst
    assert limits.tokens(partition) == pytest.approx(10.0)
    assert limits.consumed()[partition]["wcu"] == 15
    assert limits.throttles == {"PutItem": 2}
    assert limits.calls["PutItem"] == 18


def test_a_single_item_throttle_is_the_services_hot_partition_error(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock, burst_seconds=0.1)  # 1 WCU of burst
    put(ddb, "hot", "a")
    failed, error = failure(lambda: put(ddb, "hot", "b"))
    assert error.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error.response["ThrottlingReasons"][0]["reason"] == "TableWriteKeyRangeThroughputExceeded"
    assert isinstance(error, ddb.exceptions.ProvisionedThroughputExceededException)
    assert failed.kind is Failure.THROTTLED
    assert ddb.get_item(TableName="t", Key={"PK": {"S": "hot"}, "SK": {"S": "b"}}).get("Item") is None  # never sent
    assert limits.throttles["PutItem"] == 1


def test_a_transaction_is_charged_twice_per_item_and_by_the_kb(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock)
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u1"))
    assert limits.total("wcu") == 4  # 2 items x 1 KB x 2
    big = {"PK": {"S": "big"}, "SK": {"S": "x"}, "body": {"S": "x" * 1500}}
    assert 1024 < item_size(big) <= 2048
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": big}}])
    assert limits.consumed()[limits.partition("t", {"S": "big"})]["wcu"] == 4  # 2 KB x 2
    put(ddb, "plain", "x")
    assert limits.consumed()[limits.partition("t", {"S": "plain"})]["wcu"] == 1  # not transactional: 1x


def test_a_transaction_over_the_rate_is_cancelled_with_throttling_error(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock, transaction_ms=0)  # no hold: capacity only
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u1"))  # 10 -> 6 WCU
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u2"))  # 6 -> 2
    failed, error = failure(lambda: ddb.transact_write_items(TransactItems=like("post", "LIKE#u3")))
    assert error.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in error.response["CancellationReasons"]] == ["ThrottlingError", "ThrottlingError"]
    assert failed.kind is Failure.THROTTLED
    assert limits.total("wcu") == 8  # the cancelled one is not charged
    clock.now += 0.2  # +2 WCU
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u3"))
    assert limits.total("wcu") == 12
    assert limits.throttles == {"TransactWriteItems": 1}


def test_a_failed_condition_still_consumes(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock)
    put(ddb, "p", "a")
    failed, _ = failure(lambda: put(ddb, "p", "a", ConditionExpression="attribute_not_exists(SK)"))
    assert failed.kind is Failure.CONDITION
    assert limits.total("wcu") == 2


def test_reads_are_charged_by_consistency_and_by_what_they_return(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock)
    for i in range(3):
        ddb.put_item(TableName="t", Item={"PK": {"S": "r"}, "SK": {"S": f"s{i}"}, "blob": {"S": "x" * 3000}})
    partition = limits.partition("t", {"S": "r"})
    key = {"PK": {"S": "r"}, "SK": {"S": "s0"}}
    ddb.get_item(TableName="t", Key=key, ConsistentRead=True)
    ddb.get_item(TableName="t", Key=key)
    assert limits.consumed()[partition]["rcu"] == 1.5
    # A Query reads ~9 KB: 3 x 4 KB units strongly consistent, charged 1 before and 2 after
    ddb.query(
        TableName="t",
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": "PK"},
        ExpressionAttributeValues={":pk": {"S": "r"}},
        ConsistentRead=True,
    )
    assert limits.consumed()[partition]["rcu"] == 4.5
    ddb.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": key}}])
    assert limits.consumed()[partition]["rcu"] == 6.5  # transactional: 2x


def test_a_transaction_holds_its_items_for_the_scaled_duration(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock, transaction_ms=5)  # held 5 ms x 100 = 0.5 s
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u1"))
    failed, error = failure(lambda: ddb.transact_write_items(TransactItems=like("post", "LIKE#u2")))
    assert failed.kind is Failure.CONFLICT
    assert [r["Code"] for r in error.response["CancellationReasons"]] == ["None", "TransactionConflict"]  # META only
    failed, error = failure(lambda: ddb.update_item(
        TableName="t", Key={"PK": {"S": "post"}, "SK": {"S": "META"}}, UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}}))  # fmt: skip
    assert error.response["Error"]["Code"] == "TransactionConflictException"
    assert failed.kind is Failure.CONFLICT
    put(ddb, "post", "LIKE#other")  # an item the transaction does not touch
    clock.now += 0.5
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u2"))
    assert limits.conflicts == {"TransactWriteItems": 1, "UpdateItem": 1}


def test_a_transactional_read_conflicts_with_an_ongoing_write(ddb: Any, clock: Clock) -> None:
    limits = model(ddb, clock, transaction_ms=5)
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u1"))
    key = {"PK": {"S": "post"}, "SK": {"S": "META"}}
    failed, error = failure(lambda: ddb.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": key}}]))
    assert failed.kind is Failure.CONFLICT
    ddb.get_item(TableName="t", Key=key)  # a plain read never conflicts
    assert limits.conflicts == {"TransactGetItems": 1}


# --------------------------------------------------------------------------- DynamoDB Local
def test_without_a_hold_nothing_conflicts_and_a_refused_conflict_can_be_free(ddb: Any, clock: Clock) -> None:
    capacity_only = model(ddb, clock, transaction_ms=0, hold_during_call=False)
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u1"))
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u2"))
    assert capacity_only.conflicts == {}
    capacity_only.detach()
    free = model(ddb, clock, conflicts_consume=False)
    ddb.transact_write_items(TransactItems=like("post", "LIKE#u3"))
    assert failure(lambda: ddb.transact_write_items(TransactItems=like("post", "LIKE#u4")))[0].kind is Failure.CONFLICT
    assert free.total("wcu") == 4  # only the one that committed
