"""Ledger items: what they look like (seed 02, approach 6): keys, attribute names, shapes, who writes
them, idempotency keys, and the checkpoint and entries as read back.

On an MREC global table every item updated in place belongs to one writing Region: each Region
writes its own entries (``ENTRY#<id>#<Region>``), its own checkpoint (``SNAPSHOT#<Region>``) and its
own dirty markers (``LEDGERS#DIRTY#<Region>``); a single-Region table (and MRSC, strongly consistent)
keeps the unsuffixed layout (``writer == ""``).

The requests on these items (conditions and DynamoDB calls) are in
[`counters.store.ledger`][counters.store.ledger]; the rules that use them in
[`counters.primitives.ledger`][counters.primitives.ledger].
"""

from __future__ import annotations

import re
import secrets
import time

from counters.core.errors import InvalidRequest
from counters.core.items import Record
from counters.core.records import dataclass
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import ANY, HOME, REFUSED, WriterRule, per_region

LEDGER_PREFIX = "LEDGER#"
ENTRY_PREFIX = "ENTRY#"
SNAPSHOT = "SNAPSHOT"  # sorts after every ENTRY#: a balance Query reads the checkpoint last
SNAPSHOTS_END = "SNAPSHOT#~"  # after every SNAPSHOT#<Region> ("~" sorts after Region names)
WITHDRAWN_PREFIX = "WITHDRAWN#"  # sorts after SNAPSHOT: outside every balance read
DIRTY_PK = "LEDGERS#DIRTY"
MAX_TX_ACTIONS = 100
MAX_CHUNK = MAX_TX_ACTIONS - 1  # entries per transaction: the checkpoint update takes one action

# attribute names
PK, SK = "PK", "SK"
AMOUNT = "amount"
REQUEST_ID = "requestId"
BALANCE = "balance"
MERGED_THROUGH = "mergedThrough"
VERSION = "version"
MERGED_ENTRIES = "mergedEntries"
PENDING_DELETES = "pendingDeletes"  # MRSC: the last chunk's merged entries, deleted after the checkpoint moved
UPDATED_AT = "updatedAt"
LEDGER_ID = "ledgerId"
WITHDRAWN_AT = "withdrawnAt"

SHAPES: tuple[Shape, ...] = (
    Shape("ledger entry", "LEDGER#<id>", "ENTRY#<ms:13>-<key>", "`amount`, `requestId`; approach 6 ([ledgers.md](ledgers.md))"),
    Shape("ledger checkpoint", "LEDGER#<id>", "SNAPSHOT", "sorts after every `ENTRY#`: `balance`, `mergedThrough`, `version`"),
    Shape(
        "ledger withdrawal",
        "LEDGER#<id>",
        "WITHDRAWN#<entryId>#<requestId>",
        "a stranded entry its own request deleted; after `SNAPSHOT`",
    ),
    Shape("dirty marker", "LEDGERS#DIRTY", "<bucket ms>#<ledgerId>", "which ledgers have entries to merge"),
    Shape(
        "ledger entry (MREC)",
        "LEDGER#<id>",
        "ENTRY#<ms:13>-<key>#<Region>",
        "written, compacted and withdrawn only in `<Region>`; one key's entries are adjacent (the failover check)",
    ),
    Shape("ledger checkpoint (MREC)", "LEDGER#<id>", "SNAPSHOT#<Region>", "the `<Region>` entries merged; written only in `<Region>`"),
    Shape("dirty marker (MREC)", "LEDGERS#DIRTY#<Region>", "<bucket ms>#<ledgerId>", "written and cleared only in `<Region>`"),
)
WRITERS: tuple[WriterRule, ...] = (
    WriterRule(
        "ledger entry of a Region",
        "LEDGER#<id>",
        "ENTRY#<ms:13>-<key>#<Region>",
        REFUSED,
        per_region("sum"),
        REFUSED,
        "written, compacted and withdrawn only in the Region it names: the same Idempotency-Key sent in two Regions during a "
        "partition is two entries, both kept (an over-count listed in `duplicateKeys`, [ledgers.md](ledgers.md#global-tables))",
    ),
    WriterRule(
        "ledger entry",
        "LEDGER#<id>",
        "ENTRY#<ms:13>-<key>",
        HOME,
        REFUSED,
        ANY,
        "MRSC: created and compacted with conditions that see every Region",
    ),
    WriterRule(
        "ledger checkpoint of a Region",
        "LEDGER#<id>",
        "SNAPSHOT#<Region>",
        REFUSED,
        per_region("sum"),
        REFUSED,
        "created and merged only in the Region it names",
    ),
    WriterRule(
        "ledger checkpoint",
        "LEDGER#<id>",
        "SNAPSHOT",
        HOME,
        REFUSED,
        ANY,
        "MRSC: merged with a condition on its version, which sees every Region",
    ),
    WriterRule(
        "ledger withdrawal of a Region",
        "LEDGER#<id>",
        "WITHDRAWN#<entryId>#<Region>#<requestId>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "written only in the Region of the entry it withdraws",
    ),
    WriterRule(
        "ledger withdrawal",
        "LEDGER#<id>",
        "WITHDRAWN#<entryId>#<requestId>",
        HOME,
        REFUSED,
        ANY,
        "MRSC: a condition that sees every Region",
    ),
    WriterRule(
        "dirty marker of a Region",
        "LEDGERS#DIRTY#<Region>",
        "<bucket ms>#<ledgerId>",
        REFUSED,
        per_region("own"),
        REFUSED,
        "written and cleared only in the Region it names",
    ),
    WriterRule(
        "dirty marker",
        "LEDGERS#DIRTY",
        "<bucket ms>#<ledgerId>",
        HOME,
        REFUSED,
        ANY,
        "MRSC: a marker is idempotent; clearing it is conditional",
    ),
)
TABLE = Table(
    "ledger_items",
    WRITERS,
    {
        "append": Op("appending to a ledger", ("ledger entry of a Region", "ledger entry", "dirty marker of a Region", "dirty marker")),
        "compact": Op("compacting a ledger", tuple(w.item for w in WRITERS)),
        "withdraw": Op(
            "withdrawing a ledger entry", ("ledger withdrawal of a Region", "ledger withdrawal", "ledger entry of a Region", "ledger entry")
        ),
    },
)
"""The ledgers' (operation x mode) table: every item is written as its shape's rule says."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# -- keys ------------------------------------------------------------------------------------------
def ledger_pk(ledger_id: str) -> str:
    """The partition key of a ledger's entries."""
    return f"{LEDGER_PREFIX}{ledger_id}"


def _in(writer: str) -> str:
    """The suffix of a per-Region item (``""``: the single-Region layout)."""
    return f"#{writer}" if writer else ""


def snapshot_sk(writer: str = "") -> str:
    """The sort key of the checkpoint ``writer`` keeps (``""``: single-Region)."""
    return SNAPSHOT + _in(writer)


def dirty_pk(writer: str = "") -> str:
    """The partition key of the dirty markers ``writer`` writes (``""``: single-Region)."""
    return DIRTY_PK + _in(writer)


def entry_writer(sk: str) -> str:
    """The Region an entry's sort key names (``""``: the single-Region layout)."""
    return sk[len(ENTRY_PREFIX) :].partition("#")[2]


def entry_id_of(sk: str) -> str:
    """An entry's id (``<ms:13>-<key>``): the same in every Region."""
    return sk[len(ENTRY_PREFIX) :].partition("#")[0]


def snapshot_writer(sk: str) -> str | None:
    """The Region a checkpoint's sort key names (``""``: single-Region), ``None``: not a checkpoint."""
    if sk == SNAPSHOT:
        return ""
    return sk[len(SNAPSHOT) + 1 :] if sk.startswith(SNAPSHOT + "#") else None


@dataclass(frozen=True)
class EntryKey:
    """An idempotency key and the time it carries: the entry's sort key is ``ENTRY#<ms:13>-<key>``."""

    key: str
    at_ms: int

    @property
    def entry_id(self) -> str:
        """The entry id: the key's time (13 digits) and the key."""
        return f"{self.at_ms:013d}-{self.key}"

    @property
    def sk(self) -> str:
        """The sort key of this key's entry (single-Region)."""
        return ENTRY_PREFIX + self.entry_id

    def sk_in(self, writer: str) -> str:
        """The sort key of this key's entry written by ``writer`` (``""``: single-Region)."""
        return self.sk + _in(writer)

    def withdrawn_sk(self, request_id: str, writer: str = "") -> str:
        """The sort key of the record that this key's entry was withdrawn by ``request_id``."""
        return f"{WITHDRAWN_PREFIX}{self.entry_id}{_in(writer)}#{request_id}"


def parse_key(raw: str | None) -> EntryKey:
    """Accept a ULID (26 Crockford base32 chars) or a UUIDv7; raise [`InvalidRequest`][counters.core.errors.InvalidRequest]."""
    if not raw:
        raise InvalidRequest("the Idempotency-Key header is required (a ULID or a UUIDv7)")
    text = raw.strip()
    if _ULID.match(text.upper()):
        text = text.upper()
        at_ms = 0
        for char in text[:10]:
            at_ms = at_ms * 32 + _CROCKFORD.index(char)
        return EntryKey(text, at_ms)
    if _UUID7.match(text.lower()):
        text = text.lower()
        return EntryKey(text, int(text.replace("-", "")[:12], 16))
    raise InvalidRequest("Idempotency-Key must be a ULID or a UUIDv7 (time-ordered, minted on the first attempt)")


def new_key(at: float | None = None) -> str:
    """A fresh ULID for ``at`` (seconds; default now): what a client sends as Idempotency-Key."""
    at_ms = int((time.time() if at is None else at) * 1000)
    value = (at_ms << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def marker_sk(bucket_ms: int, ledger_id: str) -> str:
    """The sort key of a ledger's dirty marker in a time bucket."""
    return f"{bucket_ms:013d}#{ledger_id}"


# -- facts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """The ``SNAPSHOT`` item: what every merged entry added up to, and the last one merged."""

    balance: int = 0
    version: int = 0
    merged_through: str = ""
    """The sort key of the last entry merged (``""``: none yet)."""
    merged_entries: int = 0
    updated_at: int | None = None
    pending_deletes: tuple[str, ...] = ()
    """MRSC: the sort keys the last chunk merged, deleted after it moved the checkpoint."""

    @property
    def merged_through_id(self) -> str | None:
        """The last merged entry's id (its sort key without ``ENTRY#`` and the Region)."""
        return entry_id_of(self.merged_through) or None


def checkpoint_of(item: Record | None) -> Checkpoint | None:
    """The checkpoint an item holds (``None``: no item)."""
    if item is None:
        return None
    updated = item.get(UPDATED_AT)
    return Checkpoint(
        balance=int(item.get(BALANCE, 0)),
        version=int(item.get(VERSION, 0)),
        merged_through=str(item.get(MERGED_THROUGH) or ""),
        merged_entries=int(item.get(MERGED_ENTRIES, 0)),
        updated_at=int(updated) if updated is not None else None,
        pending_deletes=tuple(str(sk) for sk in item.get(PENDING_DELETES) or ()),
    )


@dataclass(frozen=True)
class Entry:
    """An entry as compaction and the balance read see it: its sort key and amount."""

    sk: str
    amount: int

    @property
    def writer(self) -> str:
        """The Region that wrote it (``""``: single-Region layout)."""
        return entry_writer(self.sk)

    @property
    def entry_id(self) -> str:
        """The entry id its sort key holds."""
        return entry_id_of(self.sk)
