"""A stream reader recovers from a refused iterator as a Lambda mapping goes on (issue 28, item 7).

DynamoDB Local answered TrimmedDataAccessException to the stream reader of a table created while
another stack created its own, for every read on that iterator: the reader never recovered and hot
posts never counted. Both readers (devstack's StreamPoller, testkit's StreamReader) now describe the
stream again and take a fresh iterator: after the last record read while the shard still holds it,
else from the shard's oldest record. A stubbed Streams client plays the stream.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.streams import RECOVERIES_PER_DRAIN, StreamPoller, Subscription, fresh_iterator
from testkit.stream_reader import StreamReader

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026-11-27T00:00:00.000"


class TrimmedDataAccessException(Exception):
    pass


class ExpiredIteratorException(Exception):
    pass


class Exceptions:
    TrimmedDataAccessException = TrimmedDataAccessException
    ExpiredIteratorException = ExpiredIteratorException


class FakeStreams:
    """One shard holding ``records`` (sequence numbers "1", "2", ...), of which those before
    ``horizon`` are trimmed. An iterator is ``it:<position>#<n>``; iterators in ``refused`` raise
    ``error`` on every read (DynamoDB Local's stuck iterator)."""

    exceptions = Exceptions

    def __init__(self, n: int, *, shards: tuple[str, ...] = ("s1",)) -> None:
        self.records = [str(i) for i in range(1, n + 1)]
        self.horizon = 0
        self.shards = shards
        self.refused: set[str] = set()
        self.error: type[Exception] = TrimmedDataAccessException
        self.refuse_new = 0  # the next n iterators handed out are refused too
        self.handed: list[tuple[str, str | None]] = []  # (type, sequence number) of each GetShardIterator
        self._count = 0

    def add(self, n: int) -> None:
        start = len(self.records)
        self.records += [str(start + i) for i in range(1, n + 1)]

    def _iterator(self, position: int) -> str:
        self._count += 1
        iterator = f"it:{position}#{self._count}"
        if self.refuse_new:
            self.refuse_new -= 1
            self.refused.add(iterator)
        return iterator

    def list_streams(self, TableName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return {"Streams": [{"StreamArn": ARN}]}

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:  # noqa: N803
        return {"StreamDescription": {"Shards": [{"ShardId": s} for s in self.shards]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str, SequenceNumber: str | None = None) -> dict[str, Any]:  # noqa: N803
        self.handed.append((ShardIteratorType, SequenceNumber))
        if ShardIteratorType == "AFTER_SEQUENCE_NUMBER":
            index = self.records.index(str(SequenceNumber))
            if index < self.horizon:
                raise TrimmedDataAccessException("the sequence number is before the trim horizon")
            return {"ShardIterator": self._iterator(index + 1)}
        if ShardIteratorType == "LATEST":
            return {"ShardIterator": self._iterator(len(self.records))}
        return {"ShardIterator": self._iterator(self.horizon)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        if ShardIterator in self.refused:
            raise self.error("refused")
        position = max(int(ShardIterator[3:].split("#")[0]), self.horizon)
        page = self.records[position : position + Limit]
        return {
            "Records": [{"eventName": "INSERT", "dynamodb": {"SequenceNumber": s, "Keys": {}}} for s in page],
            "NextShardIterator": self._iterator(position + len(page)),
        }


def poller(streams: FakeStreams) -> tuple[StreamPoller, list[str]]:
    delivered: list[str] = []

    def invoke(event: dict[str, Any]) -> tuple[str, Any]:
        delivered.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])
        return "ok", None

    made = StreamPoller("t", "http://127.0.0.1:9", {"F": invoke}, [Subscription("F")])
    made.streams = streams
    made.stream_arn = lambda: ARN  # type: ignore[method-assign]  # no DynamoDB behind the stub
    return made, delivered


def test_the_poller_recovers_from_an_iterator_refused_as_trimmed_from_its_first_read() -> None:
    streams = FakeStreams(5)
    streams.refuse_new = 1  # the mapping's first iterator: every read of it is refused, for good
    made, delivered = poller(streams)
    made.poll_once()
    assert delivered == ["1", "2", "3", "4", "5"]
    assert made.recovered == 1
    assert streams.handed == [("TRIM_HORIZON", None), ("TRIM_HORIZON", None)]  # nothing read yet: the shard's oldest


def test_the_poller_resumes_right_after_the_last_record_it_read() -> None:
    streams = FakeStreams(3)
    made, delivered = poller(streams)
    made.poll_once()
    streams.add(2)
    streams.refused.add(made._iterators[0, "s1"] or "")  # the iterator it holds is refused from now on
    made.poll_once()
    assert delivered == ["1", "2", "3", "4", "5"]  # nothing twice, nothing skipped
    assert streams.handed[-1] == ("AFTER_SEQUENCE_NUMBER", "3")


def test_when_the_last_record_read_was_trimmed_the_poller_starts_at_the_horizon() -> None:
    streams = FakeStreams(3)
    made, delivered = poller(streams)
    made.poll_once()
    streams.add(3)
    streams.horizon = 4  # records 1-4 trimmed: "3", the last read, is gone; "4" is lost to every reader
    streams.refused.add(made._iterators[0, "s1"] or "")
    made.poll_once()
    assert delivered == ["1", "2", "3", "5", "6"]
    assert streams.handed[-2:] == [("AFTER_SEQUENCE_NUMBER", "3"), ("TRIM_HORIZON", None)]


def test_the_poller_recovers_from_an_expired_iterator_the_same_way() -> None:
    streams = FakeStreams(2)
    streams.error = ExpiredIteratorException
    made, delivered = poller(streams)
    made.poll_once()
    streams.add(1)
    streams.refused.add(made._iterators[0, "s1"] or "")
    made.poll_once()
    assert delivered == ["1", "2", "3"] and made.recovered == 1


def test_a_stream_that_keeps_refusing_costs_a_bounded_number_of_reads_per_poll(capsys: pytest.CaptureFixture[str]) -> None:
    streams = FakeStreams(2)
    streams.refuse_new = 100
    made, delivered = poller(streams)
    made.poll_once()  # returns: no endless loop
    assert delivered == [] and made.recovered == RECOVERIES_PER_DRAIN
    assert "TrimmedDataAccessException again" in capsys.readouterr().err
    streams.refuse_new = 0
    streams.refused.clear()
    made.poll_once()
    assert delivered == ["1", "2"]  # the next poll recovers once the stream serves again


def test_a_shard_gone_from_the_stream_gets_no_new_iterator() -> None:
    streams = FakeStreams(2)
    assert fresh_iterator(streams, ARN, "s1", "2") is not None
    streams.shards = ()
    assert fresh_iterator(streams, ARN, "s1", "2") is None
    reader = StreamReader(streams, "t")
    reader.iterators = {"s1": "it:0#0"}
    streams.refused.add("it:0#0")
    assert reader.read() == [] and reader.iterators["s1"] is None  # dropped, no error


def test_the_test_kits_reader_recovers_the_same_way() -> None:
    streams = FakeStreams(3)
    streams.refuse_new = 1
    reader = StreamReader(streams, "t")
    assert [r["dynamodb"]["SequenceNumber"] for r in reader.read()] == ["1", "2", "3"]
    streams.add(2)
    streams.refused.add(reader.iterators["s1"] or "")
    assert [r["dynamodb"]["SequenceNumber"] for r in reader.read()] == ["4", "5"]
    assert reader.recovered == 2
    assert streams.handed[-1] == ("AFTER_SEQUENCE_NUMBER", "3")
