"""The ledger service: appends as API requests (typed failures, deferral) over the ledger engine.

The engine, :class:`~counters.primitives.approaches.ledger.Ledger` (seed 02's approach 6: entries,
checkpoint, compaction, exact balances), holds every guarantee and its documentation; this
service adds what a request needs: one answer per outcome, and a :class:`Command` to re-drive a
contended append from the retry queue with the same request id.
"""

from __future__ import annotations

from dataclasses import dataclass

from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.errors import ContentionError, IdempotencyKeyExpired, IdempotencyKeyReused, InvalidRequest
from counters.core.ids import valid_id
from counters.core.outcome import Outcome, Result
from counters.primitives.approaches.ledger import Ledger


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


class Ledgers(Ledger):
    """A :class:`Ledger` whose appends answer API requests and defer under contention."""

    def post_entry(self, ledger_id: str, amount: int, idempotency_key: str, *, request_id: str | None = None) -> tuple[str, bool, Result]:
        """``append`` for an API: (entry id, created now?, result); raises for the failures."""
        request_id = request_id or new_request_id()
        result = self.append(ledger_id, amount, idempotency_key, request_id=request_id)
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return result.value, result.outcome is Outcome.APPLIED, result
        if result.reason == "key_reused":
            raise IdempotencyKeyReused(f"Idempotency-Key already used on ledger {ledger_id!r} with a different amount")
        if result.reason == "key_expired":
            if result.outcome is Outcome.AMBIGUOUS:
                raise IdempotencyKeyExpired("the key expired while retrying an unknown outcome; the entry may exist")
            raise IdempotencyKeyExpired()
        # Safe to re-drive: the entry's key makes a replay a duplicate (while the key is fresh).
        command = Command("ledger_append", {"ledgerId": ledger_id, "amount": amount, "idempotencyKey": idempotency_key}, request_id)
        raise ContentionError(f"ledger {ledger_id!r} is busy after {result.attempts} attempts; retry with the same key", command=command)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred appends the retry worker replays."""
        return {"ledger_append": Replayable(AppendPayload, self._replay_append)}

    def _replay_append(self, p: AppendPayload, command: Command) -> Verdict:
        try:
            entry_id, created, _ = self.post_entry(p.ledgerId, p.amount, p.idempotencyKey, request_id=command.operation_id)
        except (IdempotencyKeyExpired, IdempotencyKeyReused, InvalidRequest) as exc:
            return Verdict("REJECTED", {"error": exc.code, "message": exc.message})
        return Verdict("APPLIED" if created else "DUPLICATE", {"ledgerId": p.ledgerId, "entryId": entry_id})
