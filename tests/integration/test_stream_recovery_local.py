"""The local stack's stream poller on DynamoDB Local recovers from an iterator refused for good.

DynamoDB Local answered TrimmedDataAccessException to every read of the stream iterator of a table
created while another stack created its own (issue 28, item 7); when it does is a matter of timing,
so here the refusal is injected (a botocore hook answers it to every GetRecords until the poller takes
a new iterator) on a real table and stream. The poller must describe the stream
again, take a fresh iterator, and deliver every record once.
"""

from __future__ import annotations

from typing import Any

from devstack.streams import StreamPoller, Subscription
from testkit.faults import _error


def refuse_until_a_new_iterator(streams: Any) -> dict[str, int]:
    """Every GetRecords answers TrimmedDataAccessException until the reader asks for a new iterator
    after the first refusal (DynamoDB Local hands out the same iterator string for the same position,
    so the refusal follows the reader's state, not the string)."""
    seen = {"refused": 0, "fresh": 0}

    def get_records(**_: Any) -> Any:
        if seen["fresh"] == 0:
            seen["refused"] += 1
            return _error(400, "TrimmedDataAccessException", "the iterator points at trimmed records")
        return None

    def get_shard_iterator(**_: Any) -> None:
        if seen["refused"]:
            seen["fresh"] += 1

    streams.meta.events.register("before-call.dynamodb-streams.GetRecords", get_records, unique_id="refuse-records")
    streams.meta.events.register("before-call.dynamodb-streams.GetShardIterator", get_shard_iterator, unique_id="count-iterators")
    return seen


def test_the_poller_reads_every_record_once_after_an_iterator_refused_as_trimmed(ddb: Any, table: str, dynamodb_endpoint: str) -> None:
    for i in range(5):
        ddb.put_item(TableName=table, Item={"PK": {"S": f"X#{i}"}, "SK": {"S": "META"}})
    delivered: list[str] = []

    def invoke(event: dict[str, Any]) -> tuple[str, Any]:
        delivered.extend(r["dynamodb"]["Keys"]["PK"]["S"] for r in event["Records"])
        return "ok", None

    poller = StreamPoller(table, dynamodb_endpoint, {"F": invoke}, [Subscription("F")])
    seen = refuse_until_a_new_iterator(poller.streams)
    poller.poll_once()
    assert seen == {"refused": 1, "fresh": 1} and poller.recovered == 1
    assert sorted(delivered) == [f"X#{i}" for i in range(5)]
    ddb.put_item(TableName=table, Item={"PK": {"S": "X#5"}, "SK": {"S": "META"}})
    poller.poll_once()
    assert sorted(delivered) == [f"X#{i}" for i in range(6)]  # and it goes on reading, each record once


def test_two_tables_created_at_once_are_both_read_whole(ddb: Any, dynamodb_endpoint: str) -> None:
    """The case itself, no injection: two stacks create their tables (streams on) at the same moment
    on one DynamoDB Local. Its first iterators on them then answer TrimmedDataAccessException (12 tables
    out of 12 when this was written; how often is DynamoDB Local's); every record must still arrive."""
    import threading
    import uuid

    from devstack.dynamodb_local import create_table, dynamodb_client
    from devstack.template import read_stack

    names = [f"tally-twin-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    threads = [threading.Thread(target=create_table, args=(dynamodb_client(dynamodb_endpoint), read_stack(n))) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        for name in names:
            delivered: list[str] = []
            poller = StreamPoller(
                name,
                dynamodb_endpoint,
                {"F": lambda event, d=delivered: (d.extend(r["dynamodb"]["Keys"]["PK"]["S"] for r in event["Records"]), ("ok", None))[1]},
                [Subscription("F")],
            )
            poller.poll_once()  # its iterators are taken on the empty stream, as a stack's poller takes them at start
            for i in range(3):
                ddb.put_item(TableName=name, Item={"PK": {"S": f"X#{i}"}, "SK": {"S": "META"}})
            poller.poll_once()
            assert sorted(delivered) == ["X#0", "X#1", "X#2"], (name, poller.recovered)
    finally:
        for name in names:
            ddb.delete_table(TableName=name)
