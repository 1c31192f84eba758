"""The fault injector on both services the layer calls: DynamoDB (reads too) and SQS (moto, in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from counters.core.failures import Failure, classify
from testkit.faults import FaultInjector

NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        yield


@pytest.fixture
def ddb(aws: None) -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1", config=NO_RETRIES)
    client.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.put_item(TableName="t", Item={"PK": {"S": "a"}, "n": {"N": "1"}})
    return client


@pytest.fixture
def sqs(aws: None) -> tuple[Any, str]:
    client = boto3.client("sqs", region_name="us-east-1", config=NO_RETRIES)
    return client, client.create_queue(QueueName="q")["QueueUrl"]


def _failure(call: Any) -> Any:
    with pytest.raises(ClientError) as info:
        call()
    return classify(info.value), info.value


def depth(client: Any, url: str) -> int:
    got = client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    return int(got["ApproximateNumberOfMessages"])


def test_conflict_on_transact_get_items_is_a_cancellation_with_reasons(ddb: Any) -> None:
    injector = FaultInjector(ddb).add("conflict", operations={"TransactGetItems"}, limit=1)
    items = [{"Get": {"TableName": "t", "Key": {"PK": {"S": "a"}}}}, {"Get": {"TableName": "t", "Key": {"PK": {"S": "b"}}}}]
    failure, exc = _failure(lambda: ddb.transact_get_items(TransactItems=items))
    assert exc.response["Error"]["Code"] == "TransactionCanceledException"
    assert len(exc.response["CancellationReasons"]) == 2
    assert failure.kind is Failure.CONFLICT
    assert ddb.transact_get_items(TransactItems=items)["Responses"][0]["Item"]["n"] == {"N": "1"}  # limit 1: then it answers
    assert injector.by_operation[("TransactGetItems", "conflict")] == 1


def test_throttle_on_transact_get_items(ddb: Any) -> None:
    FaultInjector(ddb).add("throttle", operations={"TransactGetItems"}, limit=1)
    failure, _ = _failure(lambda: ddb.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": {"PK": {"S": "a"}}}}]))
    assert failure.kind is Failure.THROTTLED


@pytest.mark.parametrize(
    ("kind", "expected"), [("after_commit", Failure.UNKNOWN), ("unavailable", Failure.UNKNOWN), ("throttle", Failure.THROTTLED)]
)
def test_reads_are_faulted(ddb: Any, kind: str, expected: Failure) -> None:
    injector = FaultInjector(ddb).add(kind, limit=1)
    failure, _ = _failure(lambda: ddb.get_item(TableName="t", Key={"PK": {"S": "a"}}))
    assert failure.kind is expected
    assert ddb.get_item(TableName="t", Key={"PK": {"S": "a"}})["Item"]["n"] == {"N": "1"}
    assert injector.injected[kind] == 1 and injector.calls["GetItem"] == 2


def test_sqs_send_throttled_or_unavailable_queues_nothing(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    injector = FaultInjector(client)
    assert injector.service == "sqs"
    injector.add("throttle", operations={"SendMessage"}, limit=1).add("unavailable", operations={"SendMessage"}, limit=1)
    first, _ = _failure(lambda: client.send_message(QueueUrl=url, MessageBody="m"))
    second, _ = _failure(lambda: client.send_message(QueueUrl=url, MessageBody="m"))
    assert {first.kind, second.kind} == {Failure.THROTTLED, Failure.UNKNOWN}
    assert depth(client, url) == 0
    client.send_message(QueueUrl=url, MessageBody="m")
    assert depth(client, url) == 1


def test_sqs_send_answer_lost_after_the_message_was_queued(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    FaultInjector(client).add("after_commit", operations={"SendMessage"}, limit=1)
    failure, exc = _failure(lambda: client.send_message(QueueUrl=url, MessageBody="m"))
    assert failure.kind is Failure.UNKNOWN and exc.response["Error"]["Code"] == "InternalFailure"
    assert depth(client, url) == 1  # it was sent; only the answer was lost


def test_sqs_resend_queues_the_message_twice(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    FaultInjector(client).add("resend", operations={"SendMessage"}, limit=1)
    client.send_message(QueueUrl=url, MessageBody="m")
    assert depth(client, url) == 2


def test_conflict_is_never_drawn_for_sqs(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    injector = FaultInjector(client).add("conflict")
    client.send_message(QueueUrl=url, MessageBody="m")
    assert injector.injected["conflict"] == 0 and depth(client, url) == 1


def test_detach_stops_injecting(sqs: tuple[Any, str]) -> None:
    client, url = sqs
    injector = FaultInjector(client).add("throttle")
    injector.detach()
    client.send_message(QueueUrl=url, MessageBody="m")
    assert depth(client, url) == 1


# --------------------------------------------------------------------------- delivery faults (the local poller)
class Recorder:
    """A FunctionPool stand-in: records each delivery's message ids and how many ran at once."""

    def __init__(self, hold_until: int = 0) -> None:
        """``hold_until``: each delivery runs until that many deliveries have started (a slow
        function, made slow by a condition rather than a sleep: the overlap is then certain)."""
        import threading

        self.fn = type("Fn", (), {"name": "Recorder"})()
        self.hold_until, self.deliveries, self.running, self.overlapped = hold_until, [], 0, 0
        self._changed = threading.Condition()

    def invoke(self, event: dict[str, Any]) -> tuple[str, Any]:
        with self._changed:
            self.running += 1
            self.overlapped = max(self.overlapped, self.running)
            self.deliveries.append(tuple(r["messageId"] for r in event["Records"]))
            self._changed.notify_all()
            self._changed.wait_for(lambda: len(self.deliveries) >= self.hold_until)
            self.running -= 1
        return "ok", {"batchItemFailures": []}


def test_poller_duplicate_delivery(sqs: tuple[Any, str]) -> None:
    from devstack.sqs import DeliveryFaults, QueuePoller

    client, url = sqs
    client.send_message(QueueUrl=url, MessageBody="m")
    pool = Recorder()
    poller = QueuePoller(client, url, "arn:aws:sqs:us-east-1:123456789012:q", pool, 10, True, faults=DeliveryFaults(duplicate=1.0))  # type: ignore[arg-type]
    assert poller.poll_once(wait_seconds=0) == 1
    assert len(pool.deliveries) == 2 and pool.deliveries[0] == pool.deliveries[1]
    assert poller.duplicated == 1 and depth(client, url) == 0


def test_poller_late_delivery_runs_while_the_first_still_runs(sqs: tuple[Any, str]) -> None:
    import time

    from devstack.sqs import DeliveryFaults, QueuePoller

    client, url = sqs
    client.send_message(QueueUrl=url, MessageBody="m")
    pool = Recorder(hold_until=2)  # the first delivery still runs when the second starts, however slow the machine
    faults = DeliveryFaults(late=1.0, seed=1)
    poller = QueuePoller(client, url, "arn:aws:sqs:us-east-1:123456789012:q", pool, 10, True, faults=faults)  # type: ignore[arg-type]
    poller.start()
    try:
        # waits on conditions, not on a clock: however slow the machine, the redelivery comes (the
        # first delivery outlives its 1 s expiry); one that never does is a hang for pytest-timeout
        while len(pool.deliveries) < 2:
            time.sleep(0.05)
        faults.late = 0.0  # stop expiring, let both deliveries finish and delete
        while pool.running or depth(client, url):
            time.sleep(0.05)
    finally:
        poller.stop()
    assert len(pool.deliveries) >= 2 and len(set(pool.deliveries)) == 1  # the same message, delivered again
    assert pool.overlapped >= 2 and poller.expired >= 1  # a redelivery ran while the first delivery still ran


def test_mrsc_unsupported_refuses_the_transaction_apis_and_ttl_and_nothing_else(ddb: Any) -> None:
    """The local stack's MRSC Regions: what the service refuses on an MRSC table, before sending."""
    injector = FaultInjector(ddb).add("mrsc_unsupported", rate=1.0)
    write = [{"Put": {"TableName": "t", "Item": {"PK": {"S": "x"}}}}]
    failure, error = _failure(lambda: ddb.transact_write_items(TransactItems=write))
    assert error.response["Error"]["Code"] == "ValidationException"
    assert "not supported" in error.response["Error"]["Message"]
    _failure(lambda: ddb.transact_get_items(TransactItems=[{"Get": {"TableName": "t", "Key": {"PK": {"S": "a"}}}}]))
    _failure(lambda: ddb.update_time_to_live(TableName="t", TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}))
    ddb.put_item(TableName="t", Item={"PK": {"S": "y"}})  # single-item calls go through
    assert ddb.get_item(TableName="t", Key={"PK": {"S": "y"}})["Item"]
    assert "Item" not in ddb.get_item(TableName="t", Key={"PK": {"S": "x"}})  # the refused transaction wrote nothing
    assert injector.injected["mrsc_unsupported"] == 3


def test_replicated_conflict_fails_single_item_writes_only_and_is_retryable(ddb: Any) -> None:
    injector = FaultInjector(ddb).add("replicated_conflict", rate=1.0)
    assert ddb.get_item(TableName="t", Key={"PK": {"S": "a"}})["Item"]  # reads are not writes
    failure, error = _failure(
        lambda: ddb.update_item(
            TableName="t", Key={"PK": {"S": "a"}}, UpdateExpression="SET n = :n", ExpressionAttributeValues={":n": {"N": "5"}}
        )
    )
    assert error.response["Error"]["Code"] == "ReplicatedWriteConflictException"
    assert failure.kind is Failure.CONFLICT
    assert ddb.get_item(TableName="t", Key={"PK": {"S": "a"}})["Item"]["n"] == {"N": "1"}  # not applied
    assert injector.injected["replicated_conflict"] == 1


def test_late_answers_500_and_lands_after_the_threads_next_call(ddb: Any) -> None:
    faults = FaultInjector(ddb).add("late", operations={"UpdateItem"}, limit=1)
    update = {
        "TableName": "t",
        "Key": {"PK": {"S": "a"}},
        "UpdateExpression": "ADD n :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    failure, _ = _failure(lambda: ddb.update_item(**update))
    assert failure.kind is Failure.UNKNOWN  # the caller cannot know
    read = {"TableName": "t", "Key": {"PK": {"S": "a"}}, "ConsistentRead": True}
    assert ddb.get_item(**read)["Item"]["n"] == {"N": "1"}  # not landed when this read ran...
    assert ddb.get_item(**read)["Item"]["n"] == {"N": "2"}  # ...but right after it, once
    assert ddb.get_item(**read)["Item"]["n"] == {"N": "2"} and faults.injected["late"] == 1


def test_late_lands_at_detach_when_the_thread_calls_no_more(ddb: Any) -> None:
    faults = FaultInjector(ddb).add("late", operations={"PutItem"}, limit=1)
    _failure(lambda: ddb.put_item(TableName="t", Item={"PK": {"S": "b"}}))
    faults.detach()
    assert "Item" in ddb.get_item(TableName="t", Key={"PK": {"S": "b"}}, ConsistentRead=True)
