"""A Region's stream as a stream consumer reads it (the like aggregators of the tests and the proof).

:class:`StreamReader` reads every new record of one Region's stream (``testkit.regions``'
``gt.streams_client(region)``; MRSC: the one stream every Region reads), in order, shard by
shard, with its own iterators (the replicator keeps its own), and hands records over as Lambda
does: ``ApproximateCreationDateTime`` in epoch seconds, images in DynamoDB JSON.
"""

from __future__ import annotations

from typing import Any

from devstack.streams import RECOVERIES_PER_DRAIN, fresh_iterator, refused_iterator_errors


def _fixed(value: Any) -> Any:
    """DynamoDB Local's stream shows an empty map as ``{}`` (not ``{"M": {}}``): made valid again."""
    if value == {}:
        return {"M": {}}
    if isinstance(value, dict) and len(value) == 1 and "M" in value:
        return {"M": {k: _fixed(v) for k, v in value["M"].items()}}
    if isinstance(value, dict) and len(value) == 1 and "L" in value:
        return {"L": [_fixed(v) for v in value["L"]]}
    return value


class StreamReader:
    """Every new record of one Region's stream, in order, shard by shard (DynamoDB Local)."""

    def __init__(self, streams: Any, table: str) -> None:
        self.streams, self.table = streams, table
        self.iterators: dict[str, str | None] = {}
        self.arn: str | None = None
        self.last: dict[str, str] = {}
        self.recovered = 0  # iterators replaced after TrimmedDataAccessException / ExpiredIteratorException

    def _page(self, arn: str, sid: str) -> Any:
        """One GetRecords; an iterator the stream refuses (trimmed, expired: DynamoDB Local answers
        both under concurrent tables) is replaced as the local stack's poller replaces it
        (:func:`devstack.streams.fresh_iterator`: after the last record read while the shard holds
        it, else from its oldest record), up to :data:`~devstack.streams.RECOVERIES_PER_DRAIN` times;
        ``None`` when the shard is gone or the stream keeps refusing (the next :meth:`read` tries again)."""
        for _ in range(RECOVERIES_PER_DRAIN):
            iterator = self.iterators.get(sid)
            if iterator is None:
                return None
            try:
                return self.streams.get_records(ShardIterator=iterator, Limit=1000)
            except refused_iterator_errors(self.streams):
                self.recovered += 1
                self.iterators[sid] = fresh_iterator(self.streams, arn, sid, self.last.get(sid))
        return None

    def read(self) -> list[dict[str, Any]]:
        arn = self.arn = self.arn or self.streams.list_streams(TableName=self.table)["Streams"][0]["StreamArn"]
        if not self.iterators or not all(self.iterators.values()):  # a new shard appears only when one closes
            for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
                if shard["ShardId"] not in self.iterators:
                    self.iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                    )["ShardIterator"]
        out: list[dict[str, Any]] = []
        for sid in sorted(self.iterators):
            while self.iterators[sid]:
                page = self._page(arn, sid)
                if page is None:
                    break
                self.iterators[sid] = page.get("NextShardIterator")
                for record in page["Records"]:
                    for image in ("NewImage", "OldImage"):
                        if image in record["dynamodb"]:
                            record["dynamodb"][image] = {k: _fixed(v) for k, v in record["dynamodb"][image].items()}
                    created = record["dynamodb"].get("ApproximateCreationDateTime")
                    if hasattr(created, "timestamp"):  # boto3 parses it; Lambda delivers epoch seconds
                        record["dynamodb"]["ApproximateCreationDateTime"] = created.timestamp()
                    out.append(record)
                    self.last[sid] = record["dynamodb"]["SequenceNumber"]
                if len(page["Records"]) < 1000:  # DynamoDB Local answers everything it has
                    break
        return out
