"""Resources, their shards and reservation records: keys, attribute names, requests, facts.

| item | PK | SK |
|---|---|---|
| resource | ``RES#<id>`` | ``META``: capacity, strategy, shards; the counter itself when unsharded |
| shard | ``RES#<id>#<n>`` | ``SHARD``: a share of the capacity (write sharding) |
| reservation | ``RSV#<reservationId>`` | ``RSV``: quantity, status, allocation, ``requestId`` (the marker of approach 5) |
| share (MREC) | ``RES#<id>@<region>`` (``#<n>`` when sharded) | ``SHARE`` / ``SHARD``: a Region's escrowed share, written by that Region only |
| transfer (MREC) | ``RES#<id>#XFER`` | ``<transferId>``: units leaving a Region (its writer); ``<transferId>#IN``: their receipt (the target's) |

A *counter item* (a resource's ``META`` when unsharded, or a shard) holds ``reserved`` and
``available``, which always sum to its capacity, plus what its approach remembers (``tag``;
``version`` + ``tags``; ``tokens``). The request shapes of every approach
([`counters.primitives.approaches`][counters.primitives.approaches]) are built here, and [`ResourceStore`][counters.store.resources.ResourceStore] makes the
calls; the approaches decide which to make, the reservations service
([`counters.services.reservations`][counters.services.reservations]) orchestrates. Nothing above this module sees a raw item:
reads and ``ALL_OLD`` items come back as [`Counter`][counters.store.resources.Counter], [`Resource`][counters.store.resources.Resource] and [`Record`][counters.store.resources.Record].
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from botocore.exceptions import ClientError

from counters.core.client import DynamoDBClient
from counters.core.engine import Hook, Report, Stop, read, run
from counters.core.failures import Classified, RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.core.regions import ONE_REGION, REGION_ATTRIBUTE, Topology
from counters.store.base import Store
from counters.store.expr import Cond, Delete, Get, Params, Path, Put, Query, Transaction, Update, list_append, old_item
from counters.store.items import from_item
from counters.store.layout import Shape
from counters.store.writers import ANY, HOME, HOME_OF_ID, REFUSED, WriterRule, per_region

SHAPES: tuple[Shape, ...] = (
    Shape(
        "resource",
        "RES#<id>",
        "META",
        "capacity, strategy, shards; unsharded: the counter (`reserved`, `available`, tag / version+tags / tokens) "
        "([reservations.md](reservations.md))",
    ),
    Shape("resource shard", "RES#<id>#<n>", "SHARD", "write sharding: a share of the capacity"),
    Shape(
        "resource share",
        "RES#<id>@<region>[#<n>]",
        "SHARE / SHARD",
        "MREC escrow: one Region's share of the capacity (`capacity` is the share), written only by that Region",
    ),
    Shape(
        "transfer", "RES#<id>#XFER", "<transferId>", "MREC escrow: units sent from one Region's share to another's (written by the sender)"
    ),
    Shape(
        "transfer receipt",
        "RES#<id>#XFER",
        "<transferId>#IN",
        "MREC escrow: the target Region credited the transfer (written by the target)",
    ),
    Shape(
        "reservation",
        "RSV#<reservationId>",
        "RSV (MREC: RSV@<region>, one per Region)",
        "quantity, status, allocation, `requestId`; the marker of approach 5; TTL only once released",
    ),
)

RESOURCE = WriterRule(
    "resource",
    "RES#<id>",
    "META",
    HOME,
    HOME_OF_ID,
    ANY,
    "MREC: its id is the admin's `resourceId`: two Regions creating it at once would both answer 201, and last-writer-wins "
    "would replace one resource (and the shares reservations were taken against) with the other: an oversell; so only the "
    "id's home creates it (409 `wrong_region` elsewhere), with every Region's share in one transaction. MRSC: single-item "
    "strategies update it from any Region, each write on the latest version",
    home_id="id",
)
"""The resource's META: its writer rule, whose ``require`` refuses a creation outside the id's home Region on MREC."""
WRITERS: tuple[WriterRule, ...] = (
    RESOURCE,
    WriterRule(
        "resource share",
        "RES#<id>@<Region>",
        "SHARE",
        REFUSED,
        per_region("own", created_at_home=True),
        REFUSED,
        "MREC escrow: created with the resource by its home, then spent, released and credited only by the Region it names",
        home_id="id",
    ),
    WriterRule(
        "resource share shard",
        "RES#<id>@<Region>#<n>",
        "SHARD",
        REFUSED,
        per_region("own", created_at_home=True),
        REFUSED,
        "as the share: a sharded share is written only by the Region it names",
        home_id="id",
    ),
    WriterRule(
        "resource shard",
        "RES#<id>#<n>",
        "SHARD",
        HOME,
        REFUSED,
        REFUSED,
        "write sharding is a transaction: refused on MRSC; MREC shards a share",
    ),
    WriterRule(
        "transfer receipt",
        "RES#<id>#XFER",
        "<transferId>#IN",
        REFUSED,
        per_region("own"),
        REFUSED,
        "written only by the transfer's target Region (its `target`), once per transfer",
        region_attribute="target",
    ),
    WriterRule(
        "transfer",
        "RES#<id>#XFER",
        "<transferId>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "its id is derived from (resource, source Region, Idempotency-Key) and only the source Region (its `source`) writes it: "
        "the same key sent in two Regions is two transfers, each debited and credited once",
        region_attribute="source",
    ),
    WriterRule(
        "reservation record of a Region",
        "RSV#<reservationId>",
        "RSV@<Region>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "a failover re-send taken in two Regions keeps both records, and the later one is given back by `reconcile`; released "
        "only in the Region that took the units",
    ),
    WriterRule(
        "reservation record",
        "RSV#<reservationId>",
        "RSV",
        HOME,
        REFUSED,
        ANY,
        "MRSC: its create's condition sees every Region (one record per request token)",
    ),
)
Key = dict[str, str]
"""A counter item's (or record's) key: ``PK``, ``SK``."""
Fields = Mapping[str, object]
"""The attributes a caller adds to a reservation record (``resourceId``, ``requestId``, ``owner``...)."""

MAX_SHARDS = 20
"""The most counter items one resource is split over (one transaction takes at most that many)."""

# -- attribute names -------------------------------------------------------------------------------
PK = "PK"
RESERVED, AVAILABLE = "reserved", "available"
TAG = "tag"  # occ
VERSION, TAGS = "version", "tags"  # occ_history
TOKENS = "tokens"  # set
STATUS, QUANTITY, ALLOCATION = "status", "quantity", "allocation"
REQUEST_ID, RELEASED_BY, RELEASED_AT, EXPIRES_AT = "requestId", "releasedBy", "releasedAt", "expiresAt"
QUOTA, SHARES = "capacity", "shares"  # a counter item's capacity (an escrowed share's moves with transfers); META's split
SOURCE, TARGET = "source", "target"  # a transfer's Regions
RECEIPT = "#IN"


class Status(StrEnum):
    """A reservation record's status."""

    CONFIRMED = "CONFIRMED"
    RELEASED = "RELEASED"
    PENDING = "PENDING"  # atomic/occ with a key: claimed, not yet applied
    RELEASING = "RELEASED_PENDING"  # MRSC: released, the give-back not yet confirmed (no transaction to do both)
    UNKNOWN = "UNKNOWN"  # atomic/occ: the outcome is unknown (it may hold the quantity)


class Action(Enum):
    """The actions of this family's transactions: the record, the resource, each counter item."""

    RECORD = "record"
    RESOURCE = "resource"
    C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 = range(10)
    C10, C11, C12, C13, C14, C15, C16, C17, C18, C19 = range(10, 20)


COUNTERS = tuple(a for a in Action if isinstance(a.value, int))
"""One action name per counter item of a transaction (at most [`MAX_SHARDS`][counters.store.resources.MAX_SHARDS])."""


# -- keys ------------------------------------------------------------------------------------------
def resource_key(resource_id: str) -> Key:
    """The key of an unsharded resource's counter item."""
    return {"PK": f"RES#{resource_id}", "SK": "META"}


def shard_key(resource_id: str, n: int) -> Key:
    """The key of shard ``n`` of a resource."""
    return {"PK": f"RES#{resource_id}#{n}", "SK": "SHARD"}


def share_key(resource_id: str, region: str, n: int | None = None) -> Key:
    """A Region's escrowed share (MREC): unsharded, or shard ``n`` of it."""
    if n is None:
        return {"PK": f"RES#{resource_id}@{region}", "SK": "SHARE"}
    return {"PK": f"RES#{resource_id}@{region}#{n}", "SK": "SHARD"}


def transfers_pk(resource_id: str) -> str:
    """The partition key of a resource's transfers."""
    return f"RES#{resource_id}#XFER"


TRANSFERS = uuid.UUID("0b8d6f8e-3f7a-4c59-8a54-52e4c1d0a7b3")
"""The uuid5 namespace of transfer ids (the reservations service's)."""


def transfer_id(resource_id: str, source: str, idempotency_key: str) -> str:
    """A transfer's id: its resource, its source Region and its key (the source is part of its
    identity: the same key sent in two Regions is two transfers, never one record two Regions write)."""
    return str(uuid.uuid5(TRANSFERS, f"{resource_id}\ntransfer\n{source}\n{idempotency_key}"))


def transfer_key(resource_id: str, transfer_id: str, *, receipt: bool = False) -> Key:
    """The key of a transfer (or, with ``receipt``, of its receipt)."""
    return {"PK": transfers_pk(resource_id), "SK": transfer_id + (RECEIPT if receipt else "")}


def record_key(token: str, region: str = "") -> Key:
    """The reservation record (the marker of approach 5) of a request token. On an MREC table each
    Region writes its own (``RSV@<region>``): a failover re-send taken in another Region during a
    partition never overwrites (or, dropping its claim, deletes) the first Region's record."""
    return {"PK": f"RSV#{token}", "SK": f"RSV@{region}" if region else "RSV"}


# -- facts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Counter:
    """A counter item as read: the two numbers, and what its approach remembers."""

    reserved: int = 0
    available: int = 0
    tag: str = ""
    version: int = 0
    tags: tuple[str, ...] = ()
    tokens: frozenset[str] = frozenset()

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Counter | None:
        """The counter an item holds, or None."""
        if not item:
            return None
        return cls(
            int(item.get(RESERVED, 0)),
            int(item.get(AVAILABLE, 0)),
            str(item.get(TAG, "")),
            int(item.get(VERSION, 0)),
            tuple(item.get(TAGS) or ()),
            frozenset(item.get(TOKENS) or ()),
        )

    def values(self) -> dict[str, int]:
        """What a rejection reports."""
        return {AVAILABLE: self.available, RESERVED: self.reserved}


@dataclass(frozen=True)
class Resource:
    """A resource's ``META``; ``counter`` is its count when unsharded."""

    resource_id: str
    capacity: int
    strategy: str
    shards: int
    counter: Counter | None = None
    shares: dict[str, int] | None = None
    """MREC escrow: each Region's share at creation (``None``: one counter for every Region)."""
    region: str = ""
    """The Region this resource is used from: its [`counter_keys`][counters.store.resources.Resource.counter_keys] are this Region's share."""

    @property
    def counter_keys(self) -> list[Key]:
        """The keys of the counter items this Region takes from: its share's, the shards' or the one item."""
        if self.shares is not None:
            return self.keys_in(self.region)
        if self.shards == 1:
            return [resource_key(self.resource_id)]
        return [shard_key(self.resource_id, n) for n in range(self.shards)]

    def keys_in(self, region: str) -> list[Key]:
        """An escrowed resource's counter items in ``region`` (only that Region writes them)."""
        if self.shares is None or region not in self.shares:
            raise ValueError(f"resource {self.resource_id!r} has no share in {region!r}")
        if self.shards == 1:
            return [share_key(self.resource_id, region)]
        return [share_key(self.resource_id, region, n) for n in range(self.shards)]

    def key_for(self, pk: str) -> Key:
        """The counter key whose partition key is ``pk``."""
        return next(key for key in self.counter_keys if key["PK"] == pk)


@dataclass(frozen=True)
class Record:
    """A reservation record (or approach 5's marker)."""

    reservation_id: str
    quantity: int
    status: Status
    resource_id: str | None = None
    request_id: str | None = None
    owner: str | None = None
    allocation: dict[str, int] | None = None
    created_at: int = 0
    released_at: int | None = None
    released_by: str | None = None
    region: str = ""
    """The Region that wrote it (multi-Region tables): an escrowed hold is given back there only."""

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Record | None:
        """The record an item holds, or None."""
        if not item:
            return None
        allocation = item.get(ALLOCATION)
        released_at = item.get(RELEASED_AT)
        return cls(
            reservation_id=str(item.get("reservationId") or str(item["PK"]).removeprefix("RSV#")),
            quantity=int(item.get(QUANTITY, -1)),
            status=Status(item.get(STATUS, Status.CONFIRMED)),
            resource_id=item.get("resourceId"),
            request_id=item.get(REQUEST_ID),
            owner=item.get("owner"),
            allocation={str(k): int(v) for k, v in allocation.items()} if allocation is not None else None,
            created_at=int(item.get("createdAt", 0)),
            released_at=int(released_at) if released_at is not None else None,
            released_by=item.get(RELEASED_BY),
            region=str(item.get(REGION_ATTRIBUTE, "")),
        )


@dataclass(frozen=True)
class Transfer:
    """Units sent from one Region's share to another's (MREC escrow); ``received``: its receipt exists here."""

    transfer_id: str
    source: str
    target: str
    quantity: int
    request_id: str = ""
    received: bool = False


# -- requests --------------------------------------------------------------------------------------
EXISTS = Path(PK).exists()  # ADD would otherwise create a phantom counter item; never resurrect a deleted one
IS_NEW = Path(PK).missing()  # never overwrite a resource, shard or reservation record


def fits(delta: int) -> Cond:
    """The threshold guarding a delta of this sign: a take never exceeds what is left (reserved
    never above capacity), a give-back never exceeds what was taken (reserved never below 0)."""
    return Path(AVAILABLE) >= delta if delta > 0 else Path(RESERVED) >= -delta


def guard(delta: int, bounded: bool) -> Cond:
    """The write's condition: the item exists and, if ``bounded``, ``delta`` fits."""
    return EXISTS & fits(delta) if bounded else EXISTS


def adjust(table: str, key: Key, delta: int, bounded: bool = True) -> Update:
    """Approach 1's write (and every approach's give-back): ``ADD reserved d, available -d``."""
    return Update(table, key).add(RESERVED, delta).add(AVAILABLE, -delta).when(guard(delta, bounded))


def give_back(table: str, key: Key, quantity: int) -> Update:
    """A transaction's give-back of ``quantity`` (the caller adds its own guard on the record)."""
    return adjust(table, key, -quantity)


def occ_write(table: str, key: Key, seen: Counter, delta: int, tag: str) -> Update:
    """Approach 2: the values computed from ``seen`` and a fresh tag, if nobody wrote since."""
    update = Update(table, key).set(RESERVED, seen.reserved + delta).set(AVAILABLE, seen.available - delta).set(TAG, tag)
    return update.when(EXISTS & (Path(TAG) == seen.tag))


def quota_adjust(table: str, key: Key, delta: int) -> Update:
    """An escrow transfer's move of a counter item's capacity: ``available`` and ``capacity`` by
    ``delta`` (``reserved`` untouched); a debit never takes more than is available."""
    update = Update(table, key).add(AVAILABLE, delta).add(QUOTA, delta)
    return update.when(EXISTS & (Path(AVAILABLE) >= -delta) if delta < 0 else EXISTS)


def chain_write(table: str, key: Key, seen: Counter, delta: int, chain: list[str]) -> Update:
    """Approach 3: the values from ``seen``, the next version and the chain, if nobody wrote since."""
    update = Update(table, key).set(RESERVED, seen.reserved + delta).set(AVAILABLE, seen.available - delta)
    update.set(VERSION, seen.version + 1).set(TAGS, chain)
    return update.when(EXISTS & (Path(VERSION) == seen.version))


def chain_give_back(table: str, key: Key, quantity: int, tag: str) -> Update:
    """Give back and append the release's tag (``version`` keeps matching the chain's end; the
    chain is not trimmed here, there is no read in a transaction: the next take trims it)."""
    return give_back(table, key, quantity).add(VERSION, 1).set(TAGS, list_append(Path(TAGS), [tag]))


def set_write(table: str, key: Key, delta: int, token: str, *, bounded: bool = True, max_tokens: int = 0) -> Update:
    """Approach 7: a take adds the token (a token counts once, the set stays bounded); a give-back
    deletes it, and only if it is there (it gives back only what this token took, once)."""
    update = adjust(table, key, delta, bounded)
    tokens = Path(TOKENS)
    if delta > 0:
        return update.add(TOKENS, {token}).when(tokens.missing() | ((tokens.size() < max_tokens) & ~tokens.contains(token)))
    return update.delete(TOKENS, {token}).when(tokens.contains(token))


def transfer_put(table: str, resource_id: str, transfer_id: str, fields: Fields, *, receipt: bool = False) -> Put:
    """A transfer (written by its source Region) or its receipt (by its target), never overwritten."""
    item = {**transfer_key(resource_id, transfer_id, receipt=receipt), **fields, "createdAt": int(time.time())}
    return Put(table, item=item).when(IS_NEW)


def record_put(
    table: str, token: str, quantity: int, allocation: Mapping[str, int] | None, fields: Fields, status: Status, region: str = ""
) -> Put:
    """The reservation record, unless one exists (one record per request token: the double-apply
    guard). No TTL: a hold never expires (an expired record would strand its quantity; the
    release starts the TTL)."""
    item: dict[str, object] = {**record_key(token, region), **fields, QUANTITY: quantity, STATUS: status, "createdAt": int(time.time())}
    if allocation is not None:
        item[ALLOCATION] = dict(allocation)
    return Put(table, item=item).when(IS_NEW)


# -- the calls -------------------------------------------------------------------------------------
def found(failure: Classified | None) -> Counter | None:
    """The counter item a single write's failed condition found (``ALL_OLD``)."""
    return Counter.of(old_item(failure))


@dataclass
class Taken:
    """How a transaction over counter items (and perhaps the record) ended."""

    outcome: Outcome
    capacity: Capacity
    attempts: int
    unknown_seen: bool = False
    mismatch: bool = False
    """``IdempotentParameterMismatch``: the ClientRequestToken was used with other parameters."""
    counter: Counter | None = None
    """The first counter item whose condition failed, as it was (``None``: there was none)."""
    record_failed: bool = False
    record: Record | None = None
    """The record already there when the record's condition failed."""


class ResourceStore(Store):
    """The calls of this family, each through the retry engine. ``region``: the Region whose
    reservation records it reads and writes (MREC; ``""``: the one record of every Region)."""

    region: str = ""

    def __init__(
        self, table_name: str, *, dynamodb: DynamoDBClient | None = None, retry: RetryPolicy | None = None, topology: Topology = ONE_REGION
    ) -> None:
        super().__init__(table_name, dynamodb=dynamodb, retry=retry)
        self.topology = topology
        """Where this store writes: a resource is created only in its home Region on MREC ([`RESOURCE`][counters.store.resources.RESOURCE])."""

    def _get(self, key: Key, capacity: Capacity | None) -> dict[str, Any] | None:
        response = read(self.dynamodb.get_item, self.retry, capacity, **Get(self.table_name, key).strongly().params())
        return from_item(response.get("Item"))

    def counter(self, key: Key, capacity: Capacity | None = None) -> Counter | None:
        """The counter item at ``key`` (strongly consistent), or None."""
        return Counter.of(self._get(key, capacity))

    def record(self, token: str, capacity: Capacity | None = None) -> Record | None:
        """This Region's record of a request token, or None."""
        return Record.of(self._get(record_key(token, self.region), capacity))

    def records(self, token: str, capacity: Capacity | None = None) -> list[Record]:
        """Every Region's record of a request token this replica holds (MREC; one consistent Query)."""
        query = Query(self.table_name, (Path(PK) == record_key(token)["PK"]) & Path("SK").begins_with("RSV"), consistent=True)
        response = read(self.dynamodb.query, self.retry, capacity, **query.params())
        return [r for r in (Record.of(from_item(raw)) for raw in response.get("Items", [])) if r is not None]

    def resource(self, resource_id: str, region: str = "") -> Resource | None:
        """The resource's META; an escrowed one's counter keys are ``region``'s share."""
        item = self._get(resource_key(resource_id), None)
        if item is None:
            return None
        counter = Counter.of(item) if RESERVED in item else None
        raw = item.get(SHARES)
        shares = {str(k): int(v) for k, v in raw.items()} if isinstance(raw, Mapping) else None
        return Resource(resource_id, int(item["capacity"]), str(item["strategy"]), int(item["shards"]), counter, shares, region)

    def quotas(self, keys: list[Key], capacity: Capacity) -> list[tuple[int, Counter]]:
        """Counter items' capacities (an escrowed share's) and counts, each one strongly consistent
        read of this Region's replica (no snapshot: MRSC has no TransactGetItems); missing: 0/0."""
        found = []
        for key in keys:
            item = self._get(key, capacity)
            found.append((int(item.get(QUOTA, 0)) if item else 0, Counter.of(item) or Counter()))
        return found

    def transfers(self, resource_id: str, capacity: Capacity | None = None) -> list[Transfer]:
        """Every transfer of the resource this Region's replica holds, each marked ``received``
        when its receipt is here too (one consistent Query of the transfers' partition)."""
        query = Query(self.table_name, Path(PK) == transfers_pk(resource_id), consistent=True)
        params = query.params()
        sent: dict[str, dict[str, Any]] = {}
        receipts: set[str] = set()
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **params)
            for raw in page.get("Items", []):
                item = from_item(raw) or {}
                sk = str(item["SK"])
                if sk.endswith(RECEIPT):
                    receipts.add(sk.removesuffix(RECEIPT))
                else:
                    sent[sk] = item
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [
            Transfer(tid, str(i[SOURCE]), str(i[TARGET]), int(i[QUANTITY]), str(i.get(REQUEST_ID, "")), tid in receipts)
            for tid, i in sorted(sent.items())
        ]

    def transfer(self, resource_id: str, transfer_id: str) -> Transfer | None:
        """The transfer ``transfer_id`` of a resource, or None."""
        item = self._get(transfer_key(resource_id, transfer_id), None)
        if item is None:
            return None
        return Transfer(transfer_id, str(item[SOURCE]), str(item[TARGET]), int(item[QUANTITY]), str(item.get(REQUEST_ID, "")))

    def move(self, updates: list[Update], put: Put) -> tuple[Outcome, bool, Counter | None]:
        """A transfer's step in one Region: capacity moves on counter items and the transfer's (or
        receipt's) Put, in one transaction with a fresh ClientRequestToken re-sent after an unknown
        outcome. Returns (outcome, the Put's condition failed: it exists, the counter item that
        failed its condition as it was)."""
        tx: Transaction[Action] = Transaction()
        for name, update in zip(COUNTERS, updates, strict=False):
            tx.update(name, update)
        tx.put(Action.RECORD, put)
        report = run(self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=self.retry, write=True, token=True)
        if report.outcome is not Outcome.REJECTED:
            return report.outcome, False, None
        cancelled = tx.cancellation(report.failure)
        failed = [name for name in COUNTERS if cancelled.failed(name)]
        return report.outcome, cancelled.failed(Action.RECORD), Counter.of(cancelled.old(failed[0])) if failed else None

    def create_single(self, meta: Fields) -> Outcome:
        """An unsharded resource as one conditional Put (MRSC has no transactions)."""
        RESOURCE.require(self.topology, str(meta["resourceId"]))
        return run(self.dynamodb.put_item, Put(self.table_name, item=meta).when(IS_NEW).params(), policy=self.retry, write=True).outcome

    def mark_releasing(self, rid: str, request_id: str) -> tuple[Outcome, Record | None]:
        """MRSC release, step 1: ``CONFIRMED -> RELEASED_PENDING`` (who released it). The give-back
        follows as its own single-item write, then [`finish_release`][counters.store.resources.ResourceStore.finish_release]. Returns the record as
        it was when the condition failed."""
        update = Update(self.table_name, record_key(rid, self.region)).set_all({STATUS: Status.RELEASING, RELEASED_BY: request_id})
        report = run(self.dynamodb.update_item, update.when(Path(STATUS) == Status.CONFIRMED).params(), policy=self.retry, write=True)
        return report.outcome, Record.of(old_item(report.failure)) if report.outcome is Outcome.REJECTED else None

    def finish_release(self, rid: str, expires_in: int) -> Outcome:
        """MRSC release, step 3: ``RELEASED_PENDING -> RELEASED`` once the give-back applied."""
        now = int(time.time())
        update = Update(self.table_name, record_key(rid, self.region)).set_all(
            {STATUS: Status.RELEASED, RELEASED_AT: now, EXPIRES_AT: now + expires_in}
        )
        return run(self.dynamodb.update_item, update.when(Path(STATUS) == Status.RELEASING).params(), policy=self.retry, write=True).outcome

    def snapshot(self, keys: list[Key], capacity: Capacity) -> list[Counter]:
        """Every shard item, read in one serializable snapshot (2 RCU per item up to 4 KB); a missing
        one reads as 0/0. Cancelled when it overlaps a transaction writing those items (or
        throttled): it is a read, retried within the policy; past it, ContentionError."""
        gets = [{"Get": Get(self.table_name, key).params()} for key in keys]
        response = read(self.dynamodb.transact_get_items, self.retry, capacity, TransactItems=gets)
        return [Counter.of(from_item(r.get("Item"))) or Counter() for r in response["Responses"]]

    def write_counter(
        self, update: Update | Params, *, capacity: Capacity | None = None, on_condition: Hook | None = None, on_unknown: Hook | None = None
    ) -> Report:
        """One counter write (UpdateItem; or the params of an optimistic approach's planned write,
        which its hooks re-plan with [`Resend`][counters.core.engine.Resend]); a hook reads the item a failed condition found with [`found`][counters.store.resources.found]."""
        return run(
            self.dynamodb.update_item,
            update.params() if isinstance(update, Update) else update,
            policy=self.retry,
            capacity=capacity,
            write=True,
            on_condition=on_condition,
            on_unknown=on_unknown,
        )

    def take(self, updates: list[Update], record: Put | None = None, *, token: str | None = None) -> Taken:
        """Counter writes (and the record's Put) in one transaction; ``token`` pins its ClientRequestToken."""
        tx: Transaction[Action] = Transaction()
        for name, update in zip(COUNTERS, updates, strict=False):
            tx.update(name, update)
        if record is not None:
            tx.put(Action.RECORD, record)
        try:
            report = run(
                self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=self.retry, write=True, token=token or True
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "IdempotentParameterMismatchException":
                raise
            capacity = Capacity()
            capacity.add_response(exc.response, write=True)
            return Taken(Outcome.REJECTED, capacity, 1, mismatch=True)
        taken = Taken(report.outcome, report.capacity, report.attempts, report.unknown_seen)
        if report.outcome is Outcome.REJECTED:
            cancelled = tx.cancellation(report.failure)
            failed = [name for name in COUNTERS if cancelled.failed(name)]
            if failed:
                taken.counter = Counter.of(cancelled.old(failed[0]))
            if record is not None and cancelled.failed(Action.RECORD):
                taken.record_failed, taken.record = True, Record.of(cancelled.old(Action.RECORD))
        return taken

    def create(self, meta: Fields, counters: Sequence[tuple[Key, Fields]]) -> Outcome:
        """The resource (and its shards, or every Region's share) in one transaction, none overwriting
        an existing item; on MREC only in the id's home Region ([`RESOURCE`][counters.store.resources.RESOURCE]: elsewhere
        [`WrongRegion`][counters.core.errors.WrongRegion], nothing written)."""
        RESOURCE.require(self.topology, str(meta["resourceId"]))
        tx: Transaction[Action] = Transaction()
        tx.put(Action.RESOURCE, Put(self.table_name, item=meta).when(IS_NEW))
        for name, (key, attributes) in zip(COUNTERS, counters, strict=False):
            tx.put(name, Put(self.table_name, item={**key, **attributes}).when(IS_NEW))
        return run(self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=self.retry, write=True, token=True).outcome

    def put_record(self, put: Put, request_id: str) -> tuple[bool, Record | None] | None:
        """Put a record unless one exists: (created by this request, the stored record); ``None``
        when the engine's budget ran out. This request's own Put (an attempt whose answer was
        lost) carries its ``requestId``, so it reads as created."""

        def exists(_report: Report, failure: Classified) -> Stop:
            stored = Record.of(old_item(failure))
            return Stop((stored is not None and stored.request_id == request_id, stored))

        report = run(self.dynamodb.put_item, put.params(), policy=self.retry, write=True, on_condition=exists)
        if report.stopped and isinstance(report.value, tuple):
            created, stored = report.value
            return bool(created), stored if isinstance(stored, Record) else None
        if report.outcome is Outcome.APPLIED:
            return True, Record.of(put.item)
        return None

    def drop_claim(self, rid: str) -> None:
        """Delete a ``PENDING`` claim (best effort: one left behind reads as UNKNOWN later)."""
        delete = Delete(self.table_name, key=record_key(rid, self.region)).when(Path(STATUS) == Status.PENDING)
        run(self.dynamodb.delete_item, delete.params(), policy=self.retry, write=True)

    def settle_claim(self, rid: str, status: Status, allocation: Mapping[str, int] | None) -> Outcome:
        """``PENDING`` -> ``status`` (with the allocation), conditioned on PENDING: a settled claim
        is never settled twice (a re-send after an unknown outcome fails harmlessly)."""
        update = Update(self.table_name, record_key(rid, self.region)).set(STATUS, status).when(Path(STATUS) == Status.PENDING)
        if allocation is not None:
            update.set(ALLOCATION, dict(allocation))
        return run(self.dynamodb.update_item, update.params(), policy=self.retry, write=True).outcome

    def release(self, rid: str, request_id: str, expires_in: int, give_backs: list[Update]) -> Taken:
        """``CONFIRMED -> RELEASED`` (who released it, and the TTL starts) with the give-back on each
        counter item, in one transaction; ``record_failed``: the record was no longer CONFIRMED
        (``record``: as it was then)."""
        now = int(time.time())
        record = Update(self.table_name, record_key(rid, self.region)).set_all(
            {STATUS: Status.RELEASED, RELEASED_AT: now, RELEASED_BY: request_id, EXPIRES_AT: now + expires_in}
        )
        record.when(Path(STATUS) == Status.CONFIRMED)
        tx: Transaction[Action] = Transaction()
        tx.update(Action.RECORD, record)
        for name, update in zip(COUNTERS, give_backs, strict=False):
            tx.update(name, update)
        report = run(self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=self.retry, write=True, token=True)
        cancelled = tx.cancellation(report.failure if report.outcome is Outcome.REJECTED else None)
        taken = Taken(report.outcome, report.capacity, report.attempts, report.unknown_seen)
        taken.record_failed, taken.record = cancelled.failed(Action.RECORD), Record.of(cancelled.old(Action.RECORD))
        return taken
