"""The balance read: the checkpoint plus the entries after it, in one consistent Query.

Where each Region writes its own items (the policy's ``writer``): the sum over writing Regions of
(that Region's checkpoint + its entries after it), still one Query (every ``ENTRY#``, then every ``SNAPSHOT#<Region>``).

Why reading the checkpoint last (and ignoring entries at or below ``mergedThrough``) is exact
while a compaction commits: [docs/ledgers.md, "Guarantees and how they are kept"](../ledgers.md#guarantees-and-how-they-are-kept).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict, overload

from counters.core.errors import ContentionError
from counters.core.outcome import Capacity
from counters.core.records import dataclass
from counters.primitives.ledger.base import LedgerBase
from counters.store.ledger_items import Checkpoint


class PublicCheckpoint(TypedDict):
    """A ledger's checkpoint as the API shows it: the balance of the merged entries, the
    checkpoint's version, the last merged entry's id (`None`: none yet), how many were merged,
    when (epoch s)."""

    balance: int
    version: int
    mergedThrough: str | None
    mergedEntries: int
    updatedAt: int | None


class PublicBalance(TypedDict):
    """A ledger's balance as `GET /ledgers/{id}` answers it ([`Balance.public`][counters.primitives.ledger.balance.Balance.public])."""

    ledgerId: str
    balance: int
    pendingEntries: int
    """Entries after the checkpoint, counted in `balance`."""
    checkpoint: PublicCheckpoint | None
    checkpoints: NotRequired[dict[str, PublicCheckpoint]]
    """On an MREC global table: each Region's checkpoint, by Region (`checkpoint` is this Region's)."""
    duplicateKeys: NotRequired[list[str]]
    """On an MREC global table: entry ids pending in two Regions (a failover re-send during a partition)."""


@overload
def public_checkpoint(checkpoint: Checkpoint) -> PublicCheckpoint: ...
@overload
def public_checkpoint(checkpoint: None) -> None: ...
@overload
def public_checkpoint(checkpoint: Checkpoint | None) -> PublicCheckpoint | None: ...
def public_checkpoint(checkpoint: Checkpoint | None) -> PublicCheckpoint | None:
    """The checkpoint as the API shows it."""
    if checkpoint is None:
        return None
    return {
        "balance": checkpoint.balance,
        "version": checkpoint.version,
        "mergedThrough": checkpoint.merged_through_id,
        "mergedEntries": checkpoint.merged_entries,
        "updatedAt": checkpoint.updated_at,
    }


@dataclass
class Balance:
    """A balance read: the checkpoint plus the entries after it."""

    balance: int
    pending_entries: int
    checkpoint: PublicCheckpoint | None
    """The checkpoint as the API shows it ([`public_checkpoint`][counters.primitives.ledger.balance.public_checkpoint])."""
    capacity: Capacity
    ignored_entries: int = 0
    """Entries at or below ``mergedThrough`` (seen mid-merge or written too late): not counted."""
    checkpoints: dict[str, PublicCheckpoint] | None = None
    """Per-Region items: every Region's checkpoint by Region (``checkpoint`` is then this Region's)."""
    duplicate_keys: list[str] | None = None
    """Per-Region items: entry ids pending in more than one Region (a failover re-send that beat replication,
    counted once per Region: [docs/ledgers.md, "Global tables"](../ledgers.md#global-tables))."""
    versions: int = 0
    """The sum of the checkpoints' versions read (``verify`` compares it)."""

    def public(self, ledger_id: str) -> PublicBalance:
        """The balance of ``ledger_id`` as the API shows it."""
        out: PublicBalance = {
            "ledgerId": ledger_id,
            "balance": self.balance,
            "pendingEntries": self.pending_entries,
            "checkpoint": self.checkpoint,
        }
        if self.checkpoints is not None:
            out["checkpoints"] = dict(self.checkpoints)
            out["duplicateKeys"] = list(self.duplicate_keys or [])
        return out


class Balances(LedgerBase):
    """[`balance`][counters.primitives.ledger.balance.Balances.balance] (the ledger's other parts are in the sibling modules)."""

    def balance(self, ledger_id: str, *, page_size: int | None = None, verify: bool = False, max_reads: int = 5) -> Balance:
        """Checkpoint + the entries after it, in one consistent Query (checkpoint read last).

        ``verify=True`` does not rely on a page reading its items in key order (DynamoDB only
        documents read-committed per item): it re-reads the checkpoint's version with a
        GetItem after the Query and reads again if a compaction committed in between; if
        none did, every item read after the checkpoint saw the state it describes. +1 RCU.
        """
        capacity = Capacity()
        for _ in range(max_reads):
            read = self._read_balance(ledger_id, page_size, capacity)
            if not verify:
                return read
            self._stage("balance_verify")
            if self._versions(ledger_id, capacity) == read.versions:
                return read
        raise ContentionError(f"ledger {ledger_id!r} kept compacting during {max_reads} reads; retry")

    def _versions(self, ledger_id: str, capacity: Capacity) -> int:
        """The sum of the checkpoints' versions (each only grows: equal sums mean no checkpoint moved)."""
        total = 0
        for writer in self.policy.readers:
            confirm = self.store.checkpoint(ledger_id, capacity, version_only=True, writer=writer)
            total += confirm.version if confirm else 0
        return total

    def _read_balance(self, ledger_id: str, page_size: int | None, capacity: Capacity) -> Balance:
        per_region = bool(self.writer)
        read = self.store.read_ledger(
            ledger_id, page_size, capacity, between_pages=lambda: self._stage("balance_page"), per_region=per_region
        )
        total = sum(c.balance for c in read.checkpoints.values())
        through = {writer: c.merged_through for writer, c in read.checkpoints.items()}
        # each Region's entries at or below its own checkpoint's mergedThrough are in that checkpoint
        pending = [entry for entry in read.entries if entry.sk > through.get(entry.writer, "")]
        total += sum(entry.amount for entry in pending)
        ignored = len(read.entries) - len(pending)
        versions = sum(c.version for c in read.checkpoints.values())
        if not per_region:
            return Balance(total, len(pending), public_checkpoint(read.checkpoint), capacity, ignored_entries=ignored, versions=versions)
        seen: dict[str, int] = {}
        for entry in pending:
            seen[entry.entry_id] = seen.get(entry.entry_id, 0) + 1
        return Balance(
            total,
            len(pending),
            public_checkpoint(read.checkpoints.get(self.writer)),
            capacity,
            ignored_entries=ignored,
            checkpoints={w: public_checkpoint(cp) for w, cp in sorted(read.checkpoints.items())},
            duplicate_keys=sorted(k for k, n in seen.items() if n > 1),
            versions=versions,
        )
