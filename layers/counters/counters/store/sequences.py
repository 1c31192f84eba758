"""Sequences, orders, order keys and pointers: their keys, attributes and requests.

| item | PK | SK |
|---|---|---|
| sequence | ``SEQ#<name>``; ``SEQ#<name>#<Region>`` per Region on an MREC table | ``META`` (``value``: the last value taken) |
| order | ``ORDER#<n>`` | ``META`` |
| order key | ``ORDERKEY#<key>`` (``ORDERKEY#<owner>#<key>`` with authorization on) | ``META`` |
| pointer | ``POINTER#<name>``; ``POINTER#<name>#<Region>`` per Region on an MREC table | ``META`` (the greatest value seen) |

A per-Region item (``writer`` = the Region's name, the feature's
[`RegionPolicy.writer`][counters.core.policy.RegionPolicy]) is written only by its own Region:
last-writer-wins never meets two writers of one item.

The counting rules are the primitives' ([`counters.primitives.sequence`][counters.primitives.sequence],
[`counters.primitives.pointer`][counters.primitives.pointer]) and the service's ([`counters.services.orders`][counters.services.orders]); this module
builds and sends their requests and answers typed facts.
"""

from __future__ import annotations

import time
from enum import Enum

from counters.core.engine import Hook, Report, read, run
from counters.core.failures import RetryPolicy
from counters.core.items import Record
from counters.core.outcome import Capacity
from counters.core.records import dataclass
from counters.core.regions import REGION_ATTRIBUTE
from counters.store.base import Store
from counters.store.expr import Get, Path, Put, Transaction, Update, old_item
from counters.store.items import from_item
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import ANY, HOME, ONCE, REFUSED, TOGETHER, WriterRule, per_region, refused

VALUE = "value"
ORDER_PREFIX = "ORDER#"
UPDATED_AT = "updatedAt"

SHAPES = (
    Shape("sequence", "SEQ#ORDER", "META", "auto-increment ids, `value` ([orders.md](orders.md))"),
    Shape(
        "region sequence", "SEQ#ORDER#<region>", "META", "MREC fast ids: written only by its Region; id = (value-1) x Regions + index + 1"
    ),
    Shape(
        "order",
        "ORDER#<n>",
        "META",
        "`orderId`, `customerId`, `items`, `idempotencyKey`, `requestId`, `createdAt` (`writerRegion` on a global table); with its key record",
    ),
    Shape(
        "order key",
        "ORDERKEY#<key>",
        "META",
        "`ORDERKEY#<sub>#<key>` with Cognito; `orderId`, `requestHash`, the order's content; `expiresAt`: the key window "
        "(`IdempotencyWindowDays`, default 31 days)",
    ),
    Shape("pointer", "POINTER#LAST_ORDER", "META", "monotonic: only ever moves forward"),
    Shape("region pointer", "POINTER#LAST_ORDER#<region>", "META", "MREC: its Region's local orders only; read = max over Regions"),
)
WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "region sequence",
        "SEQ#ORDER#<Region>",
        "META",
        REFUSED,
        per_region("own"),
        REFUSED,
        "MREC `fast`: each Region takes ids from its own stride",
    ),
    WriterRule(
        "sequence",
        "SEQ#ORDER",
        "META",
        HOME,
        HOME,
        ANY,
        "MREC `gapless`: only `HOME_REGION` takes ids (refused elsewhere); MRSC: one counter, each add on the latest version",
    ),
    WriterRule(
        "order",
        "ORDER#<n>",
        "META",
        HOME,
        ONCE,
        ANY,
        "created once by the Region that took its id (its own stride, or the home's sequence): two Regions never take one id",
    ),
    WriterRule(
        "order key",
        "ORDERKEY#<key>",
        "META",
        HOME,
        ANY,
        ANY,
        "MREC: a failover re-send that beats replication places a second order (both kept, unique ids: a detectable twin); "
        "after the heal the key answers one of them ([orders.md](orders.md#global-tables)). MRSC: its condition sees every Region",
    ),
    WriterRule(
        "region pointer",
        "POINTER#LAST_ORDER#<Region>",
        "META",
        REFUSED,
        per_region("max"),
        REFUSED,
        "advanced only from its Region's own orders",
    ),
    WriterRule("pointer", "POINTER#LAST_ORDER", "META", HOME, REFUSED, ANY, "monotonic: a condition that sees every Region (MRSC)"),
)
TABLE = Table(
    "sequences",
    WRITERS,
    {
        "take:fast": Op("a fast sequence", ("region sequence", "sequence")),
        "take:gapless": Op(
            "a gapless sequence",
            ("sequence", "order", "order key"),
            TOGETHER,
            HOME,
            refused("its value and its items commit in one TransactWriteItems, which MRSC does not offer"),
        ),
        "order": Op("an order", ("order", "order key", "region pointer", "pointer")),
    },
)
"""The sequences' (operation x mode) table: a gapless sequence is taken in one transaction, at the home Region of an MREC table."""


class SequenceAction(Enum):
    """The sequence's own action in a transaction that takes a value."""

    COUNTER = "counter"


class OrderAction(Enum):
    """The actions an order writes with its id."""

    ORDER = "order"
    KEY_RECORD = "key_record"


def sequence_key(name: str, writer: str = "") -> dict[str, str]:
    """The sequence ``name``; with ``writer`` (a Region), that Region's own sequence item."""
    return {"PK": f"SEQ#{name}#{writer}" if writer else f"SEQ#{name}", "SK": "META"}


def pointer_key(name: str, writer: str = "") -> dict[str, str]:
    """The pointer ``name``; with ``writer`` (a Region), that Region's own pointer item."""
    return {"PK": f"POINTER#{name}#{writer}" if writer else f"POINTER#{name}", "SK": "META"}


def order_key(order_id: int) -> dict[str, str]:
    """The key of an order's item."""
    return {"PK": f"{ORDER_PREFIX}{order_id}", "SK": "META"}


def idempotency_key(key: str, owner: str | None = None) -> dict[str, str]:
    """The key record of ``key``, scoped to ``owner`` (the verified caller; None with
    authorization off). Keys never contain ``#``, so the two forms never collide."""
    scope = key if owner is None else f"{owner}#{key}"
    return {"PK": f"ORDERKEY#{scope}", "SK": "META"}


def order_id_from_pk(pk: str) -> int | None:
    """``ORDER#<n>`` -> n; anything else -> None."""
    if not pk.startswith(ORDER_PREFIX):
        return None
    tail = pk[len(ORDER_PREFIX) :]
    return int(tail) if tail.isdigit() else None


ITEM_IS_NEW = Path("PK").missing()
"""One order per id, one key record per key, one operation per id: never overwrite."""


def counter_bump(table_name: str, name: str, observed: int | None) -> Update:
    """``gapless``: ``value = observed + 1`` if nobody took it since ``observed`` was read."""
    value = Path(VALUE)
    # optimistic lock: nobody took observed + 1 since we read it (or nobody started the counter)
    unchanged = value.missing() if observed is None else value == observed
    # the loser learns the value it lost to (ALL_OLD), and tries the next one without a read
    return Update(table_name, sequence_key(name)).set(VALUE, (observed or 0) + 1).when(unchanged)


def order_writes(table_name: str, order: dict[str, object], record: dict[str, object]) -> Transaction[Enum]:
    """The key record and its order, each only if new (the losing twin learns which order the key is).

    The key record comes first: where they cannot be one transaction (MRSC), they are written one
    after the other in this order, so an order never exists without its key record."""
    tx: Transaction[Enum] = Transaction()
    tx.put(OrderAction.KEY_RECORD, Put(table_name, item=record).when(ITEM_IS_NEW))
    # ALL_OLD on both: the loser learns whose order the id holds (its own, written by an attempt
    # whose answer was lost, when the two are separate writes)
    tx.put(OrderAction.ORDER, Put(table_name, item=order).when(ITEM_IS_NEW))
    return tx


@dataclass(frozen=True)
class PointerMove:
    """What a pointer's conditional write found: ``moved``, or the value that stopped it."""

    moved: bool
    stored: int | None
    report: Report


class SequenceStore(Store):
    """The calls the sequence, pointer and order code makes, with typed answers."""

    FAMILIES = (TABLE,)
    GUARDED = False  # a Sequence or Pointer of any name, and the items its caller claims with a value: the operations' cells apply

    def read_number(self, key: dict[str, str], attribute: str, capacity: Capacity) -> int | None:
        """One number attribute of one item, strongly consistent; ``None`` when absent."""
        response = read(self.dynamodb.get_item, self.retry, capacity, **Get(self.table_name, key).project(attribute).strongly().params())
        item = from_item(response.get("Item"))
        return int(item[attribute]) if item and attribute in item else None

    def read_item(self, key: dict[str, str], capacity: Capacity) -> Record | None:
        """A whole item (an order, a key record), strongly consistent."""
        response = read(self.dynamodb.get_item, self.retry, capacity, **Get(self.table_name, key).strongly().params())
        return from_item(response.get("Item"))

    def add_one(self, name: str, writer: str = "") -> tuple[Report, int | None]:
        """``fast``: ``ADD value 1``, answering the new value (UPDATED_NEW); with ``writer``, on that
        Region's own sequence item, stamped with the Region (``writerRegion``)."""
        update = Update(self.table_name, sequence_key(name, writer)).add(VALUE, 1).returning("UPDATED_NEW")
        if writer:
            update.set(REGION_ATTRIBUTE, writer)
        report = run(self.dynamodb.update_item, update.params(), policy=self.retry, write=True)
        new = from_item(report.attributes)
        return report, (int(new[VALUE]) if new and VALUE in new else None)

    def write(
        self,
        tx: Transaction[Enum],
        *,
        capacity: Capacity | None = None,
        on_condition: Hook | None = None,
        rounds: RetryPolicy | None = None,
    ) -> Report:
        """One TransactWriteItems under the token rule; ``on_condition`` may re-send another round
        (drawing on ``rounds``: [`counters.core.engine.run`][counters.core.engine.run])."""
        return run(
            self.dynamodb.transact_write_items,
            {"TransactItems": tx.items()},
            policy=self.retry,
            capacity=capacity,
            write=True,
            token=True,
            on_condition=on_condition,
            rounds=rounds,
        )

    def put_if_new(self, item: dict[str, object]) -> Report:
        """Put ``item`` only if no item has its key (e.g. completing an order its key record carries)."""
        return run(self.dynamodb.put_item, Put(self.table_name, item=item).when(ITEM_IS_NEW).params(), policy=self.retry, write=True)

    def advance(self, name: str, attribute: str, value: int, writer: str = "") -> PointerMove:
        """Move a pointer to ``value`` only if that is forward (the first value, or a greater one:
        stale, replayed and reordered updates fail here); the loser learns what is stored. With
        ``writer`` (a Region), that Region's own pointer item, stamped with the Region."""
        stored = Path(attribute)
        update = (
            Update(self.table_name, pointer_key(name, writer))
            .set(attribute, int(value))
            .set(UPDATED_AT, int(time.time()))
            .when(stored.missing() | (stored < int(value)))
        )
        if writer:
            update.set(REGION_ATTRIBUTE, writer)
        report = run(self.dynamodb.update_item, update.params(), policy=self.retry, write=True)
        found = old_item(report.failure)
        return PointerMove(report.failure is None and report.response is not None, int(found[attribute]) if found else None, report)
