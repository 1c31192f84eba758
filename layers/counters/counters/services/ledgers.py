"""The ledger service: appends as API requests (typed failures, deferral), balances and compaction.

It holds a [`Ledger`][counters.primitives.ledger.Ledger] (seed 02's approach 6: entries, checkpoint,
compaction, exact balances; why it is exact: [docs/ledgers.md](../ledgers.md)) and adds what a request needs: one
answer per outcome, and a [`Command`][counters.core.commands.Command] to re-drive a contended append from the retry queue with
the same request id. Both ledger functions (the API and compaction) go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict, Unpack

from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.errors import ContentionError, IdempotencyKeyExpired, IdempotencyKeyReused
from counters.core.ids import valid_id
from counters.core.outcome import Outcome, Result
from counters.core.policy import RegionPolicy
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.core.settings import env
from counters.primitives.ledger import Balance, CompactionReport, Ledger, LedgerOptions, Reason, ScheduledReport


class Appended(TypedDict):
    """An append's answer: the ledger and the entry's id (the same id for every re-send of its key)."""

    ledgerId: str
    entryId: str


@dataclass(frozen=True, kw_only=True)
class LedgerSettings(RegionSettings):
    """The retry window, compaction margin and clock skew (seconds), and the table's Regions."""

    retry_window: float = env("LEDGER_RETRY_WINDOW_SECONDS", 600.0)
    margin: float = env("LEDGER_COMPACTION_MARGIN_SECONDS", 900.0)
    clock_skew: float = env("LEDGER_CLOCK_SKEW_SECONDS", 60.0)


def ledger_options(settings: LedgerSettings) -> LedgerOptions:
    """The options a deployed ledger takes from its settings: its windows, and its Region policy,
    resolved here once ([`RegionPolicy.of`][counters.core.policy.RegionPolicy.of]: per-Region items where
    conditions see one replica)."""
    return LedgerOptions(
        retry=settings.retry,
        retry_window=settings.retry_window,
        margin=settings.margin,
        clock_skew=settings.clock_skew,
        policy=RegionPolicy.of(settings.topology),
    )


@dataclass(frozen=True)
class AppendPayload:
    """A deferred append."""

    ledgerId: str
    amount: int
    idempotencyKey: str

    def __post_init__(self) -> None:
        require(valid_id(self.ledgerId), "invalid ledgerId")
        require(isinstance(self.amount, int) and not isinstance(self.amount, bool) and self.amount != 0, "invalid amount")
        require(isinstance(self.idempotencyKey, str) and bool(self.idempotencyKey), "invalid idempotencyKey")


class Ledgers:
    """Ledger requests over the [`Ledger`][counters.primitives.ledger.Ledger] it holds (``self.ledger``, built from the same options)."""

    def __init__(self, table_name: str, **options: Unpack[LedgerOptions]) -> None:
        self.ledger = Ledger(table_name, **options)

    @classmethod
    def from_settings(cls, settings: LedgerSettings) -> Ledgers:
        """The service on the settings' table with the settings' options."""
        return cls(settings.table_name, **ledger_options(settings))

    def post_entry(self, ledger_id: str, amount: int, idempotency_key: str, *, request_id: str | None = None) -> tuple[str, bool, Result]:
        """``append`` for an API: (entry id, created now?, result); raises for the failures."""
        request_id = request_id or new_request_id()
        result = self.ledger.append(ledger_id, amount, idempotency_key, request_id=request_id)
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return result.value, result.outcome is Outcome.APPLIED, result
        if result.reason is Reason.KEY_REUSED:
            raise IdempotencyKeyReused(f"Idempotency-Key already used on ledger {ledger_id!r} with a different amount")
        if result.reason is Reason.KEY_EXPIRED:
            if result.outcome is Outcome.AMBIGUOUS:
                raise IdempotencyKeyExpired("the key expired while retrying an unknown outcome; the entry may exist")
            raise IdempotencyKeyExpired()
        # Safe to re-drive: the entry's key makes a replay a duplicate (while the key is fresh).
        command = Command("ledger_append", {"ledgerId": ledger_id, "amount": amount, "idempotencyKey": idempotency_key}, request_id)
        raise ContentionError(f"ledger {ledger_id!r} is busy after {result.attempts} attempts; retry with the same key", command=command)

    def balance(self, ledger_id: str, *, verify: bool = False) -> Balance:
        """The exact balance (``verify``: +1 RCU, no reliance on in-page read order)."""
        return self.ledger.balance(ledger_id, verify=verify)

    def compact(self, ledger_id: str, *, max_chunks: int | None = None) -> CompactionReport:
        """Compact one ledger now (this Region's entries, on an MREC global table)."""
        return self.ledger.compact(ledger_id, max_chunks=max_chunks)

    def compact_due(self, *, should_stop: Callable[[], bool] | None = None) -> ScheduledReport:
        """The scheduled run: every ledger with due entries (this Region's, on an MREC global table)."""
        return self.ledger.compact_due(should_stop=should_stop)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred appends the retry worker replays."""
        return {"ledger_append": Replayable(AppendPayload, self._replay_append)}

    def _replay_append(self, p: AppendPayload, command: Command) -> Verdict:
        entry_id, created, _ = self.post_entry(p.ledgerId, p.amount, p.idempotencyKey, request_id=command.operation_id)
        return Verdict("APPLIED" if created else "DUPLICATE", {"ledgerId": p.ledgerId, "entryId": entry_id})
