"""A small stand-in for the multi-Region emulator (``testkit.regions``, branch r-emulator), used by
the likes' tests and proof until that lands: the same API subset (``GlobalTable``: ``create``,
``client``, ``streams_client``, ``clock``, ``pump``, ``advance``, ``partition``, ``heal``,
``settle``, ``converged``, ``items``), and :class:`StreamReader`, which reads a Region's stream
with either.

What it models (AWS: "Global tables - multi-Region replication for DynamoDB",
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/V2globaltables_HowItWorks.html):

* a Region is a client with its own ``region_name`` on one DynamoDB Local (started without
  ``-sharedDb``, it keeps a database per Region), so each Region has its own table and stream;
* MREC: :meth:`GlobalTable.pump` reads each Region's new stream records, stamps each local write
  with the simulated write time and schedules its whole new image for every other Region after a
  seeded delay (reordered, sometimes twice); a delivery replaces the destination's item only if
  its write time is later than the destination's version (last writer wins, whole item); a
  partitioned pair holds its deliveries until :meth:`heal`; replicated writes show up in the
  destination's stream and are not replicated again;
* MRSC: one store (the first Region's database) seen from every Region: one stream, read by
  every Region's consumers (every write appears in every Region's stream).

Not modelled: deletes (likes never delete; a tombstone is a write), TTL, and MRSC's
``ReplicatedWriteConflictException`` (the proof's injected conflicts stand in for it).
"""

from __future__ import annotations

import heapq
import json
import os
import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import boto3

from counters.core.client import CLIENT_CONFIG
from devstack.dynamodb_local import create_table
from devstack.template import read_stack

CLIENT = CLIENT_CONFIG  # the layer's: SDK retries off
WRITER = "writerRegion"


class Mode(StrEnum):
    MREC = "mrec"
    MRSC = "mrsc"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


@dataclass(order=True)
class _Delivery:
    due: float
    order: int
    source: str = field(compare=False)
    target: str = field(compare=False)
    key: str = field(compare=False)
    written: tuple[float, int] = field(compare=False)
    image: dict[str, Any] = field(compare=False)


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

    def __init__(self, streams: Any, ddb: Any, table: str) -> None:
        self.streams, self.ddb, self.table = streams, ddb, table
        self.iterators: dict[str, str | None] = {}
        self.arn: str | None = None
        self.last: dict[str, str] = {}

    def _page(self, arn: str, sid: str) -> Any:
        """One GetRecords; an iterator DynamoDB Local refuses (trimmed, expired: seen under
        concurrent tables) is made again after the last record read."""
        try:
            return self.streams.get_records(ShardIterator=self.iterators[sid], Limit=1000)
        except (self.streams.exceptions.TrimmedDataAccessException, self.streams.exceptions.ExpiredIteratorException):
            where: dict[str, str] = {"ShardIteratorType": "TRIM_HORIZON"}
            if sid in self.last:
                where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": self.last[sid]}
            self.iterators[sid] = self.streams.get_shard_iterator(StreamArn=arn, ShardId=sid, **where)["ShardIterator"]
            return self.streams.get_records(ShardIterator=self.iterators[sid], Limit=1000)

    def read(self) -> list[dict[str, Any]]:
        arn = self.arn = self.arn or self.ddb.describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
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


class GlobalTable:
    """A global table over one DynamoDB Local (see the module doc)."""

    def __init__(
        self, endpoint: str, table_name: str, *, regions: tuple[str, ...], mode: Mode = Mode.MREC, seed: int = 0, max_delay: float = 30.0
    ) -> None:
        if mode is Mode.MRSC and len(regions) != 3:
            raise ValueError("MRSC has exactly 3 Regions")
        self.endpoint, self.table_name, self.regions, self.mode = endpoint, table_name, tuple(sorted(regions)), mode
        self.rng, self.max_delay, self.clock = random.Random(seed), max_delay, Clock()
        self._clients: dict[str, Any] = {}
        self._internal: dict[str, Any] = {}  # the replicator's own clients (faults on client() never hit it)
        self._streams: dict[str, Any] = {}
        self._readers: dict[str, StreamReader] = {}
        self._pending: list[_Delivery] = []
        self._held: list[_Delivery] = []
        self._partitioned: set[frozenset[str]] = set()
        self._versions: dict[tuple[str, str], tuple[float, int]] = {}
        self._echo: dict[str, list[str]] = {r: [] for r in self.regions}
        self._order = 0
        self.stats = {"replicated": 0, "dropped_lww": 0, "duplicates": 0, "held_by_partition": 0}

    def _store(self, region: str) -> str:
        return self.regions[0] if self.mode is Mode.MRSC else region

    def _session(self, region: str) -> Any:
        key, secret = os.environ.get("AWS_ACCESS_KEY_ID", "local"), os.environ.get("AWS_SECRET_ACCESS_KEY", "local")
        return boto3.session.Session(aws_access_key_id=key, aws_secret_access_key=secret, region_name=self._store(region))

    def client(self, region: str) -> Any:
        if region not in self._clients:
            self._clients[region] = self._session(region).client("dynamodb", endpoint_url=self.endpoint, config=CLIENT)
        return self._clients[region]

    def _own(self, region: str) -> Any:
        if region not in self._internal:
            self._internal[region] = self._session(region).client("dynamodb", endpoint_url=self.endpoint, config=CLIENT)
        return self._internal[region]

    def streams_client(self, region: str) -> Any:
        if region not in self._streams:
            self._streams[region] = self._session(region).client("dynamodbstreams", endpoint_url=self.endpoint, config=CLIENT)
        return self._streams[region]

    def create(self) -> None:
        for region in {self._store(r) for r in self.regions}:
            create_table(self._own(region), read_stack(self.table_name))
        if self.mode is Mode.MREC:
            self._readers = {r: StreamReader(self.streams_client(r), self._own(r), self.table_name) for r in self.regions}

    def drop(self) -> None:
        for region in {self._store(r) for r in self.regions}:
            self._own(region).delete_table(TableName=self.table_name)

    # -------------------------------------------------------------------- replication (MREC)
    def pump(self) -> None:
        if self.mode is Mode.MRSC:
            return
        for region, reader in self._readers.items():
            for record in reader.read():
                image = record["dynamodb"].get("NewImage")
                if image is None:
                    continue
                key = json.dumps(record["dynamodb"]["Keys"], sort_keys=True)
                fingerprint = key + json.dumps(image, sort_keys=True)
                if fingerprint in self._echo[region]:  # a write this stand-in replicated in: not replicated again
                    self._echo[region].remove(fingerprint)
                    continue
                self._order += 1
                written = (self.clock.now(), self._order)
                self._versions[(region, key)] = written
                for target in self.regions:
                    if target == region:
                        continue
                    for _ in range(2 if self.rng.random() < 0.1 else 1):
                        self._order += 1
                        due = self.clock.now() + self.rng.random() * self.max_delay
                        heapq.heappush(self._pending, _Delivery(due, self._order, region, target, key, written, image))

    def _deliver(self, d: _Delivery) -> None:
        if frozenset((d.source, d.target)) in self._partitioned:
            self._held.append(d)
            self.stats["held_by_partition"] += 1
            return
        current = self._versions.get((d.target, d.key))
        if current is not None and current >= d.written:
            self.stats["dropped_lww" if current > d.written else "duplicates"] += 1
            return
        self._versions[(d.target, d.key)] = d.written
        self._echo[d.target].append(d.key + json.dumps(d.image, sort_keys=True))
        self._own(d.target).put_item(TableName=self.table_name, Item=d.image)
        self.stats["replicated"] += 1

    def advance(self, seconds: float) -> None:
        """Pump, then deliver what is due (call it between operations, never during one)."""
        self.pump()
        self.clock.t += seconds
        while self._pending and self._pending[0].due <= self.clock.t:
            self._deliver(heapq.heappop(self._pending))  # local writes were pumped (versioned) above

    def partition(self, a: str, b: str) -> None:
        self._partitioned.add(frozenset((a, b)))

    def heal(self) -> None:
        self._partitioned.clear()
        for d in self._held:
            d.due = self.clock.t
            heapq.heappush(self._pending, d)
        self._held = []

    def settle(self) -> float:
        """Heal, then deliver everything pending in order of due time (advancing simulated time)."""
        start = self.clock.t
        self.heal()
        self.pump()
        while self._pending:
            d = heapq.heappop(self._pending)
            self.clock.t = max(self.clock.t, d.due)
            self._deliver(d)
        self.pump()  # the deliveries' own records (not replicated again)
        return self.clock.t - start

    def items(self, region: str) -> list[dict[str, Any]]:
        ddb, out, kwargs = self._own(region), [], {"TableName": self.table_name, "ConsistentRead": True}
        while True:
            page = ddb.scan(**kwargs)
            out.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def converged(self) -> bool:
        views = [sorted(json.dumps(i, sort_keys=True) for i in self.items(r)) for r in self.regions]
        return all(v == views[0] for v in views)
