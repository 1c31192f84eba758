"""Expiry on MRSC (no TTL): the sweeper deletes what TTL would have, and only that.

On the emulator's MRSC table (testkit/regions.py: one strongly consistent store seen from three
Regions, no TTL, injected ReplicatedWriteConflictException), built from template.yaml. Each test
would fail without :class:`~counters.primitives.expiry.ExpirySweeper`: items past ``expiresAt``
simply stay on an MRSC table.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from counters.core.failures import RetryPolicy
from counters.primitives.expiry import ExpirySweeper, SweepReport
from counters.store.expiry import CHECKPOINT_KEY, Deleted, ExpiryStore
from counters.store.items import to_item
from counters.store.operations import TTL_SECONDS, OperationRecords
from testkit.regions import GlobalTable, Mode

A, B, C = "eu-west-1", "us-east-1", "us-west-2"
FAST = RetryPolicy(max_attempts=8, base_delay=0.001, max_delay=0.005)
NOW = int(time.time())
PAST, FUTURE = NOW - 60, NOW + 3600


@pytest.fixture
def mrsc(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    gt = GlobalTable(dynamodb_endpoint, f"tally-exp-{uuid.uuid4().hex[:8]}", (A, B, C), Mode.MRSC, 7).create()
    yield gt
    gt.delete()


def plain(gt: GlobalTable) -> Any:
    """A plain client on the MRSC store, for arranging and asserting."""
    return boto3.client("dynamodb", region_name=gt.store_region, endpoint_url=gt.endpoint)


def put(gt: GlobalTable, pk: str, sk: str, **attributes: object) -> None:
    plain(gt).put_item(TableName=gt.table_name, Item=to_item({"PK": pk, "SK": sk, **attributes}))


def keys(gt: GlobalTable) -> set[tuple[str, str]]:
    return {(i["PK"], i["SK"]) for i in gt.items(A)}


def sweeper(gt: GlobalTable, region: str = A, dynamodb: Any = None, **bounds: Any) -> ExpirySweeper:
    return ExpirySweeper(gt.table_name, dynamodb=dynamodb or gt.client(region), retry=FAST, **bounds)


def arrange_families(gt: GlobalTable) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """Every family that carries ``expiresAt``, one past and one not; items without it; an expired
    item of a family the sweep must not touch. Returns (expired keys, keys that must stay)."""
    records = OperationRecords(gt.table_name, dynamodb=gt.client(B), retry=FAST)
    assert records.put_pending("op-old", "like", NOW - TTL_SECONDS - 60, None)  # the real write: expiresAt = createdAt + 7 days
    assert records.put_pending("op-new", "like", NOW, None)
    put(gt, "RSV#r-old", "RSV", status="RELEASED", expiresAt=PAST)
    put(gt, "RSV#r-new", "RSV", status="RELEASED", expiresAt=FUTURE)
    put(gt, "RSV#r-held", "RSV", status="CONFIRMED")  # no expiresAt until released
    put(gt, "ORDERKEY#k-old", "META", orderId=1, expiresAt=PAST)
    put(gt, "ORDERKEY#k-new", "META", orderId=2, expiresAt=FUTURE)
    put(gt, "POST#p#S0", "LIKE#USER#u-old", liked=False, expiresAt=PAST)  # a tombstone
    put(gt, "POST#p#S0", "LIKE#USER#u-liked", liked=True)
    put(gt, "POST#p", "META", likeTally=1)
    put(gt, "LEDGER#l", "ENTRY#0000000000001-k", amount=5, expiresAt=PAST)  # not an expiring family: never the sweep's
    expired = {("OP#op-old", "OP"), ("RSV#r-old", "RSV"), ("ORDERKEY#k-old", "META"), ("POST#p#S0", "LIKE#USER#u-old")}
    return expired, keys(gt) - expired


def test_one_sweep_deletes_every_expired_item_and_nothing_else(mrsc: GlobalTable) -> None:
    expired, staying = arrange_families(mrsc)
    report = sweeper(mrsc).sweep()
    assert keys(mrsc) - {tuple(CHECKPOINT_KEY.values())} == staying
    assert (report.deleted, report.kept, report.contended) == (len(expired), 0, 0)
    assert report.passes_completed == 1 and not report.stopped_early


def test_a_second_sweep_from_another_region_is_a_no_op(mrsc: GlobalTable) -> None:
    arrange_families(mrsc)
    sweeper(mrsc, A).sweep()
    before = mrsc.items(A)
    second = sweeper(mrsc, C).sweep()
    assert second.deleted == second.expired == 0
    after = mrsc.items(A)
    checkpoint = tuple(CHECKPOINT_KEY.values())
    assert [i for i in after if (i["PK"], i["SK"]) != checkpoint] == [i for i in before if (i["PK"], i["SK"]) != checkpoint]


class RenewBeforeDelete:
    """A client whose first DeleteItem of ``key`` is preceded by a renewal of that item (another
    request extends ``expiresAt`` between the sweep's scan and its delete)."""

    def __init__(self, inner: Any, gt: GlobalTable, key: dict[str, str]) -> None:
        self.inner, self.gt, self.key, self.renewed = inner, gt, key, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def delete_item(self, **params: Any) -> Any:
        if params["Key"] == to_item(self.key) and not self.renewed:
            self.renewed = True
            put(self.gt, self.key["PK"], self.key["SK"], status="PENDING", expiresAt=FUTURE)
        return self.inner.delete_item(**params)


def test_an_item_renewed_between_the_scan_and_the_delete_stays(mrsc: GlobalTable) -> None:
    put(mrsc, "OP#renewed", "OP", status="PENDING", expiresAt=PAST)
    put(mrsc, "OP#expired", "OP", status="PENDING", expiresAt=PAST)
    client = RenewBeforeDelete(mrsc.client(A), mrsc, {"PK": "OP#renewed", "SK": "OP"})
    report = sweeper(mrsc, dynamodb=client).sweep()
    assert client.renewed
    assert (report.expired, report.deleted, report.kept) == (2, 1, 1)
    assert mrsc.item(A, to_item({"PK": "OP#renewed", "SK": "OP"})) is not None
    assert mrsc.item(A, to_item({"PK": "OP#expired", "SK": "OP"})) is None


def test_a_tombstone_liked_again_has_no_expiry_left_and_stays() -> None:
    """The delete's condition is ``expiresAt <= now``: an item whose ``expiresAt`` was removed (a
    tombstone liked again) fails it, as does one already gone."""
    from counters.store.conditions import Placeholders
    from counters.store.expiry import still_expired

    ph = Placeholders()
    assert still_expired(NOW).render(ph) == "#expiresAt <= :v0" and ph.values == {":v0": {"N": str(NOW)}}


def test_the_bound_holds_and_each_run_resumes_where_the_last_stopped(mrsc: GlobalTable) -> None:
    expired = {(f"OP#b{i:02}", "OP") for i in range(25)}
    for pk, sk in expired:
        put(mrsc, pk, sk, status="PENDING", expiresAt=PAST)
    for i in range(5):
        put(mrsc, f"OP#keep{i}", "OP", status="PENDING", expiresAt=FUTURE)
    runs: list[SweepReport] = []
    while not runs or not runs[-1].passes_completed:
        runs.append(sweeper(mrsc, (A, B, C)[len(runs) % 3], max_items=10, page_size=7).sweep())
        assert len(runs) <= 5, [r.as_dict() for r in runs]
    assert [r.deleted for r in runs] == [10, 10, 5]
    assert all(r.deleted + r.gone + r.kept + r.contended <= 10 for r in runs)
    assert not expired & keys(mrsc)
    assert len([k for k in keys(mrsc) if k[0].startswith("OP#keep")]) == 5
    # a page budget: 2 pages of at most 3 items evaluated, whatever is left
    for pk, sk in expired:
        put(mrsc, pk, sk, status="PENDING", expiresAt=PAST)
    paged = sweeper(mrsc, max_pages=2, page_size=3).sweep()
    assert paged.pages == 2 and paged.scanned <= 6 and paged.deleted <= 6 and not paged.passes_completed


def test_concurrent_sweeps_in_three_regions_delete_each_item_once(mrsc: GlobalTable) -> None:
    expired = {(f"OP#c{i:03}", "OP") for i in range(60)}
    for pk, sk in expired:
        put(mrsc, pk, sk, status="PENDING", expiresAt=PAST)
    reports: list[SweepReport] = []
    errors: list[BaseException] = []

    def run(region: str) -> None:
        try:
            sweep = sweeper(mrsc, region, max_items=15, page_size=10)
            while True:
                report = sweep.sweep()
                reports.append(report)
                if report.passes_completed or not report.pages:
                    return
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in (A, B, C)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    leftover = sweeper(mrsc, A).sweep()  # whatever a contended delete left, the next run takes
    assert not expired & keys(mrsc)
    assert sum(r.deleted for r in [*reports, leftover]) == len(expired)  # each conditional delete applied once


def test_a_delete_whose_answer_was_lost_counts_as_deleted(mrsc: GlobalTable) -> None:
    """After an unknown outcome the retry finds the item gone: this sweep's own delete (no other ran)."""
    from testkit.faults import FaultInjector

    put(mrsc, "OP#lost", "OP", status="PENDING", expiresAt=PAST)
    client = mrsc.client(A)
    injector = FaultInjector(client, seed=3)
    try:
        injector.add("after_commit", operations={"DeleteItem"}, limit=1)
        done = ExpiryStore(mrsc.table_name, dynamodb=client, retry=FAST).delete_expired({"PK": "OP#lost", "SK": "OP"}, NOW)
    finally:
        injector.detach()
    assert done is Deleted.DELETED
    assert mrsc.item(A, to_item({"PK": "OP#lost", "SK": "OP"})) is None


class MoveCheckpointFirst:
    """A client on which another sweep advances the checkpoint just before this one's first advance."""

    def __init__(self, inner: Any, gt: GlobalTable, cursor: dict[str, str]) -> None:
        self.inner, self.gt, self.cursor, self.moved = inner, gt, cursor, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update_item(self, **params: Any) -> Any:
        if not self.moved:
            self.moved = True
            put(self.gt, CHECKPOINT_KEY["PK"], CHECKPOINT_KEY["SK"], rev=1, cursorPK=self.cursor["PK"], cursorSK=self.cursor["SK"])
        return self.inner.update_item(**params)


def test_a_sweep_whose_checkpoint_advance_loses_a_race_continues_from_the_winners_checkpoint(mrsc: GlobalTable) -> None:
    for i in range(6):
        put(mrsc, f"OP#r{i}", "OP", status="PENDING", expiresAt=PAST)
    order = [(i["PK"], i["SK"]) for i in plain(mrsc).scan(TableName=mrsc.table_name)["Items"]]
    winner = {"PK": order[-1][0]["S"], "SK": order[-1][1]["S"]}  # the other sweep got to the table's last item
    client = MoveCheckpointFirst(mrsc.client(A), mrsc, winner)
    report = sweeper(mrsc, dynamodb=client, page_size=2).sweep()
    assert report.lost_races == 1
    assert report.pages == 2  # its own first page, then the winner's end of the table: the pass ends there
    assert report.passes_completed == 1
    assert ExpiryStore(mrsc.table_name, dynamodb=mrsc.client(B), retry=FAST).checkpoint().rev == 2


class FullTime:
    """A Lambda context whose remaining time never runs low (the run is bounded by its items and pages)."""

    function_name, memory_limit_in_mb, invoked_function_arn, aws_request_id = "ExpirySweeperFunction", 512, "arn", "req"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def test_the_scheduled_function_sweeps_with_the_templates_settings(load_function: Any, mrsc: GlobalTable) -> None:
    """ExpirySweeperFunction as the template configures it on an mrsc stack, on the emulator's MRSC
    table (a table with TTL on would race DynamoDB Local's own TTL deletes), invoked with its schedule's event."""
    params = {"GlobalTableMode": "mrsc", "GlobalTableName": mrsc.table_name, "ReplicaRegions": f"{B},{A},{C}", "HomeRegion": B}
    module = load_function("ExpirySweeperFunction", mrsc.table_name, params=params)
    settings = module.function.settings
    assert (settings.table_name, settings.expiry_max_items, settings.expiry_max_pages) == (mrsc.table_name, 1000, 100)
    put(mrsc, "OP#gone", "OP", status="PENDING", expiresAt=PAST)
    put(mrsc, "OP#stays", "OP", status="PENDING", expiresAt=FUTURE)
    with mrsc.layer(B):  # the function's process-wide client is this Region's
        summary = module.lambda_handler({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}, FullTime())
    assert (summary["deleted"], summary["passesCompleted"], summary["stoppedEarly"]) == (1, 1, False)
    assert keys(mrsc) == {("OP#stays", "OP"), tuple(CHECKPOINT_KEY.values())}
