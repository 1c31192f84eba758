"""Conformance of the local global table (testkit/regions.py): one test per rule it models.

Each rule names the AWS page it follows (docs/regions-emulator.md has the same table):

* [HOW] "How DynamoDB global tables work",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html
* [OVERVIEW] "Overview of global tables" (AWS Prescriptive Guidance, "Key facts about MREC/MRSC"),
  https://docs.aws.amazon.com/prescriptive-guidance/latest/dynamodb-global-tables/overview.html
* [DESIGN] "Best practices for DynamoDB global table design",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-global-table-design.html
* [MRSC] "Multi-Region strong consistency",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/multi-region-strong-consistency-gt.html
* [STREAMS] "Change data capture for DynamoDB Streams",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html
* [FIS] "AWS FIS actions reference" (aws:dynamodb:global-table-pause-replication),
  https://docs.aws.amazon.com/fis/latest/userguide/fis-actions-reference.html
* [API] "PutItem" (DynamoDB API Reference, Errors: ReplicatedWriteConflictException, HTTP 400),
  https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_PutItem.html
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from counters.core.engine import run
from counters.core.failures import Failure, RetryPolicy, classify
from counters.core.outcome import Outcome
from testkit.regions import Conflicts, Delays, GlobalTable, Mode

A, B, C = "eu-west-1", "us-east-1", "us-west-2"


def key(pk: str, sk: str = "S") -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def item(pk: str, **attrs: Any) -> dict[str, Any]:
    return {**key(pk), **{k: {"N": str(v)} if isinstance(v, int) else {"S": v} for k, v in attrs.items()}}


def plain(pk: str, **attrs: Any) -> dict[str, Any]:
    return {"PK": pk, "SK": "S", **attrs}


@pytest.fixture
def make(dynamodb_endpoint: str) -> Iterator[Any]:
    made: list[GlobalTable] = []

    def build(
        mode: Mode = Mode.MREC, regions: tuple[str, ...] = (A, B), seed: int = 7, delays: Delays | None = None, **kw: Any
    ) -> GlobalTable:
        kw.setdefault("writers", False)  # raw keys, no layer items: the writer rules are tested in test_writer_rules_regions.py
        gt = GlobalTable(dynamodb_endpoint, f"gt-{uuid.uuid4().hex[:10]}", regions, mode, seed, delays, **kw).create()
        made.append(gt)
        return gt

    yield build
    for gt in made:
        gt.delete()


def put(gt: GlobalTable, region: str, image: dict[str, Any]) -> None:
    gt.client(region).put_item(TableName=gt.table_name, Item=image)
    gt.pump()


# ------------------------------------------------------------------------------ MREC
def test_last_writer_wins_on_the_whole_item_deletes_included(make: Any) -> None:
    """[HOW] "Conflicts ... are resolved with a last writer wins reconciliation": the later write's
    WHOLE item replaces the other's in every Region (no attribute merge); a delete is a write too."""
    gt = make(delays=Delays.fixed(1.0))
    put(gt, A, item("x", a=1, shared=1))
    gt.advance(0.1)  # B writes before A's version reaches it
    put(gt, B, item("x", b=2, shared=2))
    assert gt.items(A) == [plain("x", a=1, shared=1)] and gt.items(B) == [plain("x", b=2, shared=2)]
    gt.settle()
    assert gt.items(A) == gt.items(B) == [plain("x", b=2, shared=2)]  # B's whole item, no "a"
    assert gt.stats.dropped_lww == 1  # A's older version reached B after B's write: dropped
    # A later delete in A wins over an earlier update in B; a later update in B wins over a delete
    gt.client(B).update_item(
        TableName=gt.table_name, Key=key("x"), UpdateExpression="SET b = :v", ExpressionAttributeValues={":v": {"N": "3"}}
    )
    gt.pump()
    gt.advance(0.1)
    gt.client(A).delete_item(TableName=gt.table_name, Key=key("x"))
    gt.pump()
    gt.settle()
    assert gt.items(A) == gt.items(B) == []
    gt.client(A).delete_item(TableName=gt.table_name, Key=key("y"))  # a delete of nothing: no record, nothing replicated
    put(gt, A, item("y", v=1))
    gt.settle()
    gt.client(A).delete_item(TableName=gt.table_name, Key=key("y"))
    gt.pump()
    gt.advance(0.1)
    put(gt, B, item("y", v=2))
    gt.settle()
    assert gt.items(A) == gt.items(B) == [plain("y", v=2)]


def test_an_older_version_arriving_late_is_dropped(make: Any) -> None:
    """[OVERVIEW] "the sequence of write operations within a remote Region might not match the
    sequence ... in the source Region": deliveries of one item may arrive out of order;
    last-writer-wins keeps the newest version wherever it arrives last."""
    gt = make(seed=11, delays=Delays(low=0.01, median=0.5, sigma=1.5, high=20, tail=0.0, duplicate=0.0))
    for n in range(30):
        put(gt, A, item("x", n=n))
        gt.advance(0.05)
    gt.settle()
    assert gt.items(B) == [plain("x", n=29)]
    assert gt.stats.dropped_lww > 0  # no duplicates and one writer: only reordering drops a version


def test_a_transaction_replicates_item_by_item(make: Any) -> None:
    """[HOW] "Transactional operations provide ACID guarantees only within the Region where the
    write is made": its items replicate separately, so another Region can see one without the other."""
    gt = make(seed=3, delays=Delays(low=0.01, median=0.5, sigma=1.5, high=10, tail=0.0, duplicate=0.0))
    pairs = [(f"t{n}a", f"t{n}b") for n in range(6)]
    for first, second in pairs:
        gt.client(A).transact_write_items(
            TransactItems=[{"Put": {"TableName": gt.table_name, "Item": item(pk, v=1)}} for pk in (first, second)]
        )
    gt.pump()
    halves = set()
    while len(gt.items(B)) < 2 * len(pairs):
        gt.advance(0.1)
        present = {i["PK"] for i in gt.items(B)}
        halves |= {n for n, pair in enumerate(pairs) if len(present & set(pair)) == 1}
    assert gt.converged()
    assert halves  # some transaction was half-visible in B


def test_delays_reordering_and_duplicates_converge(make: Any) -> None:
    """[HOW] "typically within a second" with no SLA ([OVERVIEW]: ReplicationLatency is only
    observed): seeded delays from ms to minutes, reordered and duplicated deliveries; once
    everything is delivered every Region holds the same items."""
    gt = make(seed=5, delays=Delays(duplicate=0.3, tail=0.1))
    for n in range(40):
        region = (A, B)[n % 2]
        put(gt, region, item(f"k{n % 7}", n=n, by=region))
        gt.advance(0.02)
    taken = gt.settle()
    assert gt.converged() and gt.pending() == 0
    assert gt.stats.duplicates > 0 and gt.stats.dropped_lww > 0 and taken > 8.0  # the tail took longer than `high`
    assert len(gt.items(A)) == 7


def test_a_partition_holds_replication_then_heals_in_order(make: Any) -> None:
    """[FIS] pause replication of a global table: a Region pair can stop replicating for as long
    as the experiment lasts; after it, the held changes replicate."""
    gt = make(delays=Delays.fixed(0.5))
    gt.partition(A, B)
    put(gt, A, item("p", v=1))
    gt.advance(1)
    put(gt, A, item("p", v=2))
    put(gt, A, item("q", v=1))
    gt.advance(600)  # ten simulated minutes
    assert gt.items(B) == [] and gt.stats.held_by_partition == 3
    assert gt.settle() == 0.0 and gt.pending() == 3  # settle delivers nothing a partition holds
    assert not gt.converged()
    gt.heal()
    gt.advance(0)
    assert gt.items(B) == [plain("p", v=2), plain("q", v=1)]
    assert gt.stats.replicated == 3 and gt.stats.dropped_lww == 0  # in scheduled order: v=1 then v=2
    assert gt.converged()


def test_replicated_writes_show_in_the_destination_stream_and_are_not_replicated_again(make: Any) -> None:
    """[HOW] / [STREAMS]: each replica's stream carries the writes replicated into it; the
    replicator does not send them back (one local record, one delivery)."""
    gt = make(delays=Delays.fixed(0.2))
    put(gt, A, item("s", v=1))
    gt.settle()
    records = {region: stream_records(gt, region) for region in (A, B)}
    assert [r["eventName"] for r in records[B]] == ["INSERT"]
    assert records[B][0]["dynamodb"]["NewImage"] == item("s", v=1)
    assert len(records[A]) == 1  # nothing came back
    assert (gt.stats.local_records, gt.stats.replicated) == (1, 1)


def test_a_replicated_write_that_changes_nothing_is_not_awaited_in_the_stream(make: Any) -> None:
    """[STREAMS] a write that changes nothing leaves no stream record: the replicator must not wait
    for one, or it would take a later local write of that same image for its own and never
    replicate it."""
    gt = make(delays=Delays.fixed(1.0))
    put(gt, A, item("n", v=1))
    put(gt, B, item("n", v=1))  # the same image, concurrently: B's version reaches A as a no-op
    gt.settle()
    put(gt, A, item("n", v=2))
    gt.settle()
    put(gt, A, item("n", v=1))  # a local write of the very image the no-op carried
    gt.settle()
    assert gt.items(A) == gt.items(B) == [plain("n", v=1)]


def test_a_local_write_racing_a_replicated_apply_is_repaired(make: Any) -> None:
    """The emulator's own limit (live mode): a local write in B that lands between the pump and a
    replicated apply of an OLDER version is overwritten for a moment; the next pump sees the local
    record followed by the replicated one and puts the newer version back."""
    gt = make(delays=Delays.fixed(1.0))
    put(gt, A, item("r", v=1))
    gt.clock.advance(2)
    gt.client(B).put_item(TableName=gt.table_name, Item=item("r", v=2))  # not pumped yet...
    gt._deliver_due(gt.clock.now())  # noqa: SLF001 - ...when A's older version is applied
    assert gt.items(B) == [plain("r", v=1)]
    gt.settle()
    assert gt.stats.repairs == 1
    assert gt.items(A) == gt.items(B) == [plain("r", v=2)]


def test_when_other_processes_write_an_apply_never_overwrites_a_local_write_it_has_not_seen(make: Any) -> None:
    """Live mode (the local stacks' functions write the tables): AWS applies a replicated version
    atomically against local writes, so a reader in B never sees an older version replace a newer
    local one. The apply is conditioned on the item being as pump last saw it; when a local write
    changed it, pump reads it (a newer version) and the older delivery is dropped."""
    gt = make(delays=Delays.fixed(1.0))
    gt.others_write = True  # what start() sets
    put(gt, A, item("r", v=1))
    gt.clock.advance(2)
    gt.client(B).put_item(TableName=gt.table_name, Item=item("r", v=2))  # not pumped yet...
    gt._deliver_due(gt.clock.now())  # noqa: SLF001 - ...when A's older version is due in B
    assert gt.items(B) == [plain("r", v=2)]  # never overwritten, not even for a moment
    assert gt.stats.raced == 1 and gt.stats.dropped_lww == 1
    gt.settle()
    assert gt.stats.repairs == 0
    assert gt.items(A) == gt.items(B) == [plain("r", v=2)]
    gt.client(B).delete_item(TableName=gt.table_name, Key=key("r"))  # a delete goes the same way
    gt.pump()
    gt.settle()
    assert gt.items(A) == gt.items(B) == []


def test_live_mode_replicates_in_wall_clock_time(make: Any) -> None:
    """`make dev-regions`: a thread pumps and delivers; a write in A shows up in B."""
    gt = make(delays=Delays.fixed(0.05))
    gt.start(interval=0.02)
    try:
        gt.client(A).put_item(TableName=gt.table_name, Item=item("live", v=1))
        while gt.items(B) != [plain("live", v=1)]:  # however long the pump takes on a busy machine (a hang is the timeout's)
            time.sleep(0.05)
        assert gt.items(B) == [plain("live", v=1)]
    finally:
        gt.stop()
    assert not gt.live_errors


def stream_records(gt: GlobalTable, region: str) -> list[dict[str, Any]]:
    streams = gt.streams_client(region)
    arn = gt.client(region).describe_table(TableName=gt.table_name)["Table"]["LatestStreamArn"]
    found = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            found += page["Records"]
            if not page["Records"]:
                break
            iterator = page.get("NextShardIterator")
    return found


# ------------------------------------------------------------------------------ MRSC
def test_mrsc_needs_exactly_three_regions(dynamodb_endpoint: str) -> None:
    """[DESIGN] "Key facts about MRSC": exactly three Regions."""
    with pytest.raises(ValueError, match="exactly 3"):
        GlobalTable(dynamodb_endpoint, "never-made", (A, B), Mode.MRSC)


def test_mrsc_refuses_transactions_and_ttl(make: Any) -> None:
    """[DESIGN] "Key facts about MRSC" / [MRSC]: no TransactWriteItems, no TransactGetItems, no TTL.
    AWS does not publish the exact message; the emulator answers ValidationException (HTTP 400),
    the code DynamoDB uses for requests a table's configuration does not allow."""
    gt = make(Mode.MRSC, (A, B, C))
    ddb = gt.client(B)
    calls = [
        lambda: ddb.transact_write_items(TransactItems=[{"Put": {"TableName": gt.table_name, "Item": item("t", v=1)}}]),
        lambda: ddb.transact_get_items(TransactItems=[{"Get": {"TableName": gt.table_name, "Key": key("t")}}]),
        lambda: ddb.update_time_to_live(TableName=gt.table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}),
    ]
    for call in calls:
        with pytest.raises(ClientError) as caught:
            call()
        assert caught.value.response["Error"]["Code"] == "ValidationException"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert classify(caught.value) is None  # a configuration error: not retried
    assert gt.items(A) == [] and gt.stats.refused == 3
    ttl = ddb.describe_time_to_live(TableName=gt.table_name)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "DISABLED"  # the template's TTL is not applied on MRSC


def test_mrsc_concurrent_writes_to_one_item_get_replicated_write_conflict(make: Any) -> None:
    """[DESIGN] / [OVERVIEW] "Key facts about MRSC", [API]: a write to an item being modified in
    another Region fails with ReplicatedWriteConflictException (HTTP 400, not applied; retryable).
    The layer retries it."""
    gt = make(Mode.MRSC, (A, B, C), conflicts=Conflicts(window=1.0, rate=1.0))
    gt.client(A).put_item(TableName=gt.table_name, Item=item("c", v=1))
    gt.client(A).put_item(TableName=gt.table_name, Item=item("c", v=2))  # the same Region: no conflict
    with pytest.raises(ClientError) as caught:
        gt.client(B).put_item(TableName=gt.table_name, Item=item("c", v=3))
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("ReplicatedWriteConflictException", 400)
    assert classify(caught.value).kind is Failure.CONFLICT  # type: ignore[union-attr]
    assert gt.items(C) == [plain("c", v=2)]  # not applied
    gt.client(B).put_item(TableName=gt.table_name, Item=item("other", v=1))  # another item: no conflict
    # the engine's backoff lets the other Region's write finish (here: simulated time passes)
    policy = RetryPolicy(max_attempts=4, sleep=lambda s: gt.clock.advance(0.6))
    report = run(
        gt.client(C).update_item,
        {"TableName": gt.table_name, "Key": key("c"), "UpdateExpression": "ADD v :one", "ExpressionAttributeValues": {":one": {"N": "1"}}},
        policy=policy,
    )
    assert report.outcome is Outcome.APPLIED and report.attempts > 1
    assert gt.items(A) == [plain("c", v=3), plain("other", v=1)]
    assert gt.stats.conflicts >= 2


def test_mrsc_reads_are_strongly_consistent_from_every_region(make: Any) -> None:
    """[DESIGN] / [MRSC]: a strongly consistent read in any Region returns the latest version at
    once; conditional writes act on it; streams show identical records on every replica."""
    gt = make(Mode.MRSC, (A, B, C), conflicts=Conflicts(rate=0.0))
    gt.client(A).put_item(TableName=gt.table_name, Item=item("m", v=1))
    for region in (A, B, C):
        got = gt.client(region).get_item(TableName=gt.table_name, Key=key("m"), ConsistentRead=True)["Item"]
        assert got == item("m", v=1)
    with pytest.raises(ClientError) as caught:  # B's condition sees A's write
        gt.client(B).put_item(TableName=gt.table_name, Item=item("m", v=9), ConditionExpression="attribute_not_exists(PK)")
    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert gt.settle() == 0.0 and gt.converged()
    assert stream_records(gt, A) == stream_records(gt, C) and len(stream_records(gt, B)) == 1


# ------------------------------------------------------------------------------ the seed's hazard
def test_a_plain_add_counter_in_two_regions_loses_updates(dynamodb_endpoint: str) -> None:
    """Issue 21: a plain ``ADD`` written in two Regions within the replication delay loses
    acknowledged adds to last-writer-wins on MREC, and none on MRSC (proof/regions/add.py;
    `make proof` runs 150 schedules of each)."""
    from proof.regions import add

    mrec, mrsc = add.scenarios(dynamodb_endpoint, seed=4, count=20)
    assert mrec.schedules == 20 and mrec.hits >= 18 and mrec.under > 0
    assert mrsc.schedules == 20 and mrsc.hits == 20 and mrsc.under == 0
    for row in (mrec, mrsc):
        assert "Regions diverged after settle: 0" in row.notes
        assert row.verdict == "holds"


def test_an_item_holding_an_empty_map_replicates(make: Any) -> None:
    """DynamoDB Local's stream shows an empty map as ``{}`` (no type); the replicated PutItem would be
    refused ("Supplied AttributeValue is empty"). The replica holds the empty map (a hot post's META
    starts with ``aggSeq = {}``)."""
    gt = make(delays=Delays.fixed(0.5))
    put(gt, A, {**key("m"), "lanes": {"M": {}}, "nested": {"M": {"inner": {"M": {}}}}, "list": {"L": [{"M": {}}]}})
    gt.settle()
    assert gt.items(B) == [plain("m", lanes={}, nested={"inner": {}}, list=[{}])]
