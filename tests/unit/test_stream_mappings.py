"""The local stream poller runs each DynamoDB event source mapping with the template's settings."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.streams import StreamPoller, Subscription, subscriptions
from devstack.template import load

TEMPLATE = load()
MAPPINGS = {
    name: event["Properties"]
    for name, res in TEMPLATE["Resources"].items()
    if res["Type"] == "AWS::Serverless::Function"
    for event in (res["Properties"].get("Events") or {}).values()
    if event["Type"] == "DynamoDB"
}


def test_every_stream_mapping_has_a_subscription() -> None:
    assert MAPPINGS and sorted(s.function for s in subscriptions()) == sorted(MAPPINGS)


@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_the_pollers_settings_are_the_templates(name: str) -> None:
    props = MAPPINGS[name]
    (sub,) = [s for s in subscriptions() if s.function == name]
    assert sub.batch_size == props["BatchSize"]
    assert sub.batching_window == props["MaximumBatchingWindowInSeconds"]
    assert sub.max_retries == props["MaximumRetryAttempts"]
    assert sub.bisect is props["BisectBatchOnFunctionError"]
    assert sub.max_record_age == props["MaximumRecordAgeInSeconds"]
    assert sub.report_failures is ("ReportBatchItemFailures" in props["FunctionResponseTypes"])
    assert sub.starting_position == props["StartingPosition"]
    assert sub.on_failure == props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    assert TEMPLATE["Resources"][sub.on_failure]["Type"] == "AWS::SQS::Queue"


def _records(n: int) -> list[dict[str, Any]]:
    return [{"dynamodb": {"SequenceNumber": str(100 + i), "ApproximateCreationDateTime": 0}} for i in range(n)]


class FakeSqs:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send_message(self, QueueUrl: str, MessageBody: str) -> None:  # noqa: N803 - boto3's names
        self.sent.append((QueueUrl, MessageBody))


def _poller(sub: Subscription, invoke: Any, sqs: FakeSqs) -> StreamPoller:
    return StreamPoller("t", "http://127.0.0.1:9", {sub.function: invoke}, [sub], destinations={"DLQ": "url-of-dlq"}, sqs=sqs)


def test_a_failing_batch_is_bisected_and_only_the_poison_record_goes_to_the_on_failure_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("devstack.streams.time.sleep", lambda _s: None)
    calls: list[list[str]] = []

    def invoke(event: dict[str, Any]) -> tuple[str, Any]:
        seqs = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        calls.append(seqs)
        return ("error", "boom") if "102" in seqs else ("ok", None)

    sqs = FakeSqs()
    sub = Subscription("F", batch_size=4, max_retries=2, bisect=True, on_failure="DLQ")
    poller = _poller(sub, invoke, sqs)
    assert poller._deliver(sub, _records(4), "shard-1", "arn") == 4
    assert ["100", "101"] in calls and ["103"] in calls  # the good halves went through
    # the poison record: the first attempt and MaximumRetryAttempts (2) retries, the bisections counted
    assert sum("102" in c for c in calls) == 3 and calls[-2:] == [["102"], ["103"]]
    ((url, body),) = sqs.sent
    assert url == "url-of-dlq" and '"startSequenceNumber": "102"' in body and '"batchSize": 1' in body


def test_without_bisect_the_whole_batch_is_retried_then_sent_to_on_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("devstack.streams.time.sleep", lambda _s: None)
    calls: list[int] = []
    sqs = FakeSqs()
    sub = Subscription("F", batch_size=3, max_retries=5, bisect=False, on_failure="DLQ")
    poller = _poller(sub, lambda event: (calls.append(len(event["Records"])), ("error", "boom"))[1], sqs)
    assert poller._deliver(sub, _records(3), "shard-1", "arn") == 3
    assert calls == [3] * 6  # the first attempt and MaximumRetryAttempts (5) retries
    assert len(sqs.sent) == 1 and '"batchSize": 3' in sqs.sent[0][1]


def _like_record(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = {"Keys": {"PK": {"S": "POST#p"}, "SK": {"S": "LIKE#3#USER#u"}}}
    if old is not None:
        data["OldImage"] = old
    if new is not None:
        data["NewImage"] = new
    return {"eventName": event, "dynamodb": data}


def test_the_aggregator_receives_a_regions_like_replaced_from_another_region_even_with_delta_zero() -> None:
    """On a global table the −1 for a Region's liked version replaced by another Region's version rides
    on a record whose new delta may be 0 (the other Region counted nothing): the filter must pass it."""
    from devstack.streams import matches

    (sub,) = [s for s in subscriptions() if s.function == "LikeAggregatorFunction"]
    passes = lambda record: any(matches(p, record) for p in sub.filters)  # noqa: E731
    mine_liked = {"liked": {"BOOL": True}, "writerRegion": {"S": "eu-west-1"}, "delta": {"N": "1"}}
    theirs_unliked = {"liked": {"BOOL": False}, "writerRegion": {"S": "us-east-1"}, "delta": {"N": "0"}}
    assert passes(_like_record("MODIFY", mine_liked, theirs_unliked))
    assert passes(_like_record("REMOVE", mine_liked, None))
    # one Region: no writerRegion, a tombstone that changed nothing stays filtered out
    assert not passes(
        _like_record("MODIFY", {"liked": {"BOOL": True}, "delta": {"N": "1"}}, {"liked": {"BOOL": False}, "delta": {"N": "0"}})
    )


def test_every_creation_of_a_like_item_reaches_the_aggregator_whatever_its_delta() -> None:
    """A stale writer on a grown post can create a user's second item (docs/DESIGN.md "A spread that
    grows"); every creation is examined, a tombstone's too (delta 0: a stale unlike below a newer
    like), while a change that counted nothing and a removal (a merge's deletion) stay filtered out."""
    from counters.streams import hot_change, like_created
    from devstack.streams import matches

    (sub,) = [s for s in subscriptions() if s.function == "LikeAggregatorFunction"]
    passes = lambda record: any(matches(p, record) for p in sub.filters)  # noqa: E731

    def record(event: str, new: dict[str, Any] | None, pk: str = "POST#p#S11") -> dict[str, Any]:
        data: dict[str, Any] = {"Keys": {"PK": {"S": pk}, "SK": {"S": "LIKE#USER#u"}}, "SequenceNumber": "7"}
        if new is not None:
            data["NewImage"] = new
        return {"eventName": event, "dynamodb": data}

    tombstone = {"liked": {"BOOL": False}, "delta": {"N": "0"}}
    liked = {"liked": {"BOOL": True}, "delta": {"N": "1"}}
    for new in (tombstone, liked):
        assert passes(record("INSERT", new))
        assert like_created(record("INSERT", new)) == ("p", "S11", "u", "7")
    assert hot_change(record("INSERT", tombstone)) is None  # counts nothing; examined only
    assert not passes(record("MODIFY", tombstone)) and like_created(record("MODIFY", liked)) is None
    assert not passes(record("REMOVE", None)) and like_created(record("REMOVE", None)) is None
    # unfiltered (the local stack, a misconfiguration): the handler's own checks drop the rest
    assert like_created(record("INSERT", liked, pk="POST#p")) is None  # seed 01's layout: never grows
    probe = {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "POST#p#S1"}, "SK": {"S": "PROBE"}}, "SequenceNumber": "8"}}
    assert like_created(probe) is None
