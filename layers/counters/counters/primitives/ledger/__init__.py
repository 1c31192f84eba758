"""Ledger counters (seed 02, approach 6): an item collection of entries plus a checkpoint.

Why every case is exact (the retry window, settling an append after its Put, the balance read,
compaction, global tables) is written once, in [docs/ledgers.md](../ledgers.md) ("Guarantees and how they are kept", "The cases, step by step").
The parts, by job:

* [`counters.store.ledger_items`][counters.store.ledger_items]: keys (``LEDGER#``, ``ENTRY#``, ``SNAPSHOT``, ``WITHDRAWN#``,
  ``LEDGERS#DIRTY``), idempotency keys ([`parse_key`][counters.store.ledger_items.parse_key], [`new_key`][counters.store.ledger_items.new_key]);
  [`counters.store.ledger`][counters.store.ledger]: conditions, requests, facts;
* [`append`][counters.primitives.ledger.append]: append, then settle (fast path, the checkpoint fence, withdrawal);
* [`balance`][counters.primitives.ledger.balance]: the balance read and [`Balance`][counters.primitives.ledger.balance.Balance];
* [`compaction`][counters.primitives.ledger.compaction]: compaction by ledger and by schedule, their reports (per Region where the policy names a writer; single-item chunks without transactions);
* [`base`][counters.primitives.ledger.base]: settings, [`Reason`][counters.primitives.ledger.base.Reason], the state they share.

The request-level service (answers, deferral) is [`counters.services.ledgers`][counters.services.ledgers].
"""

from __future__ import annotations

from counters.primitives.ledger.append import Appended, Appends
from counters.primitives.ledger.balance import Balance, Balances
from counters.primitives.ledger.base import AMOUNT_LIMIT, LedgerOptions, Reason
from counters.primitives.ledger.compaction import Compaction, CompactionReport, ScheduledReport
from counters.store.ledger_items import ENTRY_PREFIX, MAX_CHUNK, MAX_TX_ACTIONS, SNAPSHOT, EntryKey, ledger_pk, new_key, parse_key

__all__ = [
    "AMOUNT_LIMIT",
    "Appended",
    "ENTRY_PREFIX",
    "MAX_CHUNK",
    "MAX_TX_ACTIONS",
    "SNAPSHOT",
    "Balance",
    "CompactionReport",
    "EntryKey",
    "Ledger",
    "LedgerOptions",
    "Reason",
    "ScheduledReport",
    "ledger_pk",
    "new_key",
    "parse_key",
]


class Ledger(Appends, Balances, Compaction):
    """Append entries idempotently ([`append`][counters.primitives.ledger.append.Appends.append]), read exact balances ([`balance`][counters.primitives.ledger.balance.Balances.balance]),
    compact safely ([`compact`][counters.primitives.ledger.compaction.Compaction.compact], [`compact_due`][counters.primitives.ledger.compaction.Compaction.compact_due]). Options: [`base.LedgerBase`][counters.primitives.ledger.base.LedgerBase]."""
