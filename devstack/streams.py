"""A local event source mapping for DynamoDB Streams: the template's ``Type: DynamoDB`` events.

DynamoDB Local serves the Streams API (DescribeStream, GetShardIterator, GetRecords) on its
own endpoint. :class:`StreamPoller` reads every shard of the table's stream, shapes records
as Lambda delivers them (``eventSourceARN`` added, ``ApproximateCreationDateTime`` as epoch
seconds), applies the event's ``FilterCriteria`` (the subset of the pattern syntax that
templates use here: value lists, ``prefix``, ``exists``, nested objects), and invokes the
function with batches of up to ``BatchSize`` records, in order per shard.

The mapping's settings are the template's, read per event (:func:`subscriptions`), so local lag
and write rates follow the deployed ones:

* ``BatchSize``; ``MaximumBatchingWindowInSeconds``: the polling thread holds a batch short of
  ``BatchSize`` until its first record has waited that long (``poll_once()`` flushes at once);
* ``ReportBatchItemFailures``: the shard restarts from the lowest failed sequence number;
* ``BisectBatchOnFunctionError``: a batch whose invocation fails is split in two, each half
  retried on its own;
* ``MaximumRetryAttempts`` (``-1``: until it succeeds) and ``MaximumRecordAgeInSeconds``;
  then the batch is dropped and, with ``DestinationConfig.OnFailure``, its description
  (shard, first and last sequence numbers, size) is sent to that queue, as Lambda does.

``poll_once()`` drains what is there now (tests call it); ``start()`` polls in a thread.

An iterator the stream refuses is replaced as a Lambda mapping goes on (:func:`fresh_iterator`):
``ExpiredIteratorException`` (an iterator older than 15 minutes) and ``TrimmedDataAccessException``
(the iterator points at records the stream no longer holds; DynamoDB Local also answers it to a
reader of a table created while another was, and kept answering it to that iterator for good) both
make the poller describe the stream again and take a new iterator for the shard: right after the last
record it read when the stream still holds that one, otherwise the oldest record the shard holds
(``TRIM_HORIZON``). Lambda documents no more than that a mapping retries a record "until the record
expires" and then goes on ("Lambda parameters for Amazon DynamoDB event source mappings",
https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html); what the two errors mean and
which iterator types there are is the Streams API's ("GetRecords", "GetShardIterator",
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetShardIterator.html).
So nothing the stream still holds is skipped, and nothing read is delivered twice unless it was trimmed
and re-read from the horizon (a handler is idempotent per record anyway).

Delivery faults (the proof): ``duplicate_rate`` re-delivers a fraction of the batches that
succeeded, whole, right after (a redelivered batch, as after a lost checkpoint).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from devstack.dynamodb_local import dynamodb_client
from devstack.runtime import FunctionPool
from devstack.template import Stack, load

Invoke = Callable[[dict[str, Any]], tuple[str, Any]]
"""Runs the function on an event; returns (status, payload) like :meth:`FunctionPool.invoke`."""


@dataclass
class Subscription:
    """One ``Type: DynamoDB`` event of one function."""

    function: str
    batch_size: int = 100
    starting_position: str = "TRIM_HORIZON"
    filters: list[dict[str, Any]] = field(default_factory=list)
    report_failures: bool = False
    max_retries: int = -1  # Lambda's default: until the records expire
    batching_window: float = 0.0  # seconds
    bisect: bool = False
    max_record_age: int = -1  # seconds; -1: no limit
    on_failure: str | None = None  # the OnFailure destination's logical id (an SQS queue)


def _logical_id(ref: Any) -> str | None:
    """``!GetAtt Queue.Arn`` / ``!Ref Queue`` as the resource's logical id."""
    if isinstance(ref, dict) and "Fn::GetAtt" in ref:
        target = ref["Fn::GetAtt"]
        return (target if isinstance(target, list) else str(target).split("."))[0]
    if isinstance(ref, dict) and "Ref" in ref:
        return str(ref["Ref"])
    return None


def subscriptions(template: dict[str, Any] | None = None) -> list[Subscription]:
    """Every function's DynamoDB stream events, read from template.yaml (each setting the local
    poller honours, with Lambda's defaults where the template sets none)."""
    template = template or load()
    found = []
    for name, res in template["Resources"].items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        for event in (res["Properties"].get("Events") or {}).values():
            if event["Type"] != "DynamoDB":
                continue
            props = event["Properties"]
            patterns = [json.loads(f["Pattern"]) for f in (props.get("FilterCriteria") or {}).get("Filters", [])]
            on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            found.append(
                Subscription(
                    function=name,
                    batch_size=int(props.get("BatchSize", 100)),
                    starting_position=props.get("StartingPosition", "TRIM_HORIZON"),
                    filters=patterns,
                    report_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                    max_retries=int(props.get("MaximumRetryAttempts", -1)),
                    batching_window=float(props.get("MaximumBatchingWindowInSeconds", 0)),
                    bisect=bool(props.get("BisectBatchOnFunctionError", False)),
                    max_record_age=int(props.get("MaximumRecordAgeInSeconds", -1)),
                    on_failure=_logical_id(on_failure),
                )
            )
    return found


def subscription(function: str, template: dict[str, Any] | None = None) -> Subscription:
    """``function``'s one DynamoDB stream event, read from template.yaml: what a bench, a proof or a
    test takes of the mapping (``BatchSize``, ``MaximumBatchingWindowInSeconds``, retries) instead of a copy."""
    (found,) = [s for s in subscriptions(template) if s.function == function]
    return found


def matches(pattern: Any, value: Any) -> bool:
    """Lambda/EventBridge pattern matching, for the shapes used in filter criteria."""
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return False
        return all(matches(sub, value.get(key, _MISSING)) for key, sub in pattern.items())
    if isinstance(pattern, list):
        return any(_match_one(rule, value) for rule in pattern)
    return False


_MISSING = object()


def _match_one(rule: Any, value: Any) -> bool:
    if isinstance(rule, dict):
        if "prefix" in rule:
            return isinstance(value, str) and value.startswith(rule["prefix"])
        if "exists" in rule:
            return (value is not _MISSING) == bool(rule["exists"])
        if "anything-but" in rule:
            excluded = rule["anything-but"] if isinstance(rule["anything-but"], list) else [rule["anything-but"]]
            return value is not _MISSING and value not in excluded
        raise ValueError(f"filter rule not supported locally: {rule}")
    return value is not _MISSING and value == rule


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A GetRecords record as Lambda's event source mapping delivers it."""
    out = dict(record)
    ddb = dict(out["dynamodb"])
    created = ddb.get("ApproximateCreationDateTime")
    if hasattr(created, "timestamp"):
        ddb["ApproximateCreationDateTime"] = int(created.timestamp())
    out["dynamodb"] = ddb
    out["eventSourceARN"] = stream_arn
    return out


RECOVERIES_PER_DRAIN = 3
"""New iterators one drain of a shard may take after refused reads before it waits for the next poll."""


def refused_iterator_errors(streams: Any) -> tuple[type[Exception], ...]:
    """The errors of a read whose iterator is no longer usable (the stream itself is fine)."""
    return (streams.exceptions.TrimmedDataAccessException, streams.exceptions.ExpiredIteratorException)


def fresh_iterator(streams: Any, arn: str, shard_id: str, after: str | None, start: str = "TRIM_HORIZON") -> str | None:
    """A new iterator for ``shard_id`` after its iterator was refused: the stream described again,
    then right after sequence number ``after`` (the last record read) when the shard still holds it,
    else from the shard's oldest record (``TRIM_HORIZON``; ``start``, the mapping's starting position,
    when nothing was read yet). ``None``: the shard is no longer in the stream (nothing left to read)."""
    shards = {s["ShardId"] for s in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]}
    if shard_id not in shards:
        return None
    if after is not None:
        try:
            return str(
                streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard_id, ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after
                )["ShardIterator"]
            )
        except streams.exceptions.TrimmedDataAccessException:
            start = "TRIM_HORIZON"  # the last record read was trimmed: what remains after it starts at the horizon
    return str(streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, ShardIteratorType=start)["ShardIterator"])


class StreamPoller:
    """Delivers the table stream's records to each subscribed function."""

    def __init__(
        self,
        table_name: str,
        endpoint: str,
        invokers: dict[str, Invoke],
        subs: list[Subscription] | None = None,
        *,
        duplicate_rate: float = 0.0,
        seed: int = 0,
        destinations: dict[str, str] | None = None,
        sqs: Any = None,
        ddb: Any = None,
        streams: Any = None,
    ) -> None:
        """``ddb``/``streams``: the table's and its stream's clients (default: the local stack's; a
        Region of the global-table emulator passes its own)."""
        self.destinations = destinations or {}  # queue logical id -> URL (OnFailure destinations)
        self.sqs = sqs
        self.failed_batches: list[dict[str, Any]] = []  # what was sent (or would be) to OnFailure
        self.duplicate_rate = duplicate_rate
        self._rng = random.Random(seed)
        self.duplicated = 0  # batches delivered twice
        self.table_name = table_name
        self.endpoint = endpoint
        self.invokers = invokers
        self.subs = [s for s in (subs if subs is not None else subscriptions()) if s.function in invokers]
        self.ddb = ddb or dynamodb_client(endpoint)
        # Same credentials and region as the table's client: DynamoDB Local keeps one database per pair.
        creds = self.ddb._request_signer._credentials
        self.streams = streams or boto3.session.Session(
            aws_access_key_id=creds.access_key, aws_secret_access_key=creds.secret_key, region_name=self.ddb.meta.region_name
        ).client("dynamodbstreams", endpoint_url=endpoint)
        self._iterators: dict[tuple[int, str], str | None] = {}  # (subscription, shard) -> iterator
        self._pending: dict[tuple[int, str], list[dict[str, Any]]] = {}
        self._last_seq: dict[tuple[int, str], str] = {}
        self._waiting_since: dict[tuple[int, str], float] = {}  # a partial batch's first record, seen at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pools: list[FunctionPool] = []
        self.delivered = 0
        self.recovered = 0  # iterators replaced after TrimmedDataAccessException / ExpiredIteratorException
        self.polls = 0  # whole polls of every shard done by start()'s loop

    @classmethod
    def for_stack(
        cls,
        stack: Stack,
        endpoint: str,
        *,
        duplicate_rate: float = 0.0,
        seed: int = 0,
        destinations: dict[str, str] | None = None,
        sqs: Any = None,
    ) -> StreamPoller:
        """A poller running each subscribed function in its own worker process (one per shard, as Lambda)."""
        subs = [s for s in subscriptions() if s.function in stack.functions]  # a function whose Condition is false is not there
        pools = {s.function: FunctionPool(stack.functions[s.function], concurrency=1) for s in subs}
        invokers = {name: pool.invoke for name, pool in pools.items()}
        poller = cls(
            stack.table_name, endpoint, invokers, subs, duplicate_rate=duplicate_rate, seed=seed, destinations=destinations, sqs=sqs
        )
        poller._pools = list(pools.values())
        return poller

    @property
    def held(self) -> int:
        """Records read from the stream and not delivered yet (a batch held for its batching window)."""
        return sum(len(p) for p in self._pending.values())

    def stream_arn(self) -> str | None:
        return self.ddb.describe_table(TableName=self.table_name)["Table"].get("LatestStreamArn")

    def poll_once(self, *, flush: bool = True) -> int:
        """Deliver every record available now; returns how many records were delivered.
        ``flush=False`` (the polling thread) holds a batch short of ``BatchSize`` for the
        mapping's batching window."""
        arn = self.stream_arn()
        if not arn or not self.subs:
            return 0
        shards = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        before = self.delivered
        for index, sub in enumerate(self.subs):
            for shard in shards:
                key = (index, shard["ShardId"])
                if key not in self._iterators:
                    self._iterators[key] = self.streams.get_shard_iterator(
                        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType=sub.starting_position
                    )["ShardIterator"]
                self._drain(sub, key, arn, flush)
        return self.delivered - before

    def _drain(self, sub: Subscription, key: tuple[int, str], arn: str, flush: bool = True) -> None:
        recoveries = 0
        while self._iterators.get(key) and not self._stop.is_set():
            try:
                page = self.streams.get_records(ShardIterator=self._iterators[key], Limit=1000)
            except refused_iterator_errors(self.streams) as exc:
                self.recovered += 1
                self._iterators[key] = fresh_iterator(self.streams, arn, key[1], self._last_seq.get(key), sub.starting_position)
                recoveries += 1
                if recoveries >= RECOVERIES_PER_DRAIN:
                    print(f"[streams] {sub.function}: {type(exc).__name__} again on {key[1]}; retrying at the next poll", file=sys.stderr)
                    return
                continue
            self._iterators[key] = page.get("NextShardIterator")
            if page.get("Records"):
                self._last_seq[key] = page["Records"][-1]["dynamodb"]["SequenceNumber"]
            records = [lambda_record(r, arn) for r in page.get("Records", [])]
            if sub.filters:
                records = [r for r in records if any(matches(p, r) for p in sub.filters)]
            pending = self._pending.setdefault(key, [])
            if records and not pending:
                self._waiting_since[key] = time.monotonic()
            pending.extend(records)
            while pending:
                if len(pending) < sub.batch_size and not flush:
                    if time.monotonic() - self._waiting_since.get(key, 0.0) < sub.batching_window:
                        break  # the batching window: wait for a fuller batch
                batch = pending[: sub.batch_size]
                done = self._deliver(sub, batch, key[1], arn)
                del pending[:done]
                self._waiting_since[key] = time.monotonic()
            if not page.get("Records"):
                break

    def _deliver(self, sub: Subscription, batch: list[dict[str, Any]], shard: str = "", arn: str = "", attempt: int = 0) -> int:
        """Invoke with ``batch`` until it succeeds or retries run out; returns records consumed."""
        consumed = 0
        while True:
            status, payload = self.invokers[sub.function]({"Records": batch})
            failed_at = len(batch)
            if status != "ok":
                failed_at = 0
                if sub.bisect and len(batch) > 1:  # split in two, each half retried on its own
                    half = len(batch) // 2
                    consumed += self._deliver(sub, batch[:half], shard, arn, attempt + 1)
                    return consumed + self._deliver(sub, batch[half:], shard, arn, attempt + 1)
            elif sub.report_failures and isinstance(payload, dict):
                seqs = [f.get("itemIdentifier") for f in payload.get("batchItemFailures") or []]
                positions = [i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in seqs]
                failed_at = min(positions) if positions else len(batch)
            self.delivered += failed_at
            consumed += failed_at
            if failed_at == len(batch):
                if self.duplicate_rate and self._rng.random() < self.duplicate_rate:
                    self.duplicated += 1
                    self.invokers[sub.function]({"Records": batch})  # redelivered whole; its outcome changes nothing
                return consumed
            batch = batch[failed_at:]
            attempt += 1
            if (sub.max_retries >= 0 and attempt > sub.max_retries) or self._expired(sub, batch):
                print(f"[streams] {sub.function}: dropped {len(batch)} records after {attempt} attempts: {payload}", file=sys.stderr)
                self._on_failure(sub, batch, shard, arn, attempt)
                return consumed + len(batch)
            time.sleep(min(0.05 * attempt, 1.0))

    @staticmethod
    def _expired(sub: Subscription, batch: list[dict[str, Any]]) -> bool:
        if sub.max_record_age < 0:
            return False
        created = batch[0]["dynamodb"].get("ApproximateCreationDateTime") or time.time()
        return time.time() - float(created) > sub.max_record_age

    def _on_failure(self, sub: Subscription, batch: list[dict[str, Any]], shard: str, arn: str, attempts: int) -> None:
        """The OnFailure destination's message: the batch's description, not its records (as Lambda sends it)."""
        info = {
            "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts, "functionArn": sub.function},
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
                "batchSize": len(batch),
                "streamArn": arn,
            },
        }
        self.failed_batches.append(info)
        url = self.destinations.get(sub.on_failure or "")
        if url and self.sqs is not None:
            self.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(info))

    def start(self, interval: float = 0.2) -> StreamPoller:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.poll_once(flush=False)
                except Exception as exc:  # noqa: BLE001 - keep polling, as the service would
                    print(f"[streams] poll failed: {exc}", file=sys.stderr)
                self.polls += 1
                self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name="stream-poller", daemon=True)
        self._thread.start()
        return self

    def wait_caught_up(self) -> None:
        """Until every record written before this call is delivered: two whole polls begun after it
        (the first may have been reading already) and no partial batch held. Bounded by work, not
        by a clock; a poller that never polls again is a hang for the caller's guard."""
        target = self.polls + 2
        while self.polls < target or any(self._pending.values()):
            if self._thread is None or not self._thread.is_alive():
                raise RuntimeError("the stream poller is not running")
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        for pool in self._pools:
            pool.close()
