"""Resources' counter items: a resource's ``META``, its shards and every Region's escrowed share.

| item | PK | SK |
|---|---|---|
| resource | ``RES#<id>`` | ``META``: capacity, strategy, shards; the counter itself when unsharded |
| shard | ``RES#<id>#<n>`` | ``SHARD``: a share of the capacity (write sharding) |
| share (MREC) | ``RES#<id>@<region>`` (``#<n>`` when sharded) | ``SHARE`` / ``SHARD``: a Region's escrowed share, written by that Region only |

A *counter item* (a resource's ``META`` when unsharded, or a shard) holds ``reserved`` and
``available``, which always sum to its capacity, plus what its approach remembers: attributes each
approach names and writes itself ([`counters.primitives.approaches`][counters.primitives.approaches]).
Here: their keys, shapes and writer rules, the two numbers' names, the item as read
([`Counter`][counters.store.resources_counters.Counter],
[`Resource`][counters.store.resources_counters.Resource]) and the writes every approach shares. The reservation records
([`counters.store.resources_records`][counters.store.resources_records]) and the transfers
([`counters.store.resources_transfers`][counters.store.resources_transfers]) are the family's other
items; [`ResourceStore`][counters.store.resources.ResourceStore] makes the calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from counters.core.records import dataclass
from counters.store.expr import Cond, Path, Update
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import ANY, HOME, HOME_OF_ID, IN_ORDER, REFUSED, TOGETHER, WriterRule, per_region, refused

SHAPES: tuple[Shape, ...] = (
    Shape(
        "resource",
        "RES#<id>",
        "META",
        "capacity, strategy, shards; unsharded: the counter (`reserved`, `available`, and its approach's own attributes) "
        "([reservations.md](reservations.md))",
    ),
    Shape("resource shard", "RES#<id>#<n>", "SHARD", "write sharding: a share of the capacity"),
    Shape(
        "resource share",
        "RES#<id>@<region>[#<n>]",
        "SHARE / SHARD",
        "MREC escrow: one Region's share of the capacity (`capacity` is the share), written only by that Region",
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
"""The resource's META: created only by its id's home Region on MREC (``create`` in [`TABLE`][counters.store.resources_counters.TABLE])."""
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
)
_COUNTERS = tuple(w.item for w in WRITERS)
_SHARES = "only the Region that holds a share writes it: release the reservation there (docs/reservations.md, Global tables)"
TABLE = Table(
    "resources_counters",
    WRITERS,
    {
        "create": Op("resource", _COUNTERS, TOGETHER, HOME_OF_ID, IN_ORDER),
        "take": Op("a take", _COUNTERS),
        "release": Op("a release", _COUNTERS),
        "take:crt": Op(
            "strategy 'crt'", _COUNTERS, TOGETHER, TOGETHER, refused("its take is a TransactWriteItems with a ClientRequestToken")
        ),
        "take:marker": Op(
            "strategy 'marker'",
            _COUNTERS,
            TOGETHER,
            TOGETHER,
            refused("its take writes the marker and the counter in one TransactWriteItems"),
        ),
        "take:sharded": Op(
            "write sharding (shards > 1)",
            _COUNTERS,
            TOGETHER,
            TOGETHER,
            refused("a sharded take splits over shards in one TransactWriteItems and reads them with TransactGetItems"),
        ),
        "take:unescrowed": Op(
            "a resource with one counter for every Region (created before the table was global)",
            _COUNTERS,
            ANY,
            refused("it would oversell; its capacity must be split into escrowed shares (docs/reservations.md, Global tables)"),
            ANY,
        ),
        "release:elsewhere": Op("releasing units of another Region's escrowed share", _COUNTERS, ANY, refused(_SHARES), ANY),
    },
)
"""The resources' (operation x mode) table ([`counters.store.tables`][counters.store.tables]): what each take, creation and release may do."""
Key = dict[str, str]
"""A counter item's (or a record's, or a transfer's) key: ``PK``, ``SK``."""
Fields = Mapping[str, object]
"""The attributes a caller adds to an item it writes: a reservation record's (``resourceId``, ``requestId``, ``owner``...),
a transfer's, a resource's ``META``."""

MAX_SHARDS = 20
"""The most counter items one resource is split over (one transaction takes at most that many)."""

# -- attribute names -------------------------------------------------------------------------------
PK = "PK"
RESERVED, AVAILABLE = "reserved", "available"
QUOTA, SHARES = "capacity", "shares"  # a counter item's capacity (an escrowed share's moves with transfers); META's split


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


# -- facts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Counter:
    """A counter item as read: the two numbers, and the item's other attributes (``state``: what its
    approach remembers, read by the approach that named them)."""

    reserved: int = 0
    available: int = 0
    state: Mapping[str, Any] = field(default_factory=dict)
    """The item as read: its approach's own attributes among the rest (each approach reads the names it declares)."""

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Counter | None:
        """The counter an item holds, or None."""
        if not item:
            return None
        return cls(int(item.get(RESERVED, 0)), int(item.get(AVAILABLE, 0)), item)


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
    """The Region this resource is used from: its [`counter_keys`][counters.store.resources_counters.Resource.counter_keys] are this Region's share."""

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


def quota_adjust(table: str, key: Key, delta: int) -> Update:
    """An escrow transfer's move of a counter item's capacity: ``available`` and ``capacity`` by
    ``delta`` (``reserved`` untouched); a debit never takes more than is available."""
    update = Update(table, key).add(AVAILABLE, delta).add(QUOTA, delta)
    return update.when(EXISTS & (Path(AVAILABLE) >= -delta) if delta < 0 else EXISTS)
