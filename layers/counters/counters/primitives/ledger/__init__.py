"""Ledger counters (seed 02, approach 6): an item collection of entries plus a checkpoint.

Why every case is exact (the retry window, settling an append after its Put, the balance read,
compaction, global tables) is written once, in docs/ledgers.md ("Guarantees and how they are kept", "The cases, step by step").
The parts, by job:

* :mod:`counters.store.ledger`: keys (``LEDGER#``, ``ENTRY#``, ``SNAPSHOT``, ``WITHDRAWN#``,
  ``LEDGERS#DIRTY``), idempotency keys (:func:`parse_key`, :func:`new_key`), requests, facts;
* :mod:`.append`: append, then settle (fast path, the checkpoint fence, withdrawal);
* :mod:`.balance`: the balance read and :class:`Balance`;
* :mod:`.compaction`: compaction by ledger and by schedule, their reports (per Region on an MREC table; single-item chunks on MRSC);
* :mod:`.base`: settings, :class:`Reason`, the state they share.

The request-level service (answers, deferral) is :mod:`counters.services.ledgers`.
"""

from __future__ import annotations

from counters.primitives.ledger.append import Appends
from counters.primitives.ledger.balance import Balance, Balances
from counters.primitives.ledger.base import AMOUNT_LIMIT, LedgerOptions, LedgerSettings, Reason
from counters.primitives.ledger.compaction import Compaction, CompactionReport, ScheduledReport
from counters.store.ledger import ENTRY_PREFIX, MAX_CHUNK, MAX_TX_ACTIONS, SNAPSHOT, EntryKey, ledger_pk, new_key, parse_key

__all__ = [
    "AMOUNT_LIMIT",
    "ENTRY_PREFIX",
    "MAX_CHUNK",
    "MAX_TX_ACTIONS",
    "SNAPSHOT",
    "Balance",
    "CompactionReport",
    "EntryKey",
    "Ledger",
    "LedgerOptions",
    "LedgerSettings",
    "Reason",
    "ScheduledReport",
    "ledger_pk",
    "new_key",
    "parse_key",
]


class Ledger(Appends, Balances, Compaction):
    """Append entries idempotently (:meth:`append`), read exact balances (:meth:`balance`),
    compact safely (:meth:`compact`, :meth:`compact_due`). Options: :class:`.base.LedgerBase`."""
