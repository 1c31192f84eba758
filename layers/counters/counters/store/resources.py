"""Resources' calls: [`ResourceStore`][counters.store.resources.ResourceStore] reads and writes a resource's counter items,
its reservation records and its transfers, each call through the retry engine.

The family's items are declared by three modules, each beside its keys, shapes and writer rules:
[`counters.store.resources_counters`][counters.store.resources_counters] (a resource's ``META``, its shards and
every Region's escrowed share, and every approach's write on them),
[`counters.store.resources_records`][counters.store.resources_records] (reservation records) and
[`counters.store.resources_transfers`][counters.store.resources_transfers] (MREC escrow's transfers and their
receipts); their names are imported from them. The approaches
([`counters.primitives.approaches`][counters.primitives.approaches]) decide which calls to make, the
reservations service ([`counters.services.reservations`][counters.services.reservations]) orchestrates, and
nothing above the store sees a raw item: reads and ``ALL_OLD`` items come back as
[`Counter`][counters.store.resources_counters.Counter], [`Resource`][counters.store.resources_counters.Resource],
[`Record`][counters.store.resources_records.Record] and [`Transfer`][counters.store.resources_transfers.Transfer].
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError

from counters.core.engine import Hook, Report, Stop, read, run
from counters.core.failures import Classified
from counters.core.outcome import Capacity, Outcome
from counters.core.records import dataclass
from counters.store import resources_counters as counters_table
from counters.store import resources_records as records_table
from counters.store import resources_transfers as transfers_table
from counters.store.base import Store
from counters.store.expr import Delete, Get, Params, Path, Put, Query, Transaction, Update, old_item
from counters.store.items import from_item
from counters.store.resources_counters import IS_NEW, PK, QUOTA, RESERVED, SHARES, Counter, Fields, Key, Resource, resource_key
from counters.store.resources_records import (
    ALLOCATION,
    EXPIRES_AT,
    QUANTITY,
    RELEASED_AT,
    RELEASED_BY,
    REQUEST_ID,
    STATUS,
    Record,
    Status,
    record_key,
)
from counters.store.resources_transfers import RECEIPT, SOURCE, TARGET, Transfer, transfer_key, transfers_pk


class Action(Enum):
    """The actions of this family's transactions: the record, the resource, each counter item."""

    RECORD = "record"
    RESOURCE = "resource"
    C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 = range(10)
    C10, C11, C12, C13, C14, C15, C16, C17, C18, C19 = range(10, 20)


COUNTERS = tuple(a for a in Action if isinstance(a.value, int))
"""One action name per counter item of a transaction (at most [`MAX_SHARDS`][counters.store.resources_counters.MAX_SHARDS])."""


def found(failure: Classified | None) -> Counter | None:
    """The counter item a single write's failed condition found (``ALL_OLD``)."""
    return Counter.of(old_item(failure))


@dataclass
class Taken:
    """How a transaction over counter items (and perhaps the record) ended."""

    outcome: Outcome
    capacity: Capacity
    attempts: int
    unknown_seen: bool = False
    mismatch: bool = False
    """``IdempotentParameterMismatch``: the ClientRequestToken was used with other parameters."""
    counter: Counter | None = None
    """The first counter item whose condition failed, as it was (``None``: there was none)."""
    record_failed: bool = False
    record: Record | None = None
    """The record already there when the record's condition failed."""


class ResourceStore(Store):
    """The calls of this family, each through the retry engine, on one table under one Region policy."""

    FAMILIES = (counters_table.TABLE, records_table.TABLE, transfers_table.TABLE)

    @property
    def region(self) -> str:
        """The Region whose reservation records it reads and writes (MREC: each Region its own; ``""``: the one record of every Region)."""
        return self.policy.writer

    def _get(self, key: Key, capacity: Capacity | None) -> dict[str, Any] | None:
        response = read(self.dynamodb.get_item, self.retry, capacity, **Get(self.table_name, key).strongly().params())
        return from_item(response.get("Item"))

    def counter(self, key: Key, capacity: Capacity | None = None) -> Counter | None:
        """The counter item at ``key`` (strongly consistent), or None."""
        return Counter.of(self._get(key, capacity))

    def record(self, token: str, capacity: Capacity | None = None) -> Record | None:
        """This Region's record of a request token, or None."""
        return Record.of(self._get(record_key(token, self.region), capacity))

    def records(self, token: str, capacity: Capacity | None = None) -> list[Record]:
        """Every Region's record of a request token this replica holds (MREC; one consistent Query)."""
        query = Query(self.table_name, (Path(PK) == record_key(token)["PK"]) & Path("SK").begins_with("RSV"), consistent=True)
        response = read(self.dynamodb.query, self.retry, capacity, **query.params())
        return [r for r in (Record.of(from_item(raw)) for raw in response.get("Items", [])) if r is not None]

    def resource(self, resource_id: str, region: str = "") -> Resource | None:
        """The resource's META; an escrowed one's counter keys are ``region``'s share."""
        item = self._get(resource_key(resource_id), None)
        if item is None:
            return None
        counter = Counter.of(item) if RESERVED in item else None
        raw = item.get(SHARES)
        shares = {str(k): int(v) for k, v in raw.items()} if isinstance(raw, Mapping) else None
        return Resource(resource_id, int(item["capacity"]), str(item["strategy"]), int(item["shards"]), counter, shares, region)

    def quotas(self, keys: list[Key], capacity: Capacity) -> list[tuple[int, Counter]]:
        """Counter items' capacities (an escrowed share's) and counts, each one strongly consistent
        read of this Region's replica (no snapshot: MRSC has no TransactGetItems); missing: 0/0."""
        found = []
        for key in keys:
            item = self._get(key, capacity)
            found.append((int(item.get(QUOTA, 0)) if item else 0, Counter.of(item) or Counter()))
        return found

    def transfers(self, resource_id: str, capacity: Capacity | None = None) -> list[Transfer]:
        """Every transfer of the resource this Region's replica holds, each marked ``received``
        when its receipt is here too (one consistent Query of the transfers' partition)."""
        query = Query(self.table_name, Path(PK) == transfers_pk(resource_id), consistent=True)
        params = query.params()
        sent: dict[str, dict[str, Any]] = {}
        receipts: set[str] = set()
        while True:
            page = read(self.dynamodb.query, self.retry, capacity, **params)
            for raw in page.get("Items", []):
                item = from_item(raw) or {}
                sk = str(item["SK"])
                if sk.endswith(RECEIPT):
                    receipts.add(sk.removesuffix(RECEIPT))
                else:
                    sent[sk] = item
            if "LastEvaluatedKey" not in page:
                break
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [
            Transfer(tid, str(i[SOURCE]), str(i[TARGET]), int(i[QUANTITY]), str(i.get(REQUEST_ID, "")), tid in receipts)
            for tid, i in sorted(sent.items())
        ]

    def transfer(self, resource_id: str, transfer_id: str) -> Transfer | None:
        """The transfer ``transfer_id`` of a resource, or None."""
        item = self._get(transfer_key(resource_id, transfer_id), None)
        if item is None:
            return None
        return Transfer(transfer_id, str(item[SOURCE]), str(item[TARGET]), int(item[QUANTITY]), str(item.get(REQUEST_ID, "")))

    def mark_releasing(self, rid: str, request_id: str) -> tuple[Outcome, Record | None]:
        """MRSC release, step 1: ``CONFIRMED -> RELEASED_PENDING`` (who released it). The give-back
        follows as its own single-item write, then [`finish_release`][counters.store.resources.ResourceStore.finish_release]. Returns the record as
        it was when the condition failed."""
        update = Update(self.table_name, record_key(rid, self.region)).set_all({STATUS: Status.RELEASING, RELEASED_BY: request_id})
        report = run(self.dynamodb.update_item, update.when(Path(STATUS) == Status.CONFIRMED).params(), policy=self.retry, write=True)
        return report.outcome, Record.of(old_item(report.failure)) if report.outcome is Outcome.REJECTED else None

    def finish_release(self, rid: str, expires_in: int) -> Outcome:
        """MRSC release, step 3: ``RELEASED_PENDING -> RELEASED`` once the give-back applied."""
        now = int(time.time())
        update = Update(self.table_name, record_key(rid, self.region)).set_all(
            {STATUS: Status.RELEASED, RELEASED_AT: now, EXPIRES_AT: now + expires_in}
        )
        return run(self.dynamodb.update_item, update.when(Path(STATUS) == Status.RELEASING).params(), policy=self.retry, write=True).outcome

    def snapshot(self, keys: list[Key], capacity: Capacity) -> list[Counter]:
        """Every shard item, read in one serializable snapshot (2 RCU per item up to 4 KB); a missing
        one reads as 0/0. Cancelled when it overlaps a transaction writing those items (or
        throttled): it is a read, retried within the policy; past it, ContentionError."""
        gets = [{"Get": Get(self.table_name, key).params()} for key in keys]
        response = read(self.dynamodb.transact_get_items, self.retry, capacity, TransactItems=gets)
        return [Counter.of(from_item(r.get("Item"))) or Counter() for r in response["Responses"]]

    def write_counter(
        self, update: Update | Params, *, capacity: Capacity | None = None, on_condition: Hook | None = None, on_unknown: Hook | None = None
    ) -> Report:
        """One counter write (UpdateItem; or the params of an optimistic approach's planned write,
        which its hooks re-plan with [`Resend`][counters.core.engine.Resend]); a hook reads the item a failed condition found with [`found`][counters.store.resources.found]."""
        return run(
            self.dynamodb.update_item,
            update.params() if isinstance(update, Update) else update,
            policy=self.retry,
            capacity=capacity,
            write=True,
            on_condition=on_condition,
            on_unknown=on_unknown,
        )

    def take(self, updates: list[Update], record: Put | Update | None = None, *, token: str | None = None) -> Taken:
        """Counter writes and the record's write (a take's Put, a release's Update, a transfer's or a
        receipt's Put) in one transaction; ``token`` pins its ClientRequestToken (unset: a fresh one,
        re-sent after an unknown outcome). ``record_failed``: the record's condition failed
        (``record``: the reservation record as it was then)."""
        tx: Transaction[Action] = Transaction()
        for name, update in zip(COUNTERS, updates, strict=False):
            tx.update(name, update)
        if isinstance(record, Put):
            tx.put(Action.RECORD, record)
        elif record is not None:
            tx.update(Action.RECORD, record)
        try:
            report = run(
                self.dynamodb.transact_write_items, {"TransactItems": tx.items()}, policy=self.retry, write=True, token=token or True
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "IdempotentParameterMismatchException":
                raise
            capacity = Capacity()
            capacity.add_response(exc.response, write=True)
            return Taken(Outcome.REJECTED, capacity, 1, mismatch=True)
        taken = Taken(report.outcome, report.capacity, report.attempts, report.unknown_seen)
        if report.outcome is Outcome.REJECTED:
            cancelled = tx.cancellation(report.failure)
            failed = [name for name in COUNTERS if cancelled.failed(name)]
            if failed:
                taken.counter = Counter.of(cancelled.old(failed[0]))
            if record is not None and cancelled.failed(Action.RECORD):
                taken.record_failed, taken.record = True, Record.of(cancelled.old(Action.RECORD))
        return taken

    def create(self, meta: Fields, counters: Sequence[tuple[Key, Fields]]) -> Outcome:
        """The resource (and its shards, or every Region's share), none overwriting an existing item,
        written as the policy writes a group ([`write_group`][counters.store.base.Store.write_group]:
        one transaction, or META first where there are none, MRSC, which refuses shards); on MREC
        only in the id's home Region ([`RESOURCE`][counters.store.resources_counters.RESOURCE]: elsewhere
        [`WrongRegion`][counters.core.errors.WrongRegion], nothing written)."""
        self.admit("create", item_id=str(meta["resourceId"]))
        tx: Transaction[Action] = Transaction()
        tx.put(Action.RESOURCE, Put(self.table_name, item=meta).when(IS_NEW))
        for name, (key, attributes) in zip(COUNTERS, counters, strict=False):
            tx.put(name, Put(self.table_name, item={**key, **attributes}).when(IS_NEW))
        return self.write_group(tx, self.policy.writes)[0].outcome

    def put_record(self, put: Put, request_id: str) -> tuple[bool, Record | None] | None:
        """Put a record unless one exists: (created by this request, the stored record); ``None``
        when the engine's budget ran out. This request's own Put (an attempt whose answer was
        lost) carries its ``requestId``, so it reads as created."""

        def exists(_report: Report, failure: Classified) -> Stop:
            stored = Record.of(old_item(failure))
            return Stop((stored is not None and stored.request_id == request_id, stored))

        report = run(self.dynamodb.put_item, put.params(), policy=self.retry, write=True, on_condition=exists)
        if report.stopped and isinstance(report.value, tuple):
            created, stored = report.value
            return bool(created), stored if isinstance(stored, Record) else None
        if report.outcome is Outcome.APPLIED:
            return True, Record.of(put.item)
        return None

    def drop_claim(self, rid: str) -> None:
        """Delete a ``PENDING`` claim (best effort: one left behind reads as UNKNOWN later)."""
        delete = Delete(self.table_name, key=record_key(rid, self.region)).when(Path(STATUS) == Status.PENDING)
        run(self.dynamodb.delete_item, delete.params(), policy=self.retry, write=True)

    def settle_claim(self, rid: str, status: Status, allocation: Mapping[str, int] | None) -> Outcome:
        """``PENDING`` -> ``status`` (with the allocation), conditioned on PENDING: a settled claim
        is never settled twice (a re-send after an unknown outcome fails harmlessly)."""
        update = Update(self.table_name, record_key(rid, self.region)).set(STATUS, status).when(Path(STATUS) == Status.PENDING)
        if allocation is not None:
            update.set(ALLOCATION, dict(allocation))
        return run(self.dynamodb.update_item, update.params(), policy=self.retry, write=True).outcome

    def release(self, rid: str, request_id: str, expires_in: int, give_backs: list[Update]) -> Taken:
        """``CONFIRMED -> RELEASED`` (who released it, and the TTL starts) with the give-back on each
        counter item, in one transaction; ``record_failed``: the record was no longer CONFIRMED
        (``record``: as it was then)."""
        now = int(time.time())
        record = Update(self.table_name, record_key(rid, self.region)).set_all(
            {STATUS: Status.RELEASED, RELEASED_AT: now, RELEASED_BY: request_id, EXPIRES_AT: now + expires_in}
        )
        return self.take(give_backs, record.when(Path(STATUS) == Status.CONFIRMED))
