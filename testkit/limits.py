"""A local model of DynamoDB's per-partition limits and transaction conflicts, on a botocore client.

DynamoDB Local enforces no throughput limit (it never throttles) and runs transactions one at a
time (so it never answers TransactionConflict). :class:`LimitModel` hooks a DynamoDB client's
events, like :class:`testkit.faults.FaultInjector`, and makes the client behave as the service
does for a hot partition key:

Capacity, per partition key (the table's partition-key *value*; the model keys its buckets by
(table, index, value), so a table's item collection is one bucket)
    * writes in WCU: 1 per KB of item, rounded up, per item; transactional items (every action
      of TransactWriteItems, ConditionCheck included) 2x. A conditional write whose condition
      fails still consumes: the charge is taken before sending, whatever the answer.
    * reads in RCU: 1 per 4 KB strongly consistent, 0.5 eventually consistent; transactional
      reads 2x. A read's size is only known from its answer, so a read is charged its minimum
      (one 4 KB unit) before sending and the rest after the answer; GetItem/TransactGetItems
      from the item returned, Query from the items returned (``Select=COUNT`` returns none:
      ``ScannedCount`` x ``assumed_item_bytes``). The after-answer part is taken even if it
      drives the bucket below zero (DynamoDB also charges what a read actually read), so the
      next calls on that partition wait for the debt to refill.
    * a token bucket per partition key for writes and one for reads, refilled at
      ``1000 WCU/s / scale`` and ``3000 RCU/s / scale``, holding at most ``burst_seconds`` of
      that rate (default 1 s). DynamoDB keeps up to 300 s of unused capacity as burst for a
      *table*; a single partition is hard-limited to its per-second rate, which is what this
      models (no table-level or account-level limit is modelled: one hot key is the case).
    * sizes: DynamoDB's item size rules (attribute names + values, numbers ~1 byte per 2
      digits + 1). PutItem knows its item. UpdateItem and DeleteItem do not know the stored
      item: they are charged by the largest of the size the model last saw Put for that key and
      the request's key + expression values (exact for Tally's items, all well under 1 KB).

A call that would take more than its partition has is failed **before sending**, not charged,
with the error the service returns for a hot partition (botocore 1.43's DynamoDB model and the
DynamoDB developer guide, "Key range throughput exceeded (hot partitions)", which applies to
on-demand and provisioned tables alike):

* single-item calls, Query and batches: ``ProvisionedThroughputExceededException`` (HTTP 400)
  with ``ThrottlingReasons`` ``[{"reason": "TableWriteKeyRangeThroughputExceeded" (or
  ...Read..., Index... for a GSI query), "resource": <table ARN>}]``;
* TransactWriteItems / TransactGetItems: ``TransactionCanceledException`` whose
  ``CancellationReasons`` has ``ThrottlingError`` (the on-demand code; the service model's
  TransactionCanceledException documentation) at each throttled item and ``None`` elsewhere.

:func:`counters.core.failures.classify` reads both as ``THROTTLED``.

TransactionConflict (the rules of the developer guide's "Transaction conflict handling")
    * a TransactWriteItems whose item is being written by another TransactWriteItems is
      cancelled: ``TransactionConflict`` at that item's index;
    * a PutItem / UpdateItem / DeleteItem on an item an ongoing TransactWriteItems is writing
      fails with ``TransactionConflictException``;
    * a TransactGetItems on an item any write (transactional or not) is writing is cancelled:
      ``TransactionConflict`` at that index.

    DynamoDB Local serialises transactions, so "ongoing" is the model's own: a TransactWriteItems
    holds its items from the moment it is sent until its answer arrives **and** at least
    ``transaction_ms x scale`` ms after it was sent (``hold_during_call=False``: only the
    modelled duration, whatever DynamoDB Local's latency; a single-item write holds its item
    only while it is under way). The hold is scaled like the rates (see "Scale"). Conflicts are
    checked after capacity, and a conflicting call is charged (the model's assumption: the
    request was admitted and reached the item; AWS does not document what a conflict costs).

Scale
    ``scale`` divides DynamoDB's per-partition rates (1,000 WCU/s, 3,000 RCU/s) so that a
    2-core machine running DynamoDB Local (a few hundred writes/s) can reach them. Scaling the
    rates by 1/s is a slow-motion replay of the service: to keep what happens on one hot item
    the same (how often transactions overlap = rate x transaction duration), the modelled
    transaction duration is multiplied by s too. The client's own timings (retry backoff,
    HTTP latency) are *not* slowed down: a retry in the model comes s times "sooner" than it
    would against the service, relative to the bucket.

Not modelled: Scan (no partition), table/account quotas and adaptive capacity (splitting a hot
partition, which DynamoDB does only for keys it can split: never one partition-key value),
GSI write amplification, the per-partition 10 GB limit, batches partly throttled (a batch whose
partition is short fails whole), a ``resend`` fault's second send (not re-charged).

Counters: :attr:`throttles` and :attr:`conflicts` (by operation), :meth:`consumed` (WCU/RCU per
partition), :attr:`calls` (calls that reached the model).
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from testkit.faults import _body, _error

WCU_PER_PARTITION = 1000.0
"""DynamoDB's per-partition write limit, WCU/s."""
RCU_PER_PARTITION = 3000.0
"""DynamoDB's per-partition read limit (strongly consistent), RCU/s."""

THROTTLE_MESSAGE = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index "
    "so please try again shortly. If exceptions persist, check if you have a hot key: "
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)
CONFLICT_MESSAGE = "Transaction is ongoing for the item"
SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})

Partition = tuple[str, str, str]
"""(table, index or "", partition-key value as canonical JSON)."""
ItemKey = tuple[str, str, str]
"""(table, partition-key value, sort-key value), both as canonical JSON."""


# ----------------------------------------------------------------------------- sizes
def _value_size(value: dict[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        digits = data.lstrip("-").replace(".", "").split("e")[0].split("E")[0].strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(base64.b64decode(data)) if isinstance(data, str) else len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in data)
    if kind == "NS":
        return sum(_value_size({"N": n}) for n in data)
    if kind == "BS":
        return sum(_value_size({"B": b}) for b in data)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in data.items())
    return 0


def item_size(item: dict[str, Any] | None) -> int:
    """DynamoDB's size of an item in its wire form (attribute names + values), bytes."""
    return sum(len(name.encode()) + _value_size(value) for name, value in (item or {}).items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# ----------------------------------------------------------------------------- buckets
@dataclass
class Bucket:
    """A token bucket: ``rate`` units/s, at most ``burst`` units, starts full."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now


@dataclass
class _Hold:
    owner: int
    until: float | None  # None: the call is still under way


@dataclass
class _Charge:
    partition: Partition
    units: float
    write: bool
    index: int  # position in the request (TransactItems order), for CancellationReasons


@dataclass
class _Call:
    """What the model did for one call (kept in botocore's request context)."""

    operation: str
    table: str
    started: float
    tx_keys: list[ItemKey] = field(default_factory=list)
    write_keys: list[ItemKey] = field(default_factory=list)
    reads: list[tuple[Partition, float, bool, float]] = field(default_factory=list)
    """(partition, units charged before, consistent, multiplier): completed after the answer."""
    unprocessed: dict[str, Any] = field(default_factory=dict)
    """BatchGetItem: the keys left out for want of capacity, added to the answer's ``UnprocessedKeys``."""


@dataclass
class _Target:
    table: str
    key: dict[str, Any]
    item: dict[str, Any] | None = None
    kind: str = "Put"  # Put / Update / Delete / ConditionCheck / Get
    extra: int = 0  # request-visible bytes beyond the key (Update's values)
    consistent: bool = True


class LimitModel:
    """Attach to a DynamoDB client: per-partition token buckets and TransactionConflict.

    ``scale`` divides the service's per-partition rates; ``burst_seconds`` is how many seconds
    of rate a partition may bank; ``transaction_ms`` is the service's transaction duration
    (held x ``scale``), and also for as long as the real call is under way unless
    ``hold_during_call`` is False; ``conflicts_consume`` charges a call cancelled for a conflict
    (the default; unverified, see the module doc); ``keys`` maps a table to its (partition, sort) key attribute names
    (default ``("PK", "SK")`` for every table); ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        client: Any,
        *,
        scale: float = 20.0,
        burst_seconds: float = 1.0,
        transaction_ms: float = 5.0,
        hold_during_call: bool = True,
        conflicts_consume: bool = True,
        keys: dict[str, tuple[str, str | None]] | None = None,
        default_keys: tuple[str, str | None] = ("PK", "SK"),
        assumed_item_bytes: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.scale = scale
        self.wcu_rate = WCU_PER_PARTITION / scale
        self.rcu_rate = RCU_PER_PARTITION / scale
        self.burst_seconds = burst_seconds
        self.hold_seconds = transaction_ms * scale / 1000.0
        self.hold_during_call = hold_during_call
        self.conflicts_consume = conflicts_consume
        self.keys = dict(keys or {})
        self.default_keys = default_keys
        self.assumed_item_bytes = assumed_item_bytes
        self.clock = clock
        self._lock = threading.Lock()
        self._write_buckets: dict[Partition, Bucket] = {}
        self._read_buckets: dict[Partition, Bucket] = {}
        self._tx_holds: dict[ItemKey, _Hold] = {}
        self._write_holds: Counter[ItemKey] = Counter()
        self._sizes: dict[ItemKey, int] = {}
        self._wcu: Counter[Partition] = Counter()
        self._rcu: Counter[Partition] = Counter()
        self.calls: Counter[str] = Counter()
        self.throttles: Counter[str] = Counter()
        self.partial: Counter[str] = Counter()  # BatchGetItem calls answered in part (UnprocessedKeys)
        """Calls failed as throttled, by operation."""
        self.conflicts: Counter[str] = Counter()
        """Calls failed as TransactionConflict, by operation."""
        self._context_key = f"tally_limits_{id(self)}"
        events = client.meta.events
        # Last: a call another hook answers (the engine guard, a FaultInjector's pre-send fault)
        # never reaches the service, so it is neither charged nor held.
        events.register_last("before-call.dynamodb", self._before_call, unique_id=f"limits-before-{id(self)}")
        events.register_first("after-call.dynamodb", self._after_call, unique_id=f"limits-after-{id(self)}")
        events.register_first("after-call-error.dynamodb", self._after_error, unique_id=f"limits-error-{id(self)}")

    def detach(self) -> None:
        events = self.client.meta.events
        events.unregister("before-call.dynamodb", unique_id=f"limits-before-{id(self)}")
        events.unregister("after-call.dynamodb", unique_id=f"limits-after-{id(self)}")
        events.unregister("after-call-error.dynamodb", unique_id=f"limits-error-{id(self)}")

    # -- what was consumed -------------------------------------------------------------------
    def consumed(self) -> dict[Partition, dict[str, float]]:
        """WCU and RCU charged per partition (throttled calls are not charged)."""
        with self._lock:
            parts = set(self._wcu) | set(self._rcu)
            return {p: {"wcu": float(self._wcu[p]), "rcu": float(self._rcu[p])} for p in parts}

    def total(self, kind: str = "wcu") -> float:
        with self._lock:
            return float(sum((self._wcu if kind == "wcu" else self._rcu).values()))

    def tokens(self, partition: Partition, *, write: bool = True) -> float:
        """The bucket's level now (full for a partition never charged)."""
        with self._lock:
            bucket = self._bucket(partition, write, self.clock())
            return bucket.tokens

    # -- keys ---------------------------------------------------------------------------------
    def key_names(self, table: str) -> tuple[str, str | None]:
        return self.keys.get(table, self.default_keys)

    def partition(self, table: str, value: dict[str, Any], index: str = "") -> Partition:
        return (table, index, _canon(value))

    def _item_key(self, table: str, key: dict[str, Any]) -> ItemKey:
        pk, sk = self.key_names(table)
        return (table, _canon(key.get(pk)), _canon(key.get(sk)) if sk else "")

    def _key_of(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        pk, sk = self.key_names(table)
        return {k: item[k] for k in (pk, sk) if k and k in item}

    def _targets(self, operation: str, body: dict[str, Any]) -> list[_Target]:
        """The items a write or a keyed read touches, in request order."""
        table = body.get("TableName", "")
        if operation == "PutItem":
            item = body.get("Item", {})
            return [_Target(table, self._key_of(table, item), item, "Put")]
        if operation == "UpdateItem":
            return [_Target(table, body.get("Key", {}), None, "Update", item_size(body.get("ExpressionAttributeValues")))]
        if operation == "DeleteItem":
            return [_Target(table, body.get("Key", {}), None, "Delete")]
        if operation == "GetItem":
            return [_Target(table, body.get("Key", {}), None, "Get", consistent=bool(body.get("ConsistentRead")))]
        if operation == "TransactWriteItems":
            targets = []
            for entry in body.get("TransactItems", []):
                ((kind, action),) = entry.items()
                t = action.get("TableName", "")
                if kind == "Put":
                    targets.append(_Target(t, self._key_of(t, action.get("Item", {})), action.get("Item"), "Put"))
                else:
                    extra = item_size(action.get("ExpressionAttributeValues")) if kind == "Update" else 0
                    targets.append(_Target(t, action.get("Key", {}), None, kind, extra))
            return targets
        if operation == "TransactGetItems":
            return [_Target(e["Get"].get("TableName", ""), e["Get"].get("Key", {}), None, "Get") for e in body.get("TransactItems", [])]
        if operation == "BatchWriteItem":
            targets = []
            for t, requests in body.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"].get("Item", {})
                        targets.append(_Target(t, self._key_of(t, item), item, "Put"))
                    else:
                        targets.append(_Target(t, request.get("DeleteRequest", {}).get("Key", {}), None, "Delete"))
            return targets
        if operation == "BatchGetItem":
            return [
                _Target(t, key, None, "Get", consistent=bool(spec.get("ConsistentRead")))
                for t, spec in body.get("RequestItems", {}).items()
                for key in spec.get("Keys", [])
            ]
        return []

    def query_partition(self, body: dict[str, Any]) -> Partition | None:
        """The partition a Query reads: the equality on the partition key in its KeyConditionExpression."""
        table, index = body.get("TableName", ""), body.get("IndexName", "")
        names = body.get("ExpressionAttributeNames", {})
        values = body.get("ExpressionAttributeValues", {})
        pk, _ = self.key_names(table)
        equalities = [(names.get(n, n), v) for n, v in re.findall(r"([#\w.]+)\s*=\s*(:\w+)", body.get("KeyConditionExpression", ""))]
        for name, placeholder in equalities:
            if (index or name == pk) and placeholder in values:
                return self.partition(table, values[placeholder], index)  # an index: its first equality
        return None

    def _write_size(self, target: _Target) -> int:
        known = self._sizes.get(self._item_key(target.table, target.key), 0)
        if target.kind == "Put":
            return item_size(target.item)
        return max(known, item_size(target.key) + target.extra)

    # -- buckets ------------------------------------------------------------------------------
    def _bucket(self, partition: Partition, write: bool, now: float) -> Bucket:
        buckets = self._write_buckets if write else self._read_buckets
        bucket = buckets.get(partition)
        if bucket is None:
            rate = self.wcu_rate if write else self.rcu_rate
            bucket = buckets[partition] = Bucket(rate, rate * self.burst_seconds, rate * self.burst_seconds, now)
        bucket.refill(now)
        return bucket

    def _take(self, charges: list[_Charge], now: float) -> list[int]:
        """Take every charge, or none: the indexes of the charges whose partition is short."""
        need: dict[tuple[Partition, bool], float] = defaultdict(float)
        for c in charges:
            need[(c.partition, c.write)] += c.units
        short = {k for k, units in need.items() if self._bucket(k[0], k[1], now).tokens < units}
        if short:
            return [c.index for c in charges if (c.partition, c.write) in short]
        for (partition, write), units in need.items():
            self._bucket(partition, write, now).tokens -= units
            (self._wcu if write else self._rcu)[partition] += units
        return []

    def _refund(self, charges: list[_Charge]) -> None:
        for c in charges:
            (self._write_buckets if c.write else self._read_buckets)[c.partition].tokens += c.units
            (self._wcu if c.write else self._rcu)[c.partition] -= c.units

    def _debit(self, partition: Partition, units: float, now: float) -> None:
        """Charge what a read turned out to read (may go below zero)."""
        if units <= 0:
            return
        self._bucket(partition, False, now).tokens -= units
        self._rcu[partition] += units

    # -- holds --------------------------------------------------------------------------------
    def _held(self, key: ItemKey, now: float, owner: int) -> bool:
        hold = self._tx_holds.get(key)
        if hold is None or hold.owner == owner:
            return False
        if hold.until is not None and hold.until <= now:
            del self._tx_holds[key]
            return False
        return True

    def _release(self, call: _Call, now: float) -> None:
        for key in call.tx_keys:
            hold = self._tx_holds.get(key)
            if hold is not None and hold.owner == id(call):
                until = call.started + self.hold_seconds
                if until <= now:
                    del self._tx_holds[key]
                else:
                    hold.until = until
        for key in call.write_keys:
            self._write_holds[key] -= 1
            if self._write_holds[key] <= 0:
                del self._write_holds[key]
        call.tx_keys, call.write_keys = [], []

    # -- the hooks ----------------------------------------------------------------------------
    def _before_call(self, model: Any, params: dict[str, Any], context: dict[str, Any] | None = None, **_: Any) -> Any:
        operation = model.name
        body = _body(params)
        if operation == "Query":
            partition = self.query_partition(body)
            if partition is None:
                return None
            consistent = bool(body.get("ConsistentRead"))
            charges = [_Charge(partition, read_units(0, consistent), False, 0)]
            call = _Call(operation, partition[0], self.clock(), reads=[(partition, charges[0].units, consistent, 1.0)])
            return self._admit(operation, call, charges, [], context, body)
        targets = self._targets(operation, body)
        if not targets:
            return None
        transactional = operation in ("TransactWriteItems", "TransactGetItems")
        factor = 2.0 if transactional else 1.0
        charges, reads = [], []
        pk_of = {t.table: self.key_names(t.table)[0] for t in targets}
        for i, t in enumerate(targets):
            partition = self.partition(t.table, t.key.get(pk_of[t.table], {}))
            if t.kind == "Get":
                units = read_units(0, t.consistent or transactional) * factor
                charges.append(_Charge(partition, units, False, i))
                reads.append((partition, units, t.consistent or transactional, factor))
            else:
                charges.append(_Charge(partition, write_units(self._write_size(t)) * factor, True, i))
        call = _Call(operation, targets[0].table, self.clock(), reads=reads)
        if operation == "BatchGetItem":
            return self._admit_batch_get(call, charges, targets, context, params, body)
        return self._admit(operation, call, charges, targets, context, body)

    def _admit_batch_get(
        self, call: _Call, charges: list[_Charge], targets: list[_Target], context: Any, params: dict[str, Any], body: dict[str, Any]
    ) -> Any:
        """BatchGetItem as the service does it: the keys whose partitions have capacity are read and
        the others come back in ``UnprocessedKeys``; only when none can be read is the call throttled
        (BatchGetItem's API reference: "If DynamoDB returns any unprocessed items ... If none of the
        items can be processed due to insufficient provisioned throughput on all of the tables in the
        request, then BatchGetItem returns a ProvisionedThroughputExceededException")."""
        with self._lock:
            short = set(self._take(charges, call.started))
            if not short:
                self.calls["BatchGetItem"] += 1
                if context is not None:
                    context[self._context_key] = call
                return None
            left_partitions = {c.partition for c in charges if c.index in short}
            kept = [c for c in charges if c.partition not in left_partitions]
            if not kept or self._take(kept, call.started):
                self.calls["BatchGetItem"] += 1
                self.throttles["BatchGetItem"] += 1
                return self._throttled("BatchGetItem", call, charges, sorted(short), len(targets))
            self.calls["BatchGetItem"] += 1
            self.partial["BatchGetItem"] += 1
        read_idx = {c.index for c in kept}
        call.reads = [r for c, r in zip(charges, call.reads, strict=True) if c.index in read_idx]
        request: dict[str, Any] = {}
        for table, spec in body.get("RequestItems", {}).items():
            keys = spec.get("Keys", [])
            mine = [i for i, t in enumerate(targets) if t.table == table]
            read_keys = [k for i, k in zip(mine, keys, strict=True) if i in read_idx]
            left = [k for i, k in zip(mine, keys, strict=True) if i not in read_idx]
            if read_keys:
                request[table] = {**spec, "Keys": read_keys}
            if left:
                call.unprocessed[table] = {**spec, "Keys": left}
        params["body"] = json.dumps({**body, "RequestItems": request}).encode()
        if context is not None:
            context[self._context_key] = call
        return None

    def _admit(
        self, operation: str, call: _Call, charges: list[_Charge], targets: list[_Target], context: Any, body: dict[str, Any]
    ) -> Any:
        with self._lock:
            self.calls[operation] += 1
            now = call.started
            short = self._take(charges, now)
            if short:
                self.throttles[operation] += 1
                return self._throttled(operation, call, charges, short, len(targets))
            keys = [self._item_key(t.table, t.key) for t in targets]
            conflicting: list[int] = []
            if operation == "TransactWriteItems":
                conflicting = [i for i, k in enumerate(keys) if self._held(k, now, id(call))]
            elif operation == "TransactGetItems":
                conflicting = [i for i, k in enumerate(keys) if self._held(k, now, id(call)) or self._write_holds.get(k)]
            elif operation in SINGLE_WRITES:
                conflicting = [0] if self._held(keys[0], now, id(call)) else []
            if conflicting:
                self.conflicts[operation] += 1
                if not self.conflicts_consume:
                    self._refund(charges)
                if operation in SINGLE_WRITES:
                    return _error(400, "TransactionConflictException", CONFLICT_MESSAGE)
                return self._cancelled(len(targets), {i: ("TransactionConflict", CONFLICT_MESSAGE) for i in conflicting})
            if operation == "TransactWriteItems":
                until = None if self.hold_during_call else now + self.hold_seconds
                for k in keys:
                    self._tx_holds[k] = _Hold(id(call), until)
                call.tx_keys = keys
            elif operation in SINGLE_WRITES or operation == "BatchWriteItem":
                for k in keys:
                    self._write_holds[k] += 1
                call.write_keys = keys
            for t, k in zip(targets, keys, strict=True):
                if t.kind == "Put":
                    self._sizes[k] = item_size(t.item)
        if context is not None:
            context[self._context_key] = call
        return None

    def _throttled(self, operation: str, call: _Call, charges: list[_Charge], short: list[int], n: int) -> Any:
        if operation in ("TransactWriteItems", "TransactGetItems"):
            return self._cancelled(n, {i: ("ThrottlingError", THROTTLE_MESSAGE) for i in short})
        charge = next(c for c in charges if c.index == short[0])
        table, index, _ = charge.partition
        reason = f"{'Index' if index else 'Table'}{'Write' if charge.write else 'Read'}KeyRangeThroughputExceeded"
        resource = f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}" + (f"/index/{index}" if index else "")
        return _error(
            400,
            "ProvisionedThroughputExceededException",
            THROTTLE_MESSAGE,
            ThrottlingReasons=[{"reason": reason, "resource": resource}],
        )

    @staticmethod
    def _cancelled(n: int, reasons: dict[int, tuple[str, str]]) -> Any:
        listed = [{"Code": reasons[i][0], "Message": reasons[i][1]} if i in reasons else {"Code": "None"} for i in range(n)]
        codes = ", ".join(r["Code"] for r in listed)
        return _error(
            400,
            "TransactionCanceledException",
            f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
            CancellationReasons=listed,
        )

    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any] | None = None, **_: Any) -> None:
        call = (context or {}).pop(self._context_key, None)
        if call is None:
            return  # answered before reaching the model (or not a call it models)
        ok = http_response is not None and getattr(http_response, "status_code", 500) < 300
        with self._lock:
            now = self.clock()
            self._release(call, now)
            if ok and call.reads:
                self._charge_reads(call, parsed, now)
            if ok and call.unprocessed:
                unprocessed = parsed.setdefault("UnprocessedKeys", {})
                for table, spec in call.unprocessed.items():
                    unprocessed.setdefault(table, {**spec, "Keys": []})["Keys"].extend(spec["Keys"])

    def _after_error(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        call = (context or {}).pop(self._context_key, None)
        if call is not None:
            with self._lock:
                self._release(call, self.clock())

    def _charge_reads(self, call: _Call, parsed: dict[str, Any], now: float) -> None:
        if call.operation == "Query":
            partition, before, consistent, _ = call.reads[0]
            items = parsed.get("Items")
            scanned = int(parsed.get("ScannedCount", parsed.get("Count", 0)))
            if items is None:
                size = scanned * self.assumed_item_bytes
            else:
                size = sum(item_size(i) for i in items)
                if len(items) < scanned:  # filtered out, still read
                    size += (scanned - len(items)) * (size // max(1, len(items)) if items else self.assumed_item_bytes)
            self._debit(partition, read_units(size, consistent) - before, now)
            return
        if call.operation == "GetItem":
            got: Iterable[dict[str, Any] | None] = [parsed.get("Item")]
        elif call.operation == "TransactGetItems":
            got = [r.get("Item") for r in parsed.get("Responses", [])]
        else:  # BatchGetItem: sizes by position are not kept; the minimum charge stands
            return
        for (partition, before, consistent, factor), item in zip(call.reads, got, strict=False):
            self._debit(partition, read_units(item_size(item), consistent) * factor - before, now)

    # -- a summary ----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "wcu_per_s": self.wcu_rate,
            "rcu_per_s": self.rcu_rate,
            "hold_ms": self.hold_seconds * 1000,
            "calls": sum(self.calls.values()),
            "throttles": sum(self.throttles.values()),
            "conflicts": sum(self.conflicts.values()),
            "wcu": self.total("wcu"),
            "rcu": self.total("rcu"),
        }
