"""Ledger counters (seed 02, approach 6): an item collection of entries plus a checkpoint.

| item | PK | SK | attributes |
|---|---|---|---|
| entry | ``LEDGER#<id>`` | ``ENTRY#<ms:13>-<key>`` | ``amount``, ``requestId`` |
| checkpoint | ``LEDGER#<id>`` | ``SNAPSHOT`` (sorts after every entry) | ``balance``, ``mergedThrough``, ``version``... |
| withdrawal | ``LEDGER#<id>`` | ``WITHDRAWN#<ms:13>-<key>#<requestId>`` | a stranded entry its request deleted |
| dirty marker | ``LEDGERS#DIRTY`` | ``<bucket ms:13>#<ledgerId>`` | which ledgers have entries to merge |

Entry ids come from the caller's idempotency key
    The key must carry its own time: a ULID or a UUIDv7 (both are "time-ordered unique ids"
    any client library can mint). The entry's sort key is the key's millisecond timestamp,
    zero-padded, then the normalised key, so a retry of the same key always targets the same
    item and ``attribute_not_exists`` makes it a ``duplicate`` (never a second entry), while
    the collection stays in time order. The time is chosen by the client on its *first*
    attempt, which is exactly what a server cannot know on a retry.

The retry window (closes "an append retried after its entry was merged")
    Compaction deletes entries, and a deleted entry cannot stop its own retry. So:
    * appends refuse keys older than ``retry_window`` (checked before *every* attempt):
      422 ``idempotency_key_expired``;
    * compaction only merges entries whose key time is before its own clock minus
      ``retry_window + margin``.
    A merged entry's key is therefore normally refused already. The balance ignores any entry
    at or below the checkpoint's ``mergedThrough``, so a write that beat the bound is never
    counted twice. That time bound is only the fast path: nothing acknowledges on timing alone.

After the Put (closes "a Put executed after window + margin": a stranded, acknowledged write)
    An appender can pass its check and have its Put executed much later (a paused process, a
    loaded host). If a compaction merged past the key meanwhile, the entry lands at or below
    ``mergedThrough``: the balance ignores it and no compaction will ever merge it (each one
    reads entries *after* ``mergedThrough``, and the checkpoint only moves forward). So once
    the Put has answered (created, or found the entry), the appender settles it:

    * **fast path**: its clock, read after the Put answered, is at or before ``key time +
      retry_window + margin - clock_skew``. Every compaction started before now had a cutoff
      at or below the key time (its clock was at most ``clock_skew`` ahead), and a cutoff
      merges only keys strictly before it; every later one reads the entries after the entry
      exists. Acknowledge as before. (Keep ``margin`` well above ``clock_skew``, or every
      append takes the slow path: correct, one more write.)
    * **slow path, the fence**: one conditional UpdateItem on the checkpoint, "``mergedThrough``
      is below this entry", that bumps ``version``. A *read* would not do: a compaction that
      listed the entries before the Put landed may commit afterwards, with a chunk ending past
      this key. Bumping the version makes that commit fail its ``version`` condition, so any
      chunk committed after the fence was listed after the fence, when the entry existed
      above ``mergedThrough``: it is merged in order or the chunk ends before it. Counted:
      acknowledge.
    * **the fence's condition fails** (``mergedThrough`` >= the entry): the entry is either
      merged (gone, counted) or stranded (there, never counted, forever). For this request's
      own entry, one transaction deletes it (condition: it exists *and* carries this request's
      id) and writes ``WITHDRAWN#<entryId>#<requestId>`` (after ``SNAPSHOT``, outside every
      balance read; a few bytes, kept). Committed: the stranded entry never counted, so the
      request is refused, 422 ``idempotency_key_expired``, never 201/200 (``ambiguous`` if an
      earlier attempt of this call had an unknown outcome). Condition failed: the entry is
      gone (or another request's entry took its place); if this request's withdrawal record
      exists, another delivery of the same request withdrew it (refuse), otherwise a
      compaction merged it (only compaction and its own request remove an entry): acknowledge.
    * **a duplicate** (the entry was another request's) at or below ``mergedThrough``: that
      request got its own answer. Answer 200 only if the entry was merged: it is gone and its
      owner's withdrawal record does not exist. If it is still there it is stranded (its own
      request withdraws it, nobody else does) and if it was withdrawn it never counted:
      refuse with ``idempotency_key_expired`` — a 200 would acknowledge a write the balance
      does not hold.
    A failure while settling (budget out) answers ``contention``: the entry exists, and a
    re-drive with the same key and request id settles it. ``idempotency_key_expired`` means
    "this request added nothing; whether an earlier request with this key counted can no
    longer be told here", as it always did.

The balance read (closes "a read concurrent with a compaction")
    One Query over ``ENTRY#`` .. ``SNAPSHOT``: the entries in key order, then the checkpoint
    *last*. A compaction chunk deletes its entries and moves the checkpoint in one
    transaction, and Query is only read-committed, so a read can straddle a commit. Reading
    the checkpoint after the entries, and ignoring entries at or below its
    ``mergedThrough``: an entry missed because it was deleted was merged by a commit that
    came before the checkpoint was read (so the checkpoint counts it); an entry seen and then
    merged is ignored because the checkpoint read later covers it. Pages of a paginated read
    come in key order, so this holds across pages too. After compaction the read is one small
    item: one 4 KB read unit however long the history.

Compaction (closes "two compactors" and "a crash mid-way")
    Chunks of at most 99 entries + the checkpoint (the 100-action limit) in one
    TransactWriteItems: the checkpoint update is conditioned on the version this compactor
    read (a second compactor that read the same version loses and re-reads), and every
    Delete on the entry still existing. Each chunk is atomic, so a crash between chunks
    leaves an exact ledger and the next run continues after ``mergedThrough``.

Global tables
    Appends never write the same item twice in two regions, so the ledger stays exact under
    multi-region writes (the seed's point). Compaction rewrites the checkpoint with
    last-writer-wins semantics, so it must run in one region only: pass
    ``compaction_region`` and the compactor refuses to run anywhere else.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from counters.core.client import client
from counters.core.commands import new_request_id
from counters.core.engine import Report, run, transact
from counters.core.engine import read as read_item
from counters.core.errors import ContentionError, IdempotencyKeyExpired, InvalidRequest, WrongRegion
from counters.core.failures import Failure, RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings, env

ENTRY_PREFIX = "ENTRY#"
SNAPSHOT = "SNAPSHOT"
WITHDRAWN_PREFIX = "WITHDRAWN#"  # sorts after SNAPSHOT: outside every balance read
DIRTY_PK = "LEDGERS#DIRTY"
MAX_TX_ACTIONS = 100
MAX_CHUNK = MAX_TX_ACTIONS - 1  # entries per transaction: the checkpoint update takes one action
AMOUNT_LIMIT = 10**15  # |amount| bound: sums stay exact in DynamoDB's 38-digit numbers

# Condition fragments, named for what they guard.
ENTRY_IS_NEW = "attribute_not_exists(#sk)"  # one entry per idempotency key: the double-count guard
ENTRY_STILL_EXISTS = "attribute_exists(#sk)"  # merge only entries still there (not merged, not removed)
CHECKPOINT_UNCHANGED = "#version = :read_version"  # the checkpoint is the one this compactor read
CHECKPOINT_ABSENT = "attribute_not_exists(#pk)"  # first compaction: nobody created it meanwhile
CHECKPOINT_BELOW = "attribute_not_exists(#through) OR #through < :sk"  # the fence: nothing merged past this entry yet
ENTRY_IS_MINE = "attribute_exists(#sk) AND #rid = :rid"  # withdraw only this request's own entry

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def ledger_pk(ledger_id: str) -> str:
    return f"LEDGER#{ledger_id}"


@dataclass(frozen=True)
class EntryKey:
    """An idempotency key and the time it carries."""

    key: str
    at_ms: int

    @property
    def entry_id(self) -> str:
        return f"{self.at_ms:013d}-{self.key}"

    @property
    def sk(self) -> str:
        return ENTRY_PREFIX + self.entry_id


def parse_key(raw: str | None) -> EntryKey:
    """Accept a ULID (26 Crockford base32 chars) or a UUIDv7; raise :class:`InvalidRequest`."""
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


@dataclass
class Balance:
    """A balance read: the checkpoint plus the entries after it."""

    balance: int
    pending_entries: int
    checkpoint: dict[str, Any] | None
    capacity: Capacity
    ignored_entries: int = 0
    """Entries at or below ``mergedThrough`` (seen mid-merge or written too late): not counted."""

    def as_dict(self) -> dict[str, Any]:
        return {"balance": self.balance, "pendingEntries": self.pending_entries, "checkpoint": self.checkpoint}


@dataclass
class CompactionReport:
    ledger_id: str
    outcome: Outcome
    """APPLIED (merged what was due; possibly nothing) or CONTENTION (stopped; safe to re-run)."""
    merged: int = 0
    chunks: int = 0
    lost_races: int = 0
    """Chunks cancelled because another compactor (or a removal) changed the ledger first."""
    complete: bool = True
    """False when the chunk budget ran out before every due entry was merged."""
    checkpoint: dict[str, Any] | None = None
    capacity: Capacity = field(default_factory=Capacity)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ledgerId": self.ledger_id,
            "outcome": self.outcome.value,
            "merged": self.merged,
            "chunks": self.chunks,
            "lostRaces": self.lost_races,
            "complete": self.complete,
            "checkpoint": self.checkpoint,
        }


@dataclass
class ScheduledReport:
    ledgers: list[CompactionReport] = field(default_factory=list)
    markers_cleared: int = 0
    stopped_early: bool = False
    capacity: Capacity = field(default_factory=Capacity)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ledgers": len(self.ledgers),
            "merged": sum(r.merged for r in self.ledgers),
            "incomplete": [r.ledger_id for r in self.ledgers if not (r.complete and r.outcome is Outcome.APPLIED)],
            "markersCleared": self.markers_cleared,
            "stoppedEarly": self.stopped_early,
        }


def public_checkpoint(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    through = item.get("mergedThrough") or ""
    return {
        "balance": int(item.get("balance", 0)),
        "version": int(item.get("version", 0)),
        "mergedThrough": through[len(ENTRY_PREFIX) :] or None,
        "mergedEntries": int(item.get("mergedEntries", 0)),
        "updatedAt": item.get("updatedAt"),
    }


@dataclass(frozen=True, kw_only=True)
class LedgerSettings(Settings):
    """The retry window and compaction margin (seconds), and the one region that compacts."""

    retry_window: float = env("LEDGER_RETRY_WINDOW_SECONDS", 600.0)
    margin: float = env("LEDGER_COMPACTION_MARGIN_SECONDS", 900.0)
    compaction_region: str | None = env("COMPACTION_REGION", None)


class Ledger:
    """Append entries idempotently, read exact balances, compact safely.

    ``retry_window``/``margin``/``marker_bucket``/``clock_skew`` are seconds. ``clock_skew``
    bounds how far a compactor's clock may be ahead of an appender's: it only decides when an
    append may skip the checkpoint fence (the fast path), never what is counted. ``clock`` returns seconds
    (tests pass a fake). ``hook(stage)`` is a test seam called at the points where a race
    can interleave: ``balance_page``, ``snapshot_read``, ``entries_read``, ``chunk_committed``,
    ``put_sending`` (an append's freshness check passed, its Put not sent yet) and
    ``entry_written`` (the Put answered or found the entry).
    """

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
        retry_window: float = 600.0,
        margin: float = 900.0,
        max_future_skew: float = 60.0,
        clock_skew: float = 60.0,
        marker_bucket: float = 300.0,
        compaction_region: str | None = None,
        region: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if retry_window <= 0 or margin < 0 or marker_bucket <= 0 or clock_skew < 0:
            raise ValueError("retry_window and marker_bucket must be > 0, margin and clock_skew >= 0")
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()
        self.retry_window = retry_window
        self.margin = margin
        self.max_future_skew = max_future_skew
        self.clock_skew = clock_skew
        self.marker_bucket_ms = int(marker_bucket * 1000)
        self.compaction_region = compaction_region or None
        self.region = region
        self.clock = clock
        self.hook: Callable[[str], None] | None = None
        self._marked: set[tuple[str, int]] = set()

    @classmethod
    def from_settings(cls, settings: LedgerSettings) -> Self:
        return cls(
            settings.table_name,
            retry=settings.retry,
            retry_window=settings.retry_window,
            margin=settings.margin,
            compaction_region=settings.compaction_region,
        )

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _stage(self, name: str) -> bool:
        if self.hook is not None:
            self.hook(name)
        return True

    # ------------------------------------------------------------------ plumbing
    def _read(self, operation: Callable[..., Any], capacity: Capacity, **kwargs: Any) -> dict[str, Any]:
        """A read retried on transient failures; ContentionError (503) past the budget."""
        return read_item(operation, self.retry, capacity, **kwargs)

    def _call(
        self, operation: Callable[..., Any], capacity: Capacity, *, write: bool, before: Callable[[], bool] | None = None, **kwargs: Any
    ) -> Report:
        """Every call here is safe to re-send: conditional puts (the condition turns a committed
        resend into a visible duplicate), idempotent deletes/puts of markers, and reads."""
        return run(operation, kwargs, policy=self.retry, capacity=capacity, write=write, before=before)

    # ------------------------------------------------------------------ append
    def check_fresh(self, key: EntryKey) -> None:
        """Refuse keys outside [now - retry_window, now + max_future_skew]."""
        now = self._now_ms()
        if key.at_ms < now - int(self.retry_window * 1000):
            raise IdempotencyKeyExpired(
                f"the Idempotency-Key is from {(now - key.at_ms) / 1000:.0f}s ago; keys older than "
                f"{self.retry_window:.0f}s are refused (their entry may already be merged): send a new key"
            )
        if key.at_ms > now + int(self.max_future_skew * 1000):
            raise InvalidRequest("the Idempotency-Key's time is in the future; check the client clock")

    def _is_fresh(self, key: EntryKey) -> bool:
        return key.at_ms >= self._now_ms() - int(self.retry_window * 1000)

    def append(self, ledger_id: str, amount: int, idempotency_key: str, *, request_id: str | None = None) -> Result:
        """Write one entry. ``value`` is the entry id.

        Outcomes: ``applied``; ``duplicate`` (this key's entry exists with this amount);
        ``rejected`` with reason ``key_reused`` (same key, other amount) or ``key_expired``;
        ``contention``; ``ambiguous`` only when the key expired while retrying an unknown
        outcome. Raises :class:`InvalidRequest` for a bad amount or key, before any write.
        """
        if isinstance(amount, bool) or not isinstance(amount, int) or amount == 0 or abs(amount) > AMOUNT_LIMIT:
            raise InvalidRequest(f"amount must be a non-zero integer with |amount| <= {AMOUNT_LIMIT}")
        key = parse_key(idempotency_key)
        result = Result(Outcome.CONTENTION, value=key.entry_id)
        try:
            self.check_fresh(key)
        except IdempotencyKeyExpired:
            result.outcome, result.reason = Outcome.REJECTED, "key_expired"
            return result
        if not self._mark_dirty(ledger_id, key, result.capacity):
            return result
        # the entry carries the id of the request that wrote it: a re-drive of that request knows it is its own
        item = {"PK": ledger_pk(ledger_id), "SK": key.sk, "amount": amount, "requestId": request_id or new_request_id()}
        call = self._call(
            self.dynamodb.put_item,
            result.capacity,
            write=True,
            before=lambda: self._is_fresh(key) and self._stage("put_sending"),  # before EVERY attempt: the retry-window bound holds per Put
            TableName=self.table_name,
            Item=to_item(item),
            ConditionExpression=ENTRY_IS_NEW,
            ExpressionAttributeNames={"#sk": "SK"},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if call.stopped:
            # Expired between attempts: nothing applied unless an earlier outcome was unknown.
            result.outcome = Outcome.AMBIGUOUS if call.unknown_seen else Outcome.REJECTED
            result.reason = "key_expired"
            return result
        result.attempts = call.attempts
        self._stage("entry_written")
        if call.response is not None:
            result.outcome = Outcome.APPLIED
            return self._settle(ledger_id, key, result, owner=item["requestId"], mine=item["requestId"], unknown_seen=call.unknown_seen)
        if call.failure is None or call.failure.kind is not Failure.CONDITION:
            return result  # contention: safe to re-drive with the same key
        old = from_item(call.failure.old_item(0)) or {}
        if old.get("amount") != amount:
            result.outcome, result.reason = Outcome.REJECTED, "key_reused"
            return result
        # This request's own earlier attempt (its answer was lost), or an earlier request with this key.
        result.outcome = Outcome.APPLIED if old.get("requestId") == item["requestId"] else Outcome.DUPLICATE
        return self._settle(ledger_id, key, result, owner=old.get("requestId"), mine=item["requestId"], unknown_seen=call.unknown_seen)

    # ------------------------------------------------------------------ settling a written entry
    def _settle(self, ledger_id: str, key: EntryKey, result: Result, *, owner: str | None, mine: str, unknown_seen: bool) -> Result:
        """Acknowledge the entry (``result`` as it is) only if it is, or will be, counted.

        ``owner`` is the request id on the entry found (``mine`` when this request wrote it).
        See "The retry window" in the module doc for why every branch is exact.
        """
        if self._now_ms() <= key.at_ms + int((self.retry_window + self.margin - self.clock_skew) * 1000):
            return result  # fast path: no compaction anywhere can have merged past this key yet
        pk = ledger_pk(ledger_id)
        try:
            fence = self._call(
                self.dynamodb.update_item,
                result.capacity,
                write=True,
                TableName=self.table_name,
                Key=to_item({"PK": pk, "SK": SNAPSHOT}),
                UpdateExpression="SET #version = if_not_exists(#version, :zero) + :one",
                ConditionExpression=CHECKPOINT_BELOW,
                ExpressionAttributeNames={"#version": "version", "#through": "mergedThrough"},
                ExpressionAttributeValues=to_item({":sk": key.sk, ":zero": 0, ":one": 1}),
            )
            if fence.response is not None:
                return result  # above mergedThrough, and every compaction in flight must re-read: counted
            if fence.failure is None or fence.failure.kind is not Failure.CONDITION:
                return self._unsettled(result)
            # mergedThrough >= this entry: it was merged (counted) or it is stranded (never counted)
            if owner == mine:
                return self._withdraw(pk, key, result, mine=mine, unknown_seen=unknown_seen)
            if self._counted(pk, key, owner, result.capacity):
                return result  # DUPLICATE: the earlier request's entry was merged
        except ContentionError:
            return self._unsettled(result)
        result.outcome, result.reason = Outcome.REJECTED, "key_expired"
        return result

    @staticmethod
    def _unsettled(result: Result) -> Result:
        """The entry exists but whether it counts is not known yet: safe to re-drive the same key."""
        result.outcome, result.reason = Outcome.CONTENTION, None
        return result

    def _withdraw(self, pk: str, key: EntryKey, result: Result, *, mine: str, unknown_seen: bool) -> Result:
        """Delete this request's stranded entry and record that it did, in one transaction."""
        withdrawn = {"PK": pk, "SK": f"{WITHDRAWN_PREFIX}{key.entry_id}#{mine}", "requestId": mine, "withdrawnAt": self._now_ms()}
        tx = transact(
            [
                {
                    "Delete": {
                        "TableName": self.table_name,
                        "Key": to_item({"PK": pk, "SK": key.sk}),
                        "ConditionExpression": ENTRY_IS_MINE,
                        "ExpressionAttributeNames": {"#sk": "SK", "#rid": "requestId"},
                        "ExpressionAttributeValues": to_item({":rid": mine}),
                    }
                },
                {"Put": {"TableName": self.table_name, "Item": to_item(withdrawn)}},
            ],
            policy=self.retry,
            dynamodb=self._dynamodb,
            capacity=result.capacity,
        )
        if tx.outcome is Outcome.REJECTED and not self._withdrawn(pk, key, mine, result.capacity):
            return result  # gone, and not by this request's hand: a compaction merged it (counted)
        if tx.outcome is Outcome.CONTENTION:
            return self._unsettled(result)
        # Withdrawn (now, or by another delivery of this request): this entry was never counted.
        result.outcome = Outcome.AMBIGUOUS if unknown_seen else Outcome.REJECTED
        result.reason = "key_expired"
        return result

    def _withdrawn(self, pk: str, key: EntryKey, request_id: str, capacity: Capacity) -> bool:
        response = self._read(
            self.dynamodb.get_item,
            capacity,
            TableName=self.table_name,
            Key=to_item({"PK": pk, "SK": f"{WITHDRAWN_PREFIX}{key.entry_id}#{request_id}"}),
            ProjectionExpression="#pk",
            ExpressionAttributeNames={"#pk": "PK"},
            ConsistentRead=True,
        )
        return "Item" in response

    def _counted(self, pk: str, key: EntryKey, owner: str | None, capacity: Capacity) -> bool:
        """For a duplicate at or below mergedThrough: was the owner's entry merged?"""
        response = self._read(
            self.dynamodb.get_item,
            capacity,
            TableName=self.table_name,
            Key=to_item({"PK": pk, "SK": key.sk}),
            ProjectionExpression="#rid",
            ExpressionAttributeNames={"#rid": "requestId"},
            ConsistentRead=True,
        )
        current = from_item(response.get("Item"))
        if current is not None and current.get("requestId") == owner:
            return False  # still there, stranded: its own request withdraws it (or it simply never counts)
        return owner is None or not self._withdrawn(pk, key, owner, capacity)

    def _mark_dirty(self, ledger_id: str, key: EntryKey, capacity: Capacity) -> bool:
        """Record that ``ledger_id`` has entries in ``key``'s time bucket (once per process)."""
        bucket = key.at_ms - key.at_ms % self.marker_bucket_ms
        if (ledger_id, bucket) in self._marked:
            return True
        call = self._call(
            self.dynamodb.put_item,
            capacity,
            write=True,
            TableName=self.table_name,
            Item=to_item({"PK": DIRTY_PK, "SK": f"{bucket:013d}#{ledger_id}", "ledgerId": ledger_id}),
        )
        if call.response is None:
            return False
        if len(self._marked) > 10_000:
            self._marked.clear()
        self._marked.add((ledger_id, bucket))
        return True

    # ------------------------------------------------------------------ balance
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
            confirm = self._read(
                self.dynamodb.get_item,
                capacity,
                TableName=self.table_name,
                Key=to_item({"PK": ledger_pk(ledger_id), "SK": SNAPSHOT}),
                ProjectionExpression="#version",
                ExpressionAttributeNames={"#version": "version"},
                ConsistentRead=True,
            )
            version = int((from_item(confirm.get("Item")) or {}).get("version", 0))
            if version == (read.checkpoint or {}).get("version", 0):
                return read
        raise ContentionError(f"ledger {ledger_id!r} kept compacting during {max_reads} reads; retry")

    def _read_balance(self, ledger_id: str, page_size: int | None, capacity: Capacity) -> Balance:
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :first AND :snapshot",
            "ProjectionExpression": "#sk, #amount, #balance, #through, #version, #merged, #updated",
            "ExpressionAttributeNames": {
                "#pk": "PK",
                "#sk": "SK",
                "#amount": "amount",
                "#balance": "balance",
                "#through": "mergedThrough",
                "#version": "version",
                "#merged": "mergedEntries",
                "#updated": "updatedAt",
            },
            "ExpressionAttributeValues": to_item({":pk": ledger_pk(ledger_id), ":first": ENTRY_PREFIX, ":snapshot": SNAPSHOT}),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if page_size:
            kwargs["Limit"] = page_size
        entries: list[tuple[str, int]] = []
        snapshot: dict[str, Any] | None = None
        while True:
            page = self._read(self.dynamodb.query, capacity, **kwargs)
            for raw in page.get("Items", []):
                sk = raw["SK"]["S"]
                if sk == SNAPSHOT:
                    snapshot = from_item(raw)
                else:  # the hot loop of a long read: no generic deserialiser
                    entries.append((sk, int(raw["amount"]["N"])))
            if "LastEvaluatedKey" not in page:
                break
            self._stage("balance_page")
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        through = (snapshot or {}).get("mergedThrough") or ""
        pending = [amount for sk, amount in entries if sk > through]  # <= through: in the checkpoint
        total = int((snapshot or {}).get("balance", 0)) + sum(pending)
        return Balance(total, len(pending), public_checkpoint(snapshot), capacity, ignored_entries=len(entries) - len(pending))

    # ------------------------------------------------------------------ compaction
    def guard_region(self) -> None:
        """Refuse to compact outside ``compaction_region`` (global tables: one merger only)."""
        here = self.region or getattr(getattr(self.dynamodb, "meta", None), "region_name", None)
        if self.compaction_region and here != self.compaction_region:
            raise WrongRegion(f"ledger compaction runs in {self.compaction_region} only; this is {here}")

    def cutoff_ms(self) -> int:
        """Entries with a key time before this are merged; later ones may still be retried."""
        return self._now_ms() - int((self.retry_window + self.margin) * 1000)

    def _read_checkpoint(self, pk: str, capacity: Capacity) -> dict[str, Any] | None:
        response = self._read(
            self.dynamodb.get_item,
            capacity,
            TableName=self.table_name,
            Key=to_item({"PK": pk, "SK": SNAPSHOT}),
            ConsistentRead=True,
        )
        return from_item(response.get("Item"))

    def _due_entries(self, pk: str, after: str, cutoff_ms: int, limit: int, capacity: Capacity) -> list[dict[str, Any]]:
        """Up to ``limit`` entries after ``after`` with a key time before ``cutoff_ms``, in order."""
        upper = f"{ENTRY_PREFIX}{cutoff_ms:013d}"
        if after >= upper:
            return []  # a compactor with a later clock (or a later start) already merged past our cutoff
        response = self._read(
            self.dynamodb.query,
            capacity,
            TableName=self.table_name,
            # BETWEEN is inclusive: ``after`` itself is skipped below; the upper bound
            # "ENTRY#<cutoff>" sorts before every entry of that millisecond ("...-<key>").
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :after AND :cutoff",
            ProjectionExpression="#sk, #amount",
            ExpressionAttributeNames={"#pk": "PK", "#sk": "SK", "#amount": "amount"},
            ExpressionAttributeValues=to_item({":pk": pk, ":after": after or ENTRY_PREFIX, ":cutoff": upper}),
            ConsistentRead=True,
            Limit=limit + 1,
        )
        items = [{"SK": raw["SK"]["S"], "amount": int(raw["amount"]["N"])} for raw in response.get("Items", [])]
        return [item for item in items if item["SK"] != after][:limit]

    def compact(
        self, ledger_id: str, *, chunk_size: int = MAX_CHUNK, max_chunks: int | None = None, max_lost_races: int = 5
    ) -> CompactionReport:
        """Merge entries older than the retry window + margin into the checkpoint, chunk by chunk."""
        self.guard_region()
        if not 1 <= chunk_size <= MAX_CHUNK:
            raise ValueError(f"chunk_size must be in 1..{MAX_CHUNK}")
        pk = ledger_pk(ledger_id)
        cutoff = self.cutoff_ms()
        report = CompactionReport(ledger_id, Outcome.APPLIED)
        while True:
            checkpoint = self._read_checkpoint(pk, report.capacity)
            report.checkpoint = public_checkpoint(checkpoint)
            self._stage("snapshot_read")
            if max_chunks is not None and report.chunks >= max_chunks:
                probe = self._due_entries(pk, (checkpoint or {}).get("mergedThrough", ""), cutoff, 1, report.capacity)
                report.complete = not probe
                return report
            through = (checkpoint or {}).get("mergedThrough", "")
            entries = self._due_entries(pk, through, cutoff, chunk_size, report.capacity)
            self._stage("entries_read")
            if not entries:
                return report
            tx = transact(self._chunk(pk, ledger_id, checkpoint, entries), policy=self.retry, dynamodb=self._dynamodb)
            report.capacity.merge(tx.capacity)
            if tx.outcome is Outcome.APPLIED:
                report.merged += len(entries)
                report.chunks += 1
                self._stage("chunk_committed")
                if len(entries) < chunk_size:
                    report.checkpoint = public_checkpoint(self._read_checkpoint(pk, report.capacity))
                    return report
                continue
            if tx.outcome is Outcome.REJECTED:
                # Another compactor moved the checkpoint, or an entry vanished: re-read, go on.
                report.lost_races += 1
                if report.lost_races <= max_lost_races:
                    continue
            report.outcome, report.complete = Outcome.CONTENTION, False
            return report

    def _chunk(self, pk: str, ledger_id: str, checkpoint: dict[str, Any] | None, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        version = int((checkpoint or {}).get("version", 0))
        values = {
            ":balance": int((checkpoint or {}).get("balance", 0)) + sum(int(e["amount"]) for e in entries),
            ":through": entries[-1]["SK"],
            ":next": version + 1,
            ":merged": int((checkpoint or {}).get("mergedEntries", 0)) + len(entries),
            ":now": self._now_ms(),
            ":ledger": ledger_id,
        }
        names = {
            "#balance": "balance",
            "#through": "mergedThrough",
            "#version": "version",
            "#merged": "mergedEntries",
            "#updated": "updatedAt",
            "#ledger": "ledgerId",
        }
        if checkpoint is None:
            condition = CHECKPOINT_ABSENT
            names["#pk"] = "PK"
        else:
            condition = CHECKPOINT_UNCHANGED
            values[":read_version"] = version
        update = {
            "Update": {
                "TableName": self.table_name,
                "Key": to_item({"PK": pk, "SK": SNAPSHOT}),
                "UpdateExpression": "SET #balance = :balance, #through = :through, #version = :next, "
                "#merged = :merged, #updated = :now, #ledger = :ledger",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_item(values),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",  # the loser sees the newer checkpoint
            }
        }
        deletes = [
            {
                "Delete": {
                    "TableName": self.table_name,
                    "Key": to_item({"PK": pk, "SK": entry["SK"]}),
                    "ConditionExpression": ENTRY_STILL_EXISTS,
                    "ExpressionAttributeNames": {"#sk": "SK"},
                }
            }
            for entry in entries
        ]
        return [update, *deletes]

    # ------------------------------------------------------------------ scheduled compaction
    def compact_due(self, *, should_stop: Callable[[], bool] | None = None, chunk_size: int = MAX_CHUNK) -> ScheduledReport:
        """Compact every ledger with a dirty marker whose bucket is entirely before the cutoff.

        Markers are found with one Query on ``LEDGERS#DIRTY`` (no Scan) and cleared only
        after their ledger compacted completely; ``should_stop`` lets a Lambda stop before
        its timeout (the next run picks up what is left).
        """
        self.guard_region()
        report = ScheduledReport()
        cutoff = self.cutoff_ms()
        due_before = cutoff - cutoff % self.marker_bucket_ms  # buckets that end at or before the cutoff
        markers: dict[str, list[str]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk < :due",
            "ExpressionAttributeNames": {"#pk": "PK", "#sk": "SK"},
            "ExpressionAttributeValues": to_item({":pk": DIRTY_PK, ":due": f"{due_before:013d}"}),
            "ReturnConsumedCapacity": "TOTAL",
        }
        while True:
            page = self._read(self.dynamodb.query, report.capacity, **kwargs)
            for raw in page.get("Items", []):
                sk = (from_item(raw) or {})["SK"]
                markers.setdefault(sk.split("#", 1)[1], []).append(sk)
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        for ledger_id, sks in markers.items():
            if should_stop is not None and should_stop():
                report.stopped_early = True
                break
            done = self.compact(ledger_id, chunk_size=chunk_size)
            report.ledgers.append(done)
            report.capacity.merge(done.capacity)
            if done.outcome is not Outcome.APPLIED or not done.complete:
                continue  # keep its markers: the next run retries it
            for sk in sks:
                call = self._call(
                    self.dynamodb.delete_item,
                    report.capacity,
                    write=True,
                    TableName=self.table_name,
                    Key=to_item({"PK": DIRTY_PK, "SK": sk}),
                )
                report.markers_cleared += call.response is not None
        return report
