"""Ledgers against DynamoDB Local: idempotent appends, exact balances, races with compaction."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.primitives.ledger import Ledger, ledger_pk, new_key
from counters.services.ledgers import Ledgers
from tests.conftest import api_event, invoke, item_count

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
WINDOW, MARGIN = 60.0, 30.0  # seconds (fake clock)
T0 = 1_800_000_000.0


class Clock:
    """A fake wall clock, shared by appender and compactor (tests move it by hand)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(table: str, layer_client: Any, clock: Clock) -> Ledger:
    return Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)


def key_at(clock: Clock, offset: float = 0.0) -> str:
    return new_key(clock.now + offset)


def entries_stored(ddb: Any, table: str, ledger_id: str = "l1") -> int:
    return item_count(ddb, table, ledger_pk(ledger_id), "ENTRY#")


def past_cutoff(clock: Clock) -> None:
    clock.advance(WINDOW + MARGIN + 5)


def fill(ledger: Ledger, clock: Clock, amounts: list[int], ledger_id: str = "l1") -> list[str]:
    keys = []
    for i, amount in enumerate(amounts):
        key = key_at(clock, i * 0.001)
        assert ledger.append(ledger_id, amount, key).outcome is Outcome.APPLIED
        keys.append(key)
    return keys


# ---------------------------------------------------------------------------- behaviour
def test_append_is_idempotent_and_keys_are_checked(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    key = key_at(clock)
    first = ledger.append("l1", 5, key)
    assert first.outcome is Outcome.APPLIED and first.capacity.write_units > 0
    again = ledger.append("l1", 5, key)
    assert again.outcome is Outcome.DUPLICATE and again.value == first.value
    assert ledger.append("l1", 6, key).reason == "key_reused"
    assert ledger.append("l2", 6, key).outcome is Outcome.APPLIED  # keys are per ledger
    uuid7 = f"{int(clock.now * 1000):012x}"
    uuid7 = f"{uuid7[:8]}-{uuid7[8:]}-7abc-8def-{uuid.uuid4().hex[:12]}"
    assert ledger.append("l1", -2, uuid7).outcome is Outcome.APPLIED
    assert ledger.append("l1", 1, key_at(clock, -WINDOW - 1)).reason == "key_expired"
    for bad_amount in (0, True, 1.5, 10**16):
        with pytest.raises(Exception, match="amount"):
            ledger.append("l1", bad_amount, key_at(clock))
    for bad_key in ("", "not-a-key", str(uuid.uuid4()), new_key(clock.now + 3600)):
        with pytest.raises(Exception, match="Idempotency-Key"):
            ledger.append("l1", 1, bad_key)
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.checkpoint) == (3, 2, None)
    assert entries_stored(ddb, table) == 2


def test_compaction_merges_old_entries_in_chunks_and_balance_stays_exact(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    amounts = [(i % 7) - 3 or 4 for i in range(250)]
    fill(ledger, clock, amounts)
    clock.advance(5)
    fill(ledger, clock, [100, 200])  # young: inside the retry window at compaction time
    clock.advance(WINDOW + MARGIN - 2)
    before = ledger.balance("l1")
    assert before.balance == sum(amounts) + 300 and before.pending_entries == 252
    report = ledger.compact("l1")
    assert (report.outcome, report.merged, report.chunks, report.complete) == (Outcome.APPLIED, 250, 3, True)
    after = ledger.balance("l1")
    assert after.balance == before.balance and after.pending_entries == 2
    assert after.checkpoint["balance"] == sum(amounts) and after.checkpoint["mergedEntries"] == 250
    assert entries_stored(ddb, table) == 2
    clock.advance(10)
    assert ledger.compact("l1").merged == 2
    final = ledger.balance("l1")
    assert (final.balance, final.pending_entries, final.checkpoint["version"]) == (before.balance, 0, 4)
    assert ledger.compact("l1").merged == 0  # nothing due: no write


def test_balance_read_costs_one_read_unit_after_compaction(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    fill(ledger, clock, [1] * 1500)
    long = ledger.balance("l1")
    past_cutoff(clock)
    started = time.monotonic()
    report = ledger.compact("l1")
    seconds = time.monotonic() - started
    short = ledger.balance("l1")
    print(
        f"\nbalance read: {long.capacity.read_units} RCU with 1500 entries, {short.capacity.read_units} RCU after compaction; "
        f"compaction merged 1500 entries in {report.chunks} transactions in {seconds:.2f}s ({1500 / seconds:.0f} entries/s)"
    )
    assert long.balance == short.balance == 1500
    assert long.capacity.read_units > 20
    assert short.capacity.read_units <= 1.0 and short.capacity.calls == 1
    assert report.merged == 1500


# ---------------------------------------------------------------------------- race (a): read vs compaction
@pytest.mark.parametrize("chunks", [1, None])
def test_read_straddling_a_compaction_is_exact(ledger: Ledger, clock: Clock, table: str, layer_client: Any, chunks: int | None) -> None:
    """The reader pages through the entries; between its pages a compaction commits (one
    chunk, or all of it). Entries it saw that are now merged must not count twice, entries
    deleted before it reached them must be counted through the checkpoint it reads last."""
    amounts = [2**i for i in range(10)]
    fill(ledger, clock, amounts)
    past_cutoff(clock)
    compactor = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    fired = []

    def compact_between_pages(stage: str) -> None:
        if stage == "balance_page" and not fired:
            fired.append(compactor.compact("l1", chunk_size=6, max_chunks=chunks))

    ledger.hook = compact_between_pages
    read = ledger.balance("l1", page_size=3)
    assert fired and fired[0].merged == (6 if chunks else 10)
    assert read.ignored_entries == 3  # seen on page 1, merged before the checkpoint was read
    assert read.balance == sum(amounts)


def test_verified_read_reads_again_when_a_compaction_commits_after_its_query(ledger: Ledger, clock: Clock, table: str) -> None:
    fill(ledger, clock, [1, 2, 4])
    past_cutoff(clock)
    compactor = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    fired = []

    def compact_before_the_confirming_read(stage: str) -> None:
        if stage == "balance_verify" and not fired:
            fired.append(compactor.compact("l1"))

    ledger.hook = compact_before_the_confirming_read
    read = ledger.balance("l1", verify=True)
    assert fired[0].merged == 3
    assert (read.balance, read.pending_entries, read.checkpoint["version"]) == (7, 0, 1)
    assert read.capacity.calls == 4  # Query + GetItem (version moved), Query + GetItem (confirmed)
    assert ledger.balance("l1", verify=True).capacity.read_units <= 2.0


# ---------------------------------------------------------------------------- race (b): retry after merge
def test_retry_after_its_entry_was_merged_is_refused_not_recounted(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    key = fill(ledger, clock, [7])[0]
    past_cutoff(clock)
    assert ledger.compact("l1").merged == 1
    assert entries_stored(ddb, table) == 0
    retry = ledger.append("l1", 7, key)  # the client's late retry of the same request
    assert (retry.outcome, retry.reason) == (Outcome.REJECTED, "key_expired")
    assert ledger.balance("l1").balance == 7 and entries_stored(ddb, table) == 0


def test_compaction_keeps_entries_inside_the_retry_window(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    key = fill(ledger, clock, [7])[0]
    clock.advance(WINDOW - 1)  # the key can still be retried...
    assert ledger.compact("l1").merged == 0  # ...so its entry must stay to catch the retry
    assert ledger.append("l1", 7, key).outcome is Outcome.DUPLICATE
    assert ledger.balance("l1").balance == 7 and entries_stored(ddb, table) == 1


def test_a_late_write_behind_the_checkpoint_is_never_counted_twice(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    """If an append beat the margin (its Put landed after its entry was merged), the reader's
    mergedThrough rule still refuses to count it a second time."""
    key = fill(ledger, clock, [7])[0]
    past_cutoff(clock)
    assert ledger.compact("l1").merged == 1
    late = Ledger(table, retry=FAST, retry_window=10 * WINDOW, margin=MARGIN, clock=clock)  # a host whose check passed
    assert late.append("l1", 7, key).outcome is Outcome.APPLIED
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.ignored_entries) == (7, 0, 1)


# ---------------------------------------------------------------------------- race (d): a Put executed past the margin
def withdrawn_records(ddb: Any, table: str, ledger_id: str = "l1") -> int:
    return item_count(ddb, table, ledger_pk(ledger_id), "WITHDRAWN#")


def test_a_put_landing_behind_a_compaction_is_refused_never_acknowledged(ledger_app: Any, clock: Clock, ddb: Any, table: str) -> None:
    """The appender checked its key (fresh), then its Put was delayed past window + margin
    while a compaction merged a later entry: the Put lands at or below ``mergedThrough``,
    where the balance ignores it. The client must not get a 201 for it: the stray entry is
    withdrawn and the request refused (422), and the balance is what was acknowledged."""
    later = key_at(clock, 1.0)
    assert post(ledger_app, 100, later)[0] == 201
    compactor = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    fired: list[Any] = []

    def delay_the_put_past_the_margin(stage: str) -> None:
        if stage == "put_sending" and not fired:
            clock.advance(WINDOW + MARGIN + 5)  # the request stalls between its check and its Put
            fired.append(compactor.compact("l1"))

    ledger_app.function.service.ledger.hook = delay_the_put_past_the_margin
    status, body = post(ledger_app, 7, key_at(clock))
    assert fired and fired[0].merged == 1  # the later entry: mergedThrough is now past our key
    assert (status, body["error"]) == (422, "idempotency_key_expired")  # never a 201
    read = ledger_app.function.service.balance("l1")
    assert (read.balance, read.pending_entries, read.ignored_entries) == (100, 0, 0)
    assert entries_stored(ddb, table) == 0 and withdrawn_records(ddb, table) == 1  # the stray is gone


def test_a_slow_append_whose_entry_was_merged_after_it_landed_is_acknowledged(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    """Same stall, but after the Put: the entry landed first, so the compaction merged it
    (it is counted). The slow path must find that out and acknowledge, not refuse."""
    compactor = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    fired: list[Any] = []

    def compact_after_the_put(stage: str) -> None:
        if stage == "entry_written" and not fired:
            clock.advance(WINDOW + MARGIN + 5)
            fired.append(compactor.compact("l1"))

    service = Ledgers(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    service.ledger.hook = compact_after_the_put
    entry_id, created, result = service.post_entry("l1", 7, key_at(clock))
    assert fired and fired[0].merged == 1
    assert created and result.outcome is Outcome.APPLIED
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.checkpoint["mergedEntries"]) == (7, 0, 1)
    assert entries_stored(ddb, table) == 0 and withdrawn_records(ddb, table) == 0


def test_a_compaction_that_queried_before_a_slow_put_cannot_commit_past_it(ledger: Ledger, clock: Clock, table: str) -> None:
    """The compactor read the entries (ours not written yet), then the slow append wrote its
    entry, checked the checkpoint (still below its key) and was acknowledged; only then does
    the compactor commit a chunk ending at a later entry. A read of the checkpoint alone
    would have acknowledged a write the commit then strands below ``mergedThrough``."""
    later = key_at(clock, 1.0)
    assert ledger.append("l1", 100, later).outcome is Outcome.APPLIED
    mine = key_at(clock)
    clock.advance(WINDOW + MARGIN + 5)
    # the appender's clock is 40 s behind the compactor's (inside clock_skew): its key is still fresh
    appender = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=lambda: clock.now - MARGIN - 10)
    answers: list[Any] = []

    def append_between_query_and_commit(stage: str) -> None:
        if stage == "entries_read" and not answers:
            answers.append(appender.append("l1", 7, mine))

    ledger.hook = append_between_query_and_commit
    report = ledger.compact("l1")
    assert answers and answers[0].outcome is Outcome.APPLIED  # acknowledged: so it must be counted
    assert (report.merged, report.lost_races) == (2, 1)  # the commit was refused; the re-read merged both
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.ignored_entries) == (107, 0, 0)


@pytest.mark.parametrize("fate", ["stray", "merged"])
def test_a_duplicate_of_a_slow_append_is_acknowledged_only_if_the_entry_was_counted(
    ledger: Ledger, clock: Clock, ddb: Any, table: str, fate: str
) -> None:
    """Request A wrote the entry; request B (same key) found it. If A's entry is stranded
    below ``mergedThrough`` (A will withdraw it), B must not answer 200 for it; if it was
    merged, B's 200 is true."""
    assert ledger.append("l1", 100, key_at(clock, 1.0)).outcome is Outcome.APPLIED
    key = key_at(clock)
    compactor = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    b = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    answers: list[Any] = []

    def stall(stage: str) -> None:
        if fate == "stray" and stage == "put_sending" and not answers:
            clock.advance(WINDOW + MARGIN + 5)
            assert compactor.compact("l1").merged == 1  # the later entry only: A's Put lands behind it
            answers.append(None)
        if stage == "entry_written" and len(answers) < 2:
            answers.append(b.append("l1", 7, key))  # B arrives before A has looked at the checkpoint

    def merge_before_b_checks(stage: str) -> None:
        if stage == "entry_written" and not answers:
            clock.advance(WINDOW + MARGIN + 5)
            answers.append(compactor.compact("l1"))

    if fate == "stray":
        ledger.hook = stall
        a = ledger.append("l1", 7, key)
        duplicate = answers[1]
        assert (a.outcome, a.reason) == (Outcome.REJECTED, "key_expired")
        assert (duplicate.outcome, duplicate.reason) == (Outcome.REJECTED, "key_expired")
        assert ledger.balance("l1").balance == 100 and entries_stored(ddb, table) == 0
    else:
        a = ledger.append("l1", 7, key)  # well inside the window
        assert a.outcome is Outcome.APPLIED
        b.hook = merge_before_b_checks
        duplicate = b.append("l1", 7, key)
        assert answers[0].merged == 2
        assert duplicate.outcome is Outcome.DUPLICATE
        assert ledger.balance("l1").balance == 107


# ---------------------------------------------------------------------------- race (c): compactors
@pytest.mark.parametrize("first_compaction", [True, False])
def test_two_compactors_interleaved_never_lose_a_merge(ledger: Ledger, clock: Clock, table: str, first_compaction: bool) -> None:
    """B reads the checkpoint, then A merges a chunk, then B merges what is left on top of
    the checkpoint it read. B's checkpoint update is conditioned on the version it read
    (or, for the very first compaction, on there being no checkpoint yet)."""
    amounts = [1, 2, 4, 8, 16, 32]
    if not first_compaction:
        fill(ledger, clock, [64, 128])
        past_cutoff(clock)
        assert ledger.compact("l1").merged == 2
        amounts += [64, 128]
    fill(ledger, clock, amounts[:6])
    past_cutoff(clock)
    a = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    b = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock)
    state = {"a": None}

    def a_runs_while_b_is_paused(stage: str) -> None:
        if stage == "snapshot_read" and state["a"] is None:
            state["a"] = a.compact("l1", chunk_size=3, max_chunks=1)

    b.hook = a_runs_while_b_is_paused
    report_b = b.compact("l1", chunk_size=3)
    assert state["a"].merged == 3 and report_b.merged == 3 and report_b.lost_races == 1
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.checkpoint["mergedEntries"]) == (sum(amounts), 0, len(amounts))


def test_concurrent_compactors_threads(ledger: Ledger, clock: Clock, table: str, ddb: Any) -> None:
    amounts = list(range(1, 301))
    fill(ledger, clock, amounts)
    past_cutoff(clock)
    reports = []

    def run() -> None:
        reports.append(
            Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=clock).compact("l1", chunk_size=25, max_lost_races=100)
        )

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.merged for r in reports) == 300
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.checkpoint["mergedEntries"]) == (sum(amounts), 0, 300)
    assert entries_stored(ddb, table) == 0


def test_a_compactor_with_an_older_cutoff_finds_nothing_to_do(ledger: Ledger, clock: Clock, table: str) -> None:
    """A compactor whose clock is behind (or that started earlier) re-reads a checkpoint
    merged past its own cutoff: nothing is due for it, and it must say so, not fail."""
    fill(ledger, clock, [1, 2, 3])
    clock.advance(10)
    fill(ledger, clock, [4])
    past_cutoff(clock)
    behind = Ledger(table, retry=FAST, retry_window=WINDOW, margin=MARGIN, clock=lambda: clock.now - 8)
    assert ledger.compact("l1").merged == 4
    report = behind.compact("l1")
    assert (report.outcome, report.merged, report.complete) == (Outcome.APPLIED, 0, True)
    assert ledger.balance("l1").balance == 10


def test_an_entry_removed_mid_compaction_is_not_merged(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    """Every Delete is conditioned on the entry existing: an entry removed between the
    compactor's Query and its commit cancels the chunk instead of being merged anyway."""
    fill(ledger, clock, [1, 2, 4, 8])
    past_cutoff(clock)
    victim = ddb.query(
        TableName=table,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :e)",
        ExpressionAttributeValues={":pk": {"S": "LEDGER#l1"}, ":e": {"S": "ENTRY#"}},
        ConsistentRead=True,
    )["Items"][1]
    assert victim["amount"]["N"] == "2"

    def remove(stage: str) -> None:
        if stage == "entries_read" and ledger.hook is remove:
            ledger.hook = None
            ddb.delete_item(TableName=table, Key={"PK": victim["PK"], "SK": victim["SK"]})

    ledger.hook = remove
    before = 13  # what a read shows once the entry is gone
    report = ledger.compact("l1")
    assert report.lost_races == 1 and report.merged == 3
    assert ledger.balance("l1").balance == before


def test_a_compactor_crashing_mid_way_leaves_an_exact_ledger_and_the_next_run_finishes(
    ledger: Ledger, clock: Clock, ddb: Any, table: str
) -> None:
    amounts = list(range(1, 51))
    fill(ledger, clock, amounts)
    past_cutoff(clock)

    def crash(stage: str) -> None:
        if stage == "chunk_committed":
            raise RuntimeError("compactor killed after its first chunk")

    ledger.hook = crash
    with pytest.raises(RuntimeError):
        ledger.compact("l1", chunk_size=20)
    ledger.hook = None
    mid = ledger.balance("l1")
    assert (mid.balance, mid.pending_entries, mid.checkpoint["mergedEntries"]) == (sum(amounts), 30, 20)
    report = ledger.compact("l1", chunk_size=20)
    assert report.merged == 30 and report.complete
    final = ledger.balance("l1")
    assert (final.balance, final.pending_entries) == (sum(amounts), 0)
    assert entries_stored(ddb, table) == 0


def test_compaction_under_after_commit_errors_and_conflicts_is_exact(
    ledger: Ledger, clock: Clock, faults: Any, ddb: Any, table: str
) -> None:
    amounts = list(range(1, 201))
    fill(ledger, clock, amounts)
    past_cutoff(clock)
    faults.add("after_commit", operations={"TransactWriteItems"}, rate=0.5)
    faults.add("conflict", operations={"TransactWriteItems"}, rate=0.3)
    reports = [ledger.compact("l1", chunk_size=10) for _ in range(10)]
    assert faults.injected["after_commit"] > 0 and faults.injected["conflict"] > 0
    faults.clear()
    assert ledger.compact("l1").complete
    assert sum(r.merged for r in reports) <= 200
    read = ledger.balance("l1")
    assert (read.balance, read.pending_entries, read.checkpoint["mergedEntries"]) == (sum(amounts), 0, 200)


# ---------------------------------------------------------------------------- appends under faults
def test_append_after_commit_error_is_applied_once(ledger: Ledger, clock: Clock, faults: Any, ddb: Any, table: str) -> None:
    key = key_at(clock)
    faults.add("after_commit", operations={"PutItem"}, limit=2)  # the marker's and the entry's answers are lost
    result = ledger.append("l1", 9, key)
    assert result.outcome is Outcome.APPLIED and faults.injected["after_commit"] == 2
    assert ledger.append("l1", 9, key).outcome is Outcome.DUPLICATE
    faults.add("unavailable", operations={"PutItem"}, limit=FAST.max_attempts)
    key2 = key_at(clock, 0.001)
    gave_up = ledger.append("l1", 4, key2)  # every attempt answered 500: contention, safe to re-drive
    assert gave_up.outcome is Outcome.CONTENTION
    assert ledger.append("l1", 4, key2).outcome is Outcome.APPLIED  # the client re-sends the same key
    assert ledger.balance("l1").balance == 13
    assert entries_stored(ddb, table) == 2


# ---------------------------------------------------------------------------- scheduled compaction, regions
def test_scheduled_compaction_finds_dirty_ledgers_without_a_scan(ledger: Ledger, clock: Clock, ddb: Any, table: str) -> None:
    for ledger_id in ("a", "b", "c"):
        fill(ledger, clock, [1, 2, 3], ledger_id)
    assert item_count(ddb, table, "LEDGERS#DIRTY") == 3  # one marker per ledger and time bucket
    clock.advance(1)
    assert ledger.compact_due().ledgers == []  # nothing due yet
    clock.advance(WINDOW + MARGIN + ledger.marker_bucket_ms / 1000)
    fill(ledger, clock, [100], "a")  # young entry: stays pending, its marker stays
    report = ledger.compact_due()
    assert sorted(r.ledger_id for r in report.ledgers) == ["a", "b", "c"]
    assert sum(r.merged for r in report.ledgers) == 9 and report.markers_cleared == 3
    assert item_count(ddb, table, "LEDGERS#DIRTY") == 1
    assert [ledger.balance(x).balance for x in "abc"] == [106, 6, 6]


# ---------------------------------------------------------------------------- handlers
@pytest.fixture
def ledger_app(load_function: Any, table: str, layer_client: Any, clock: Clock) -> Any:
    return load_function(
        "LedgerFunction", table, build=lambda s: Ledgers(table, retry=FAST, clock=clock, retry_window=WINDOW, margin=MARGIN)
    )


@pytest.fixture
def compaction_app(load_function: Any, table: str, layer_client: Any, clock: Clock) -> Any:
    return load_function(
        "LedgerCompactionFunction",
        table,
        build=lambda s: Ledgers(table, retry=FAST, clock=clock, retry_window=WINDOW, margin=MARGIN),
    )


def post(app: Any, amount: Any, key: str | None, ledger_id: str = "l1") -> tuple[int, Any]:
    headers = {"Idempotency-Key": key} if key else {}
    return invoke(app, api_event("POST", f"/ledgers/{ledger_id}/entries", {"amount": amount}, headers))


def test_http_routes(ledger_app: Any, compaction_app: Any, clock: Clock, table: str) -> None:
    key = key_at(clock)
    status, body = post(ledger_app, 5, key)
    assert status == 201 and body["entryId"].endswith(key)
    assert post(ledger_app, 5, key) == (200, body)
    assert post(ledger_app, 6, key)[1]["error"] == "idempotency_key_reused"
    assert post(ledger_app, 5, key_at(clock, -3600))[0] == 422
    assert post(ledger_app, 0, key_at(clock))[0] == 400
    assert post(ledger_app, "5", key_at(clock))[0] == 400
    assert post(ledger_app, 5, None)[0] == 400
    assert post(ledger_app, 5, "abc")[0] == 400
    assert post(ledger_app, -2, key_at(clock, 1))[0] == 201
    status, body = invoke(ledger_app, api_event("GET", "/ledgers/l1"))
    assert (status, body) == (200, {"ledgerId": "l1", "balance": 3, "pendingEntries": 2, "checkpoint": None})
    past_cutoff(clock)
    status, body = invoke(compaction_app, api_event("POST", "/ledgers/l1/compact"))
    assert status == 200 and body["merged"] == 2 and body["complete"] is True
    status, body = invoke(ledger_app, api_event("GET", "/ledgers/l1?verify=true"))
    assert body["balance"] == 3 and body["pendingEntries"] == 0 and body["checkpoint"]["version"] == 1
