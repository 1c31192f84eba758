"""What every part of the ledger shares: its options, its reasons, and the state one ledger holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum
from typing import TypedDict

from counters.core.client import DynamoDBClient
from counters.core.failures import RetryPolicy
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.store.ledger import LedgerStore

AMOUNT_LIMIT = 10**15  # |amount| bound: sums stay exact in DynamoDB's 38-digit numbers


class Reason(StrEnum):
    """Why an append was refused (``Result.reason``; the values are what logs and tests see)."""

    KEY_REUSED = "key_reused"
    """The key's entry holds another amount."""
    KEY_EXPIRED = "key_expired"
    """The key is older than the retry window, or its entry was stranded and withdrawn."""


class LedgerOptions(TypedDict, total=False):
    """[`LedgerBase`][counters.primitives.ledger.base.LedgerBase]'s keyword options, for what builds a ledger for someone else (the service)."""

    dynamodb: DynamoDBClient | None
    retry: RetryPolicy | None
    retry_window: float
    margin: float
    max_future_skew: float
    clock_skew: float
    marker_bucket: float
    policy: RegionPolicy
    clock: Callable[[], float]


class LedgerBase:
    """A ledger's windows, clock and store (the parts in append/balance/compaction share these).

    ``retry_window``/``margin``/``marker_bucket``/``clock_skew`` are seconds. ``clock_skew``
    bounds how far a compactor's clock may be ahead of an appender's: it only decides when an
    append may skip the checkpoint fence (the fast path), never what is counted. ``clock`` returns
    seconds (tests pass a fake). ``hook(stage)`` is a test seam called at the points where a race
    can interleave: ``balance_page``, ``balance_verify``, ``snapshot_read``, ``entries_read``,
    ``chunk_committed``, ``put_sending`` (an append's freshness check passed, its Put not sent yet)
    and ``entry_written`` (the Put answered or found the entry).

    ``policy`` ([`RegionPolicy`][counters.core.policy.RegionPolicy]): where it names a ``writer``, each
    Region writes, compacts and fences only its own entries, checkpoint and markers, and the balance
    sums every Region's (``readers``); otherwise one layout serves every Region. Where the policy
    ``writes`` a group in order (no transactions), chunks and withdrawals are single-item writes.
    Where other Regions keep their own entries (the policy's ``others``), an append first looks for
    another Region's entry for its key (a failover re-send).
    """

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        retry_window: float = 600.0,
        margin: float = 900.0,
        max_future_skew: float = 60.0,
        clock_skew: float = 60.0,
        marker_bucket: float = 300.0,
        policy: RegionPolicy = ONE_REGION_POLICY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if retry_window <= 0 or margin < 0 or marker_bucket <= 0 or clock_skew < 0:
            raise ValueError("retry_window and marker_bucket must be > 0, margin and clock_skew >= 0")
        self.table_name = table_name
        self.policy = policy
        self.writer = policy.writer
        """The Region whose items this ledger writes (``""``: the one layout every Region writes)."""
        self.store = LedgerStore(table_name, dynamodb=dynamodb, retry=retry, writer=self.writer, writes=policy.writes, policy=policy)
        self.retry_window = retry_window
        self.margin = margin
        self.max_future_skew = max_future_skew
        self.clock_skew = clock_skew
        self.marker_bucket_ms = int(marker_bucket * 1000)
        self.clock = clock
        self.hook: Callable[[str], None] | None = None
        self._marked: set[tuple[str, int]] = set()  # (ledger, bucket) dirty markers this process wrote

    @property
    def retry(self) -> RetryPolicy:
        """The retry budget of every call."""
        return self.store.retry

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _stage(self, name: str) -> bool:
        if self.hook is not None:
            self.hook(name)
        return True
