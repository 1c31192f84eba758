"""Orders with auto-increment ids (seed 05), idempotent by key, and the LAST_ORDER pointer (seed 04).

| item | PK | SK | written |
|---|---|---|---|
| order | ``ORDER#<n>`` | ``META`` | with its id, in one transaction with the key record |
| idempotency record | ``ORDERKEY#<key>``, ``ORDERKEY#<owner>#<key>`` with authorization on | ``META`` | ``orderId``, ``requestHash``, ``expiresAt`` (the key window: TTL, or the sweeper on MRSC) |
| sequence | ``SEQ#ORDER`` | ``META`` | [`counters.primitives.sequence`][counters.primitives.sequence] |
| pointer | ``POINTER#LAST_ORDER`` | ``META`` | ``orderId``, by the order pointer function ([`counters.primitives.pointer`][counters.primitives.pointer]) |

Idempotency
    [`Orders.place`][counters.services.orders.Orders.place] first reads the key record (1 RCU): a replay answers the recorded
    order and writes nothing. Otherwise the order and the key record are Put in **one**
    transaction, each with ``attribute_not_exists``, so an order never exists without its key
    record (and the reverse). Two concurrent requests with one key: one transaction wins, the
    other fails on the key record and answers the winner's order (``ALL_OLD`` tells it which).
    The same key with a different body (customerId/items): [`IdempotencyKeyReused`][counters.core.errors.IdempotencyKeyReused] (422).
    Keys are per caller when authorization is on (the record's key includes the owner, as a
    reservation id does): another user's key is never found, so it neither answers 422 (telling
    that it exists) nor blocks anyone.

    A key is honoured for the key window (``IdempotencyWindowDays``, default 31 days,
    [`Settings.idempotency_window_days`][counters.core.settings.Settings]): its record's ``expiresAt`` is the first
    request's time plus the window, and DynamoDB TTL (on MRSC, the expiry sweeper) deletes it
    after that. Order keys carry no time of their own, so the record decides: one found past its
    ``expiresAt`` (TTL deletes some time after) is refused, 422
    [`IdempotencyKeyExpired`][counters.core.errors.IdempotencyKeyExpired] naming the window; once it is deleted the key is
    unknown and places a new order. The order itself is never deleted.

    * ``gapless``: the key record is in the *same* transaction as the counter bump, so a
      losing twin, a replay and a client resend never take an id: 1..N with no holes.
    * ``fast``: the ``ADD`` takes the id **before** the transaction that Puts the order and
      the key record. A replay still answers the recorded id, and never creates a second
      order, but each of these burns an id (a gap, never a duplicate): a losing concurrent
      twin; an unknown outcome of the ADD (retried: the first ADD may have applied); a
      request whose order transaction ran out of retries (503: the client resends, the key
      record decides).

The key record carries the answer
    The key record holds the order's content (``customerId``, ``items``, ``createdAt``) beside its
    ``orderId``: a replay answers from the key's **own** record, and reads ``ORDER#<n>`` only to
    check that it belongs to this key (same ``idempotencyKey`` and ``requestId``; the body's hash
    for records written before ``requestId``). An order that does not belong is an
    [`IntegrityError`][counters.core.errors.IntegrityError] (409), never the answer: before ids were unique across Regions, two
    Regions' ``ORDER#5`` met under last-writer-wins and a re-send of one key answered 200 with
    the other customer's items.

Across Regions ([docs/orders.md "Global tables"](../orders.md#global-tables))
    MREC: ids are Region-strided ([`counters.primitives.sequence`][counters.primitives.sequence]), orders are stamped with
    their Region (``writerRegion``) and the pointer is per Region. An order and its key record
    replicate separately: a replay that finds the record but not yet the order answers from the
    record. MRSC: no transactions, so the key record is Put first and the order second (each
    ``attribute_not_exists``); a replay that finds the record without its order (the request died
    in between) completes the order from the record. ``gapless``: home Region only on MREC,
    refused on MRSC.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, TypedDict

from counters.core import clock
from counters.core.client import DynamoDBClient
from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.errors import (
    ContentionError,
    IdempotencyKeyExpired,
    IdempotencyKeyReused,
    IntegrityError,
    NotFound,
    StreamConsumerMissing,
)
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.items import Record
from counters.core.json import JSONObject
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.records import dataclass
from counters.core.regions import REGION_ATTRIBUTE, RegionSettings, Topology
from counters.core.settings import DAY_SECONDS, IDEMPOTENCY_WINDOW_DAYS, env
from counters.core.settings import stream_consumers as stream_consumers_run
from counters.primitives.pointer import Pointer
from counters.primitives.sequence import Sequence, SequenceMode
from counters.store.expr import Transaction
from counters.store.sequences import OrderAction, idempotency_key, order_id_from_pk, order_key, order_writes

__all__ = [
    "Orders",
    "OrderSettings",
    "PlacePayload",
    "Placed",
    "idempotency_key",
    "order_id_from_pk",
    "order_key",
    "order_policy",
    "placed_here",
    "public_order",
    "window_text",
]

SEQUENCE = "ORDER"
POINTER = "LAST_ORDER"
KEY_WINDOW_SECONDS = IDEMPOTENCY_WINDOW_DAYS * DAY_SECONDS
"""How long a key is honoured by default (its record's ``expiresAt``: DynamoDB TTL, or the MRSC
sweeper, deletes it after); orders themselves stay."""


def request_hash(customer_id: str, items: list[JSONObject]) -> str:
    """What makes two requests "the same": the body, canonically serialised."""
    raw = json.dumps({"customerId": customer_id, "items": items}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


class OrderLine(TypedDict):
    """One line of an order: a SKU and its quantity."""

    sku: str
    quantity: int


class PublicOrder(TypedDict):
    """An order as the API shows it ([public_order][counters.services.orders.public_order]);
    `createdAt` (epoch s) is `None` for an order stored without it."""

    orderId: int
    customerId: str
    items: list[OrderLine]
    createdAt: int | None


class LatestOrder(TypedDict):
    """`GET /orders/latest`: the LAST_ORDER pointer's order id (`None` before the first order)."""

    orderId: int | None


@dataclass
class Placed:
    """The answer to [`Orders.place`][counters.services.orders.Orders.place]: the order, and whether this request created it."""

    order: PublicOrder
    """The public order ([`public_order`][counters.services.orders.public_order])."""
    created: bool
    result: Result


def order_policy(topology: Topology) -> RegionPolicy:
    """The orders feature's Region policy, resolved once where its settings are read: the sequence's
    ``fast`` ids and the LAST_ORDER pointer are per Region where conditions see one replica (MREC)."""
    return RegionPolicy.of(topology)


@dataclass(frozen=True, kw_only=True)
class OrderSettings(RegionSettings):
    """``SEQUENCE_MODE`` (template parameter ``SequenceMode``): ``fast`` or ``gapless`` order ids;
    the global table's topology ([`RegionSettings`][counters.core.regions.RegionSettings])."""

    sequence_mode: SequenceMode = env("SEQUENCE_MODE", SequenceMode.FAST)


class Orders:
    """Place orders with sequence ids exactly once per idempotency key; read them; read the pointer."""

    def __init__(
        self,
        table_name: str,
        *,
        mode: SequenceMode | str = SequenceMode.FAST,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        occ: RetryPolicy | None = None,
        key_window_seconds: int = KEY_WINDOW_SECONDS,
        policy: RegionPolicy = ONE_REGION_POLICY,
        stream_consumers: bool | None = None,
        now: Callable[[], float] = clock.now,
    ) -> None:
        """``stream_consumers``: whether the order pointer function runs on the table's stream
        (``None``: ``TALLY_STREAM_CONSUMERS``); without it [`latest`][counters.services.orders.Orders.latest] is refused.
        ``key_window_seconds``: how long a key is honoured; ``now``: the clock it is measured with."""
        if key_window_seconds < 1:
            raise ValueError("key_window_seconds must be at least 1")
        self.table_name = table_name
        self.stream_consumers = stream_consumers_run(stream_consumers)
        self.key_window_seconds = key_window_seconds
        self.now = now
        self.retry = retry or RetryPolicy()
        self.policy = policy
        """What this table lets orders do across Regions ([`order_policy`][counters.services.orders.order_policy])."""
        self.sequence = Sequence(table_name, SEQUENCE, mode=mode, dynamodb=dynamodb, retry=retry, occ=occ, policy=policy)
        self.pointer = Pointer(table_name, POINTER, attribute="orderId", dynamodb=dynamodb, retry=retry, policy=policy)

    @classmethod
    def from_settings(cls, settings: OrderSettings) -> Orders:
        """The service on the settings' table with the settings' sequence mode and Regions."""
        policy = order_policy(settings.topology)
        return cls(
            settings.table_name,
            mode=settings.sequence_mode,
            retry=settings.retry,
            policy=policy,
            stream_consumers=settings.stream_consumers,
            key_window_seconds=settings.idempotency_window_seconds,
        )

    @property
    def mode(self) -> SequenceMode:
        """The order sequence's mode."""
        return self.sequence.mode

    def place(
        self, *, key: str, customer_id: str, items: list[JSONObject], owner: str | None = None, request_id: str | None = None
    ) -> Placed:
        """Create the order for ``key`` once; a replay answers the same order (``created=False``,
        unless the key record carries this request's id: a re-drive of the request that made it).
        ``owner`` (the verified caller) scopes the key: each caller has their own keys."""
        self.sequence.check_mode()  # gapless outside its home Region, or without transactions: refused before anything is read
        request_id = request_id or new_request_id()
        fingerprint = request_hash(customer_id, items)
        now = int(self.now())
        record, capacity = self._get(idempotency_key(key, owner))
        if record is not None:
            return self._replay(key, record, fingerprint, Result(Outcome.DUPLICATE, capacity=capacity), request_id, now)
        region = self.policy.stamp

        def order_item(order_id: int) -> dict[str, object]:
            return _order_item(
                order_id, key=key, customer_id=customer_id, items=items, request_id=request_id, created_at=now, region=region
            )

        def items_for(order_id: int) -> Transaction[Enum]:
            record: dict[str, object] = {
                **idempotency_key(key, owner),
                "orderId": order_id,
                "requestHash": fingerprint,
                "requestId": request_id,
                "expiresAt": now + self.key_window_seconds,
                # the answer itself: a replay never depends on ORDER#<n> (which replicates apart from this record)
                "customerId": customer_id,
                "items": items,
                "createdAt": now,
            }
            if region:
                record[REGION_ATTRIBUTE] = region
            return order_writes(self.table_name, order_item(order_id), record)

        claim = self.sequence.claim(items_for)
        result = claim.result
        result.capacity.merge(capacity)
        if result.outcome is Outcome.APPLIED and claim.value is not None:
            result.value = claim.value
            return Placed(public_order(order_item(claim.value)), created=True, result=result)
        taken_by = claim.conflicts.get(OrderAction.KEY_RECORD)
        if result.outcome is Outcome.REJECTED and taken_by:
            # The key is taken (a concurrent twin, or an earlier attempt of this request): its order is the answer.
            result.outcome = Outcome.DUPLICATE
            return self._replay(key, taken_by, fingerprint, result, request_id, now)
        own = claim.conflicts.get(OrderAction.ORDER)
        if result.outcome is Outcome.REJECTED and claim.value is not None and own and own.get("requestId") == request_id:
            # MRSC (order written after its key record): an earlier attempt of this call wrote the
            # order and its answer was lost; the retry found it. It is this request's order.
            result.outcome, result.reason, result.value = Outcome.APPLIED, None, claim.value
            return Placed(public_order(order_item(claim.value)), created=True, result=result)
        if result.outcome is Outcome.REJECTED:
            raise IntegrityError(f"an order with the next id already exists: the {self.sequence.name} sequence is behind its orders")
        # Safe to re-drive: the ORDERKEY# record makes a replay answer the same order (fast mode may burn an id: a gap, never a duplicate).
        payload: JSONObject = {
            "key": key,
            "customerId": customer_id,
            "items": [*items],
            "owner": owner,
        }  # the worker uses the same scoped key
        command = Command("place_order", payload, request_id)
        raise ContentionError(f"could not take an order id after {result.attempts} attempts; resend the same request", command=command)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred order placements the retry worker replays."""
        return {"place_order": Replayable(PlacePayload, self._replay_place)}

    def _replay_place(self, p: PlacePayload, command: Command) -> Verdict:
        placed = self.place(key=p.key, customer_id=p.customerId, items=p.items, owner=p.owner, request_id=command.operation_id)
        return Verdict("APPLIED" if placed.created else "DUPLICATE", placed.order)

    def _replay(self, key: str, record: Record, fingerprint: str, result: Result, request_id: str, now: int) -> Placed:
        mine = record.get("requestId") == request_id  # this request's own write, whose answer was lost
        if not mine and "expiresAt" in record and int(record["expiresAt"]) <= now:
            # Past its window, not yet deleted (TTL, or the MRSC sweeper, deletes some time after).
            raise IdempotencyKeyExpired(
                f"Idempotency-Key {key!r} is older than the idempotency window ({window_text(self.key_window_seconds)}, "
                "IdempotencyWindowDays): "
                "its first order can no longer be answered; send a new key to place a new order"
            )
        if record.get("requestHash") != fingerprint:
            raise IdempotencyKeyReused(f"Idempotency-Key {key!r} was used for a different order request")
        order_id = int(record["orderId"])
        stored, _ = self._get(order_key(order_id))
        if stored is not None and not _belongs(stored, record, key):
            # Never answer another request's order (ids that collided across Regions).
            raise IntegrityError(f"order {order_id} recorded for Idempotency-Key {key!r} holds another request's order")
        if "items" not in record:  # a key record written before it carried its order
            if stored is None:
                raise NotFound(f"order {order_id} not found")
            order = public_order(stored)
        else:
            order = public_order(record)
            if stored is None:
                # Written in order (MRSC), the key record comes first and the request that wrote it died
                # before its order: complete it from the record (only if still absent). Written together,
                # the order is one that has not replicated here yet: the record is the answer.
                self.policy.writes.complete(
                    lambda: self.sequence.store.put_if_new(
                        _order_item(
                            order_id,
                            key=key,
                            customer_id=str(record["customerId"]),
                            items=list(record["items"]),
                            request_id=str(record.get("requestId", "")),
                            created_at=record.get("createdAt"),
                            region=str(record.get(REGION_ATTRIBUTE, "")),
                        )
                    )
                )
        result.value = order["orderId"]
        if mine:
            result.outcome = Outcome.APPLIED
        return Placed(order, created=mine, result=result)

    def read(self, order_id: int) -> PublicOrder:
        """The stored order ``order_id`` (404 when missing, or another caller's)."""
        item, _ = self._get(order_key(order_id))
        if item is None:
            raise NotFound(f"order {order_id} not found")
        return public_order(item)

    def latest(self) -> int | None:
        """The LAST_ORDER pointer: one strongly consistent GetItem; ``None`` before any order.
        The order pointer function moves it from the table's stream: undeclared
        (``stream_consumers``), this raises [`StreamConsumerMissing`][counters.core.errors.StreamConsumerMissing] rather than answer a pointer nothing moves."""
        if not self.stream_consumers:
            raise StreamConsumerMissing(
                "the latest order is the LAST_ORDER pointer, which only the order pointer function moves, from the "
                "table's stream (OrderPointerFunction, functions/order_pointer: sam deploy and make dev run it), and "
                "these Orders were not told that one runs. Run it on the table's stream, then pass "
                "Orders(..., stream_consumers=True) or set TALLY_STREAM_CONSUMERS=true"
            )
        value, _ = self.pointer.read()
        return value

    def _get(self, key: dict[str, str]) -> tuple[Record | None, Capacity]:
        capacity = Capacity()
        return self.sequence.store.read_item(key, capacity), capacity


def window_text(seconds: int) -> str:
    """A key window as its message says it: ``31 days``, ``1 day``, or seconds when not whole days."""
    days, rest = divmod(seconds, DAY_SECONDS)
    if rest:
        return f"{seconds} s"
    return f"{days} day" if days == 1 else f"{days} days"


def placed_here(order: Mapping[str, object], policy: RegionPolicy) -> bool:
    """An order (its stream image) counts for this Region's pointer: where each Region has its own
    pointer item (the policy's ``writer``, MREC), its ``writerRegion`` is this Region (each Region's
    pointer follows its own orders); with the one shared pointer (one Region, MRSC), always."""
    return policy.counts_here(order.get(REGION_ATTRIBUTE))


def _order_item(
    order_id: int, *, key: str, customer_id: str, items: list[Any], request_id: str, created_at: object, region: str
) -> dict[str, object]:
    item: dict[str, object] = {
        **order_key(order_id),
        "orderId": order_id,
        "customerId": customer_id,
        "items": items,
        "idempotencyKey": key,
        "requestId": request_id,
        "createdAt": created_at,
    }
    if region:
        item[REGION_ATTRIBUTE] = region  # which Region took the id: its order pointer follows it
    return item


def _belongs(order: Record, record: Record, key: str) -> bool:
    """``order`` is the one the key ``record`` was written with."""
    if order.get("idempotencyKey") != key:
        return False
    if "requestId" in order and "requestId" in record:
        return bool(order["requestId"] == record["requestId"])
    return request_hash(str(order.get("customerId")), list(order.get("items") or [])) == record.get("requestHash")


@dataclass(frozen=True)
class PlacePayload:
    """A deferred order placement."""

    key: str
    customerId: str
    items: list[JSONObject]
    owner: str | None = None

    def __post_init__(self) -> None:
        require(isinstance(self.key, str) and bool(self.key), "invalid key")
        require(valid_id(self.customerId), "invalid customerId")
        require(isinstance(self.items, list) and bool(self.items), "invalid items")
        require(self.owner is None or (isinstance(self.owner, str) and bool(self.owner)), "invalid owner")


def public_order(item: Record) -> PublicOrder:
    """An order item (as stored, or as about to be written) -> the API's order."""
    return {
        "orderId": int(item["orderId"]),
        "customerId": item["customerId"],
        "items": [{"sku": i["sku"], "quantity": int(i["quantity"])} for i in item["items"]],
        "createdAt": item.get("createdAt"),
    }
