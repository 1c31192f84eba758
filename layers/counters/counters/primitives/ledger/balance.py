"""The balance read: the checkpoint plus the entries after it, in one consistent Query.

Why reading the checkpoint last (and ignoring entries at or below ``mergedThrough``) is exact
while a compaction commits: docs/ledgers.md, "Guarantees and how they are kept".
"""

from __future__ import annotations

from dataclasses import dataclass

from counters.core.errors import ContentionError
from counters.core.json import JSONObject
from counters.core.outcome import Capacity
from counters.primitives.ledger.base import LedgerBase
from counters.store.ledger import Checkpoint


def public_checkpoint(checkpoint: Checkpoint | None) -> JSONObject | None:
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
    checkpoint: JSONObject | None
    """The checkpoint as the API shows it (:func:`public_checkpoint`)."""
    capacity: Capacity
    ignored_entries: int = 0
    """Entries at or below ``mergedThrough`` (seen mid-merge or written too late): not counted."""

    def as_dict(self) -> JSONObject:
        return {"balance": self.balance, "pendingEntries": self.pending_entries, "checkpoint": self.checkpoint}


class Balances(LedgerBase):
    """:meth:`balance` (the ledger's other parts are in the sibling modules)."""

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
            confirm = self.store.checkpoint(ledger_id, capacity, version_only=True)
            if (confirm.version if confirm else 0) == (read.checkpoint or {}).get("version", 0):
                return read
        raise ContentionError(f"ledger {ledger_id!r} kept compacting during {max_reads} reads; retry")

    def _read_balance(self, ledger_id: str, page_size: int | None, capacity: Capacity) -> Balance:
        read = self.store.read_ledger(ledger_id, page_size, capacity, between_pages=lambda: self._stage("balance_page"))
        through = read.checkpoint.merged_through if read.checkpoint else ""
        pending = [entry.amount for entry in read.entries if entry.sk > through]  # <= through: in the checkpoint
        total = (read.checkpoint.balance if read.checkpoint else 0) + sum(pending)
        ignored = len(read.entries) - len(pending)
        return Balance(total, len(pending), public_checkpoint(read.checkpoint), capacity, ignored_entries=ignored)
