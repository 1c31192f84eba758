"""Ledger requests (seed 02, approach 6): the conditions that keep a ledger exact and the DynamoDB
calls that carry them, each turned into a typed fact.

The items (keys, attribute names, shapes, who writes them, idempotency keys) are in
[`counters.store.ledger_items`][counters.store.ledger_items]. Every call goes through
[`counters.core.engine`][counters.core.engine]. Where a group is written in order (MRSC, no
transactions: [`LedgerStore.writes`][counters.store.ledger.LedgerStore.writes] is ``IN_ORDER``) a
compaction chunk and a withdrawal are single-item writes. Why each condition makes the ledger exact is in [docs/ledgers.md](../ledgers.md) ("Guarantees and how they
are kept"); the rules that use these requests are in [`counters.primitives.ledger`][counters.primitives.ledger].
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum, StrEnum

from counters.core.client import DynamoDBClient
from counters.core.engine import read, run, transact
from counters.core.failures import Failure, RetryPolicy
from counters.core.items import Record
from counters.core.outcome import Capacity, Outcome
from counters.core.policy import TOGETHER, RegionPolicy, Writes
from counters.core.records import dataclass
from counters.store import ledger_items
from counters.store.base import Store
from counters.store.expr import Cond, Delete, Get, Path, Put, Query, Transaction, Update, if_not_exists, old_item, plus
from counters.store.items import from_item
from counters.store.ledger_items import (
    AMOUNT,
    BALANCE,
    ENTRY_PREFIX,
    LEDGER_ID,
    MERGED_ENTRIES,
    MERGED_THROUGH,
    PENDING_DELETES,
    PK,
    REQUEST_ID,
    SK,
    SNAPSHOT,
    SNAPSHOTS_END,
    UPDATED_AT,
    VERSION,
    WITHDRAWN_AT,
    Checkpoint,
    Entry,
    EntryKey,
    checkpoint_of,
    dirty_pk,
    entry_id_of,
    entry_writer,
    ledger_pk,
    marker_sk,
    snapshot_sk,
    snapshot_writer,
)


@dataclass(frozen=True)
class Found:
    """The entry a Put found under its key: what it holds and which request wrote it."""

    amount: int | None
    request_id: str | None


class PutStatus(StrEnum):
    """How an entry's conditional Put ended."""

    CREATED = "created"
    FOUND = "found"  # the key's entry exists (``EntryPut.found`` says what it holds)
    STOPPED = "stopped"  # ``before`` refused an attempt (the key expired between attempts)
    CONTENTION = "contention"


@dataclass(frozen=True)
class EntryPut:
    """What putting an entry did."""

    status: PutStatus
    attempts: int
    unknown_seen: bool
    """An attempt's outcome was unknown: an earlier attempt may have written the entry."""
    found: Found | None = None


class Fence(StrEnum):
    """The checkpoint fence of a settling append."""

    ABOVE = "above"  # nothing merged past the entry yet, and every compaction in flight must re-read
    BEHIND = "behind"  # ``mergedThrough`` is at or past the entry: merged, or stranded
    CONTENTION = "contention"


@dataclass(frozen=True)
class Sighting:
    """This key's entry as a Region wrote it, seen in this Region's replica (the failover check)."""

    writer: str
    amount: int
    request_id: str | None


@dataclass(frozen=True)
class LedgerRead:
    """One balance Query: every entry, then the checkpoints (read last), by writing Region."""

    entries: list[Entry]
    checkpoints: dict[str, Checkpoint]

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The single-Region checkpoint (``SNAPSHOT``)."""
        return self.checkpoints.get("")


class Withdrawal(Enum):
    """The actions of the transaction that withdraws a stranded entry."""

    ENTRY = "entry"  # delete the request's own entry (it exists and carries the request id)
    RECORD = "record"  # the WITHDRAWN# record a re-delivery of the request finds


class Chunk(Enum):
    """The actions of one compaction chunk."""

    CHECKPOINT = "checkpoint"  # move the checkpoint, conditioned on the version read
    ENTRIES = "entries"  # delete each merged entry, conditioned on it still existing


# -- conditions, named for what they guard -----------------------------------------------------------
def entry_is_new() -> Cond:
    """No entry under the key yet: the double-count guard."""
    return Path(SK).missing()  # one entry per idempotency key: the double-count guard


def checkpoint_unchanged(version: int) -> Cond:
    """The checkpoint is the version this compactor read."""
    return Path(VERSION) == version  # the checkpoint is the one this compactor read


def checkpoint_absent() -> Cond:
    """No checkpoint yet (first compaction: nobody created it meanwhile)."""
    return Path(PK).missing()  # first compaction: nobody created it meanwhile


def checkpoint_below(sk: str) -> Cond:
    """Nothing merged past ``sk`` (the fence)."""
    return Path(MERGED_THROUGH).missing() | (Path(MERGED_THROUGH) < sk)  # the fence: nothing merged past this entry


def entry_still_exists() -> Cond:
    """The entry is still there (not merged, not removed)."""
    return Path(SK).exists()  # merge only entries still there (not merged, not removed)


def entry_is_mine(request_id: str) -> Cond:
    """The entry was written by ``request_id``: only its own request withdraws it."""
    return Path(SK).exists() & (Path(REQUEST_ID) == request_id)  # withdraw only this request's own entry


# -- the calls -------------------------------------------------------------------------------------
class LedgerStore(Store):
    """The ledger family's DynamoDB calls on one table, each retried by the engine under ``retry``.

    ``writer`` is the Region whose items this store writes (``""``: one layout for every Region, a
    single-Region or MRSC table); ``writes`` ``IN_ORDER`` (MRSC) builds chunks and withdrawals from
    single-item writes.
    """

    FAMILIES = (ledger_items.TABLE,)

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        retry: RetryPolicy | None = None,
        writer: str = "",
        writes: Writes = TOGETHER,
        policy: RegionPolicy | None = None,
    ) -> None:
        super().__init__(table_name, dynamodb=dynamodb, retry=retry, policy=policy)
        self.writer = writer
        self.writes = writes
        """How a group is written here ([`Writes`][counters.core.policy.Writes]: ``IN_ORDER`` on MRSC, single-item writes)."""

    def _entry_key(self, ledger_id: str, key: EntryKey) -> dict[str, str]:
        return {PK: ledger_pk(ledger_id), SK: key.sk_in(self.writer)}

    def _snapshot_key(self, ledger_id: str, writer: str | None = None) -> dict[str, str]:
        return {PK: ledger_pk(ledger_id), SK: snapshot_sk(self.writer if writer is None else writer)}

    # appends
    def mark_dirty(self, ledger_id: str, bucket_ms: int, capacity: Capacity) -> bool:
        """Record that ``ledger_id`` has entries in this time bucket (an idempotent Put, this Region's marker)."""
        put = Put(self.table_name, item={PK: dirty_pk(self.writer), SK: marker_sk(bucket_ms, ledger_id), LEDGER_ID: ledger_id})
        return run(self.dynamodb.put_item, put.params(), policy=self.retry, capacity=capacity, write=True).response is not None

    def sightings(self, ledger_id: str, key: EntryKey, capacity: Capacity) -> list[Sighting]:
        """Every Region's entry for ``key`` that this Region's replica holds (one Query: they are adjacent)."""
        query = Query(self.table_name, (Path(PK) == ledger_pk(ledger_id)) & Path(SK).begins_with(key.sk), consistent=True).project(
            SK, AMOUNT, REQUEST_ID
        )
        page = read(self.dynamodb.query, self.retry, capacity, **query.params())
        found = []
        for raw in page.get("Items", []):
            sk = raw[SK]["S"]
            if entry_id_of(sk) == key.entry_id:
                request = raw.get(REQUEST_ID, {}).get("S")
                found.append(Sighting(entry_writer(sk), int(raw[AMOUNT]["N"]), request))
        return found

    def put_entry(
        self, ledger_id: str, key: EntryKey, amount: int, request_id: str, capacity: Capacity, *, before: Callable[[], bool]
    ) -> EntryPut:
        """Put the key's entry (this Region's) unless it exists; ``before`` may veto each attempt."""
        item = {**self._entry_key(ledger_id, key), AMOUNT: amount, REQUEST_ID: request_id}
        put = Put(self.table_name, item=item).when(entry_is_new())
        call = run(self.dynamodb.put_item, put.params(), policy=self.retry, capacity=capacity, write=True, before=before)
        if call.stopped:
            return EntryPut(PutStatus.STOPPED, call.attempts, call.unknown_seen)
        if call.response is not None:
            return EntryPut(PutStatus.CREATED, call.attempts, call.unknown_seen)
        if call.failure is None or call.failure.kind is not Failure.CONDITION:
            return EntryPut(PutStatus.CONTENTION, call.attempts, call.unknown_seen)
        old = old_item(call.failure) or {}
        amount_found = old.get(AMOUNT)
        found = Found(int(amount_found) if amount_found is not None else None, old.get(REQUEST_ID))
        return EntryPut(PutStatus.FOUND, call.attempts, call.unknown_seen, found)

    def fence(self, ledger_id: str, key: EntryKey, capacity: Capacity) -> Fence:
        """Bump this Region's checkpoint's version if nothing was merged past ``key``'s entry yet."""
        update = (
            Update(self.table_name, self._snapshot_key(ledger_id))
            .set(VERSION, plus(if_not_exists(VERSION, 0), 1))
            .when(checkpoint_below(key.sk_in(self.writer)))
        )
        update.on_failure = False
        call = run(self.dynamodb.update_item, update.params(), policy=self.retry, capacity=capacity, write=True)
        if call.response is not None:
            return Fence.ABOVE
        if call.failure is not None and call.failure.kind is Failure.CONDITION:
            return Fence.BEHIND
        return Fence.CONTENTION

    def withdraw(self, ledger_id: str, key: EntryKey, request_id: str, now_ms: int, capacity: Capacity) -> Outcome:
        """Delete this request's own entry and record that it did: APPLIED, REJECTED (the entry is
        gone, or is another request's) or CONTENTION. One transaction; on MRSC (no transactions)
        `_withdraw_single`."""
        record = {PK: ledger_pk(ledger_id), SK: key.withdrawn_sk(request_id, self.writer), REQUEST_ID: request_id, WITHDRAWN_AT: now_ms}
        entry = Delete(self.table_name, key=self._entry_key(ledger_id, key)).when(entry_is_mine(request_id))
        entry.on_failure = False
        withdraw = self.writes.choose(together=self._withdraw_together, in_order=self._withdraw_single)
        return withdraw(ledger_id, key, request_id, record, entry, capacity)

    def _withdraw_together(
        self, ledger_id: str, key: EntryKey, request_id: str, record: Record, entry: Delete, capacity: Capacity
    ) -> Outcome:
        """The withdrawal in one transaction: the entry's Delete (if it is this request's) and the record."""
        tx: Transaction[Withdrawal] = Transaction()
        tx.delete(Withdrawal.ENTRY, entry).put(Withdrawal.RECORD, Put(self.table_name, item=record))
        report = transact(tx.items(), policy=self.retry, dynamodb=self._dynamodb, capacity=capacity)
        return report.outcome

    def _withdraw_single(
        self, ledger_id: str, key: EntryKey, request_id: str, record: Record, entry: Delete, capacity: Capacity
    ) -> Outcome:
        """The withdrawal without a transaction (MRSC: strongly consistent single-item calls).

        The fence failed, so the entry is merged (gone, or still listed in the checkpoint's
        ``pendingDeletes``: counted) or stranded (there, never listed by a compactor, and only its own
        request removes it). Record first, then delete: a crash between leaves a stranded entry and its
        record, never a gone entry without one (which would read as merged).
        """
        checkpoint = self.checkpoint(ledger_id, capacity)
        sk = key.sk_in(self.writer)
        if checkpoint is not None and sk in checkpoint.pending_deletes:
            return Outcome.REJECTED  # merged: its deletion is still pending
        owner = self.entry_owner(ledger_id, key, capacity)
        if owner is None or owner.request_id != request_id:
            return Outcome.REJECTED  # gone (merged and deleted), or another request's
        put = run(self.dynamodb.put_item, Put(self.table_name, item=record).params(), policy=self.retry, capacity=capacity, write=True)
        if put.response is None:
            return Outcome.CONTENTION
        call = run(self.dynamodb.delete_item, entry.params(), policy=self.retry, capacity=capacity, write=True)
        if call.response is not None or (call.failure is not None and call.failure.kind is Failure.CONDITION):
            return Outcome.APPLIED  # deleted now, or by another delivery of this request (its record exists)
        return Outcome.CONTENTION

    def withdrawn(self, ledger_id: str, key: EntryKey, request_id: str, capacity: Capacity) -> bool:
        """Did ``request_id`` withdraw the key's entry (its WITHDRAWN# record exists)?"""
        sk = key.withdrawn_sk(request_id, self.writer)
        get = Get(self.table_name, {PK: ledger_pk(ledger_id), SK: sk}).project(PK).strongly()
        return "Item" in read(self.dynamodb.get_item, self.retry, capacity, **get.params())

    def entry_owner(self, ledger_id: str, key: EntryKey, capacity: Capacity) -> Found | None:
        """This Region's entry for the key as it is now (``None``: gone), projected to its request id."""
        get = Get(self.table_name, self._entry_key(ledger_id, key)).project(REQUEST_ID).strongly()
        item = from_item(read(self.dynamodb.get_item, self.retry, capacity, **get.params()).get("Item"))
        return None if item is None else Found(None, item.get(REQUEST_ID))

    # reads
    def checkpoint(self, ledger_id: str, capacity: Capacity, *, version_only: bool = False, writer: str | None = None) -> Checkpoint | None:
        """A checkpoint (this Region's unless ``writer``), strongly consistent (``version_only``: 1 small read)."""
        get = Get(self.table_name, self._snapshot_key(ledger_id, writer)).strongly()
        if version_only:
            get.project(VERSION)
        return checkpoint_of(from_item(read(self.dynamodb.get_item, self.retry, capacity, **get.params()).get("Item")))

    def read_ledger(
        self, ledger_id: str, page_size: int | None, capacity: Capacity, *, between_pages: Callable[[], object], per_region: bool = False
    ) -> LedgerRead:
        """One consistent Query from ``ENTRY#`` to the checkpoint(s), every page, in key order.

        ``per_region``: up to ``SNAPSHOT#~`` (every Region's checkpoint, after every entry);
        otherwise up to ``SNAPSHOT`` exactly, as a single-Region table always read.
        """
        upper = SNAPSHOTS_END if per_region else SNAPSHOT
        query = Query(
            self.table_name, (Path(PK) == ledger_pk(ledger_id)) & Path(SK).between(ENTRY_PREFIX, upper), consistent=True, limit=page_size
        ).project(SK, AMOUNT, BALANCE, MERGED_THROUGH, VERSION, MERGED_ENTRIES, UPDATED_AT)
        params = query.params()
        entries: list[Entry] = []
        snapshots: dict[str, Checkpoint] = {}
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **params)
            for raw in page.get("Items", []):
                sk = raw[SK]["S"]
                if sk.startswith(ENTRY_PREFIX):  # the hot loop of a long read: no generic deserialiser
                    entries.append(Entry(sk, int(raw[AMOUNT]["N"])))
                else:
                    writer = snapshot_writer(sk)
                    snapshot = checkpoint_of(from_item(raw))
                    if writer is not None and snapshot is not None:
                        snapshots[writer] = snapshot
            if "LastEvaluatedKey" not in page:
                return LedgerRead(entries, snapshots)
            between_pages()
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # compaction
    def due_entries(self, ledger_id: str, after: str, cutoff_ms: int, limit: int, capacity: Capacity) -> list[Entry]:
        """Up to ``limit`` of this Region's entries after the sort key ``after`` with a key time before
        ``cutoff_ms``, in order (other Regions' entries in the range are read past, never returned)."""
        upper = f"{ENTRY_PREFIX}{cutoff_ms:013d}"
        if after >= upper:
            return []  # a compactor with a later clock (or a later start) already merged past our cutoff
        # BETWEEN is inclusive: ``after`` itself is skipped below; the upper bound
        # "ENTRY#<cutoff>" sorts before every entry of that millisecond ("...-<key>").
        query = Query(
            self.table_name,
            (Path(PK) == ledger_pk(ledger_id)) & Path(SK).between(after or ENTRY_PREFIX, upper),
            consistent=True,
            limit=limit + 1,
        ).project(SK, AMOUNT)
        params = query.params()
        entries: list[Entry] = []
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **params)
            for raw in page.get("Items", []):
                entry = Entry(raw[SK]["S"], int(raw[AMOUNT]["N"]))
                if entry.sk != after and entry.writer == self.writer:
                    entries.append(entry)
            if len(entries) >= limit or "LastEvaluatedKey" not in page:
                return entries[:limit]
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def chunk(self, ledger_id: str, checkpoint: Checkpoint | None, entries: list[Entry], now_ms: int) -> Transaction[Chunk]:
        """Merge ``entries`` (after ``checkpoint``, in order) into this Region's checkpoint and delete them."""
        base = checkpoint or Checkpoint()
        update = (
            Update(self.table_name, self._snapshot_key(ledger_id))
            .set(BALANCE, base.balance + sum(e.amount for e in entries))
            .set(MERGED_THROUGH, entries[-1].sk)
            .set(VERSION, base.version + 1)
            .set(MERGED_ENTRIES, base.merged_entries + len(entries))
            .set(UPDATED_AT, now_ms)
            .set(LEDGER_ID, ledger_id)
            .when(checkpoint_absent() if checkpoint is None else checkpoint_unchanged(base.version))
        )
        pending = self.writes.choose(together=None, in_order=[e.sk for e in entries])  # written alone, it lists what it merged
        if pending is not None:
            update.set(PENDING_DELETES, pending)
        deletes = [Delete(self.table_name, key={PK: ledger_pk(ledger_id), SK: e.sk}).when(entry_still_exists()) for e in entries]
        for delete in deletes:
            delete.on_failure = False
        tx: Transaction[Chunk] = Transaction()
        return tx.update(Chunk.CHECKPOINT, update).delete_each(Chunk.ENTRIES, deletes)

    def commit(self, chunk: Transaction[Chunk], capacity: Capacity) -> Outcome:
        """APPLIED; REJECTED (another compactor moved the checkpoint, or an entry vanished); CONTENTION.

        On MRSC: the checkpoint update alone (its ``pendingDeletes`` lists the entries), then
        [`delete_merged`][counters.store.ledger.LedgerStore.delete_merged]; the balance read ignores entries at or below ``mergedThrough`` meanwhile.
        """
        commit = self.writes.choose(together=self._commit_together, in_order=self._commit_checkpoint)
        return commit(chunk, capacity)

    def _commit_together(self, chunk: Transaction[Chunk], capacity: Capacity) -> Outcome:
        return transact(chunk.items(), policy=self.retry, dynamodb=self._dynamodb, capacity=capacity).outcome

    def _commit_checkpoint(self, chunk: Transaction[Chunk], capacity: Capacity) -> Outcome:
        """The checkpoint's update alone (its ``pendingDeletes`` lists the entries to delete after it)."""
        update = chunk.items()[0]["Update"]
        call = run(self.dynamodb.update_item, update, policy=self.retry, capacity=capacity, write=True)
        if call.response is None:
            return Outcome.REJECTED if call.failure is not None and call.failure.kind is Failure.CONDITION else Outcome.CONTENTION
        return Outcome.APPLIED

    def delete_merged(self, ledger_id: str, checkpoint: Checkpoint, capacity: Capacity) -> bool:
        """MRSC: delete the entries the checkpoint's last chunk merged (idempotent), then clear the list
        (if the checkpoint did not move meanwhile). False: out of budget (the next compaction re-does it)."""
        for sk in checkpoint.pending_deletes:
            delete = Delete(self.table_name, key={PK: ledger_pk(ledger_id), SK: sk})
            if run(self.dynamodb.delete_item, delete.params(), policy=self.retry, capacity=capacity, write=True).response is None:
                return False
        clear = (
            Update(self.table_name, self._snapshot_key(ledger_id)).remove(PENDING_DELETES).when(checkpoint_unchanged(checkpoint.version))
        )
        clear.on_failure = False
        run(self.dynamodb.update_item, clear.params(), policy=self.retry, capacity=capacity, write=True)
        return True

    def dirty_markers(self, due_before_ms: int, capacity: Capacity) -> dict[str, list[str]]:
        """This Region's markers of buckets before ``due_before_ms``, by ledger id (one Query, no Scan)."""
        query = Query(self.table_name, (Path(PK) == dirty_pk(self.writer)) & (Path(SK) < f"{due_before_ms:013d}"))
        params = query.params()
        markers: dict[str, list[str]] = {}
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **params)
            for raw in page.get("Items", []):
                sk = raw[SK]["S"]
                markers.setdefault(sk.split("#", 1)[1], []).append(sk)
            if "LastEvaluatedKey" not in page:
                return markers
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def clear_marker(self, sk: str, capacity: Capacity) -> bool:
        """Delete a dirty marker; False if the delete did not get through."""
        delete = Delete(self.table_name, key={PK: dirty_pk(self.writer), SK: sk})
        return run(self.dynamodb.delete_item, delete.params(), policy=self.retry, capacity=capacity, write=True).response is not None
