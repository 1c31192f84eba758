"""The Regions bench's pure parts: percentiles, convergence timing (on a fake emulator), item sizes and
the cost model of a write per global-table mode (bench/regions_model.py, bench/regions.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

import bench  # noqa: F401 - puts the repository and the layer on sys.path
from bench import regions
from bench.regions_model import ItemWrite, expiry_units, item_size, model_units, percentile, ratio, sweep_read_units, write_units
from counters.core.regions import GlobalTableMode


# -- percentiles ------------------------------------------------------------------------------------
def test_percentile_is_nearest_rank() -> None:
    assert percentile([4, 1, 3, 2], 50) == 2
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile(list(range(1, 101)), 100) == 100
    assert percentile([7.5], 99) == 7.5
    assert percentile([1, 2, 3], 1) == 1


def test_percentile_refuses_nothing_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
    with pytest.raises(ValueError, match="percentile"):
        percentile([1], 0)


# -- convergence timing on a fake emulator ------------------------------------------------------------
@dataclass
class Clock:
    t: float = 0.0

    def now(self) -> float:
        return self.t


@dataclass
class FakeGT:
    """Each Region reads ``value[r]`` until simulated time reaches ``due[r]``, then ``final``."""

    due: dict[str, float]
    before: int
    final: int
    clock: Clock = field(default_factory=Clock)
    advanced: list[float] = field(default_factory=list)
    settled: int = 0

    def read(self, region: str) -> int:
        return self.final if self.clock.t >= self.due[region] else self.before

    def advance(self, seconds: float) -> None:
        self.advanced.append(seconds)
        self.clock.t += seconds

    def converged(self) -> bool:
        return all(self.clock.t >= d for d in self.due.values())

    def settle(self) -> float:
        self.settled += 1
        last = max(self.due.values())
        taken = max(0.0, last - self.clock.t)
        self.clock.t += taken
        return taken

    def client(self, region: str) -> Any:  # the Protocol's other members, unused here
        raise NotImplementedError

    def pump(self) -> None: ...
    def partition(self, a: str, b: str) -> None: ...
    def heal(self) -> None: ...


def test_time_to_exact_measures_from_the_heal_within_the_resolution() -> None:
    gt = FakeGT(due={"a": 0.0, "b": 30.0}, before=5, final=9)
    gt.clock.t = 1000.0  # the heal happens at simulated 1000 s: the sample counts from there
    gt.due = {"a": 1000.0, "b": 1030.0}
    sample = regions.time_to_exact(gt, gt.read, 9, ("a", "b"), seed=3)
    assert sample.exact and sample.seed == 3 and sample.lost == 0
    assert 30.0 <= sample.sim_seconds <= 30.0 * (1 + regions.RESOLUTION) + regions.MIN_STEP
    assert gt.advanced[0] == regions.MIN_STEP  # small steps first
    assert max(gt.advanced) <= regions.RESOLUTION * 30.0 + regions.MIN_STEP
    assert gt.settled == 0  # stepped to the value, not settled early (a settle jumps to the last delivery)


def test_time_to_exact_is_zero_when_already_exact() -> None:
    gt = FakeGT(due={"a": 0.0, "b": 0.0}, before=0, final=4)
    sample = regions.time_to_exact(gt, gt.read, 4, ("a", "b"), seed=0)
    assert sample.exact and sample.sim_seconds == 0.0 and gt.advanced == []


def test_time_to_exact_reports_lost_updates_when_regions_agree_on_a_wrong_value() -> None:
    gt = FakeGT(due={"a": 0.0, "b": 2.0}, before=3, final=8)  # both Regions end at 8: 2 acknowledged updates lost
    sample = regions.time_to_exact(gt, gt.read, 10, ("a", "b"), seed=1)
    assert not sample.exact
    assert sample.lost == 2
    assert gt.settled == 1


def test_summarize_takes_percentiles_over_exact_samples_only() -> None:
    samples = [regions.Sample(i, True, float(i), 10.0 * i) for i in range(1, 101)]
    samples += [regions.Sample(200, False, 5.0, 1.0, lost=3), regions.Sample(201, False, 5.0, 1.0, lost=1)]
    subject = regions.SUBJECTS[0]
    s = regions.summarize(subject, samples)
    assert (s.samples, s.exact) == (102, 100)
    assert s.sim == (50.0, 99.0)
    assert s.wall == (500.0, 990.0)
    assert s.lost == (2.0, 3)
    lines = regions.convergence_table([s], regions.Plan.quick())
    assert any("100 / 102" in line and "50.00 / 99.00" in line and "2.0 / 3" in line for line in lines)


def test_summarize_with_no_exact_sample_prints_no_percentile() -> None:
    s = regions.summarize(regions.SUBJECTS[2], [regions.Sample(0, False, 1.0, 1.0, lost=4)])
    assert s.sim is None and s.wall is None and s.lost == (4.0, 4)


# -- item sizes (DynamoDB item sizes and formats) -----------------------------------------------------
def test_item_size_follows_the_aws_rules() -> None:
    assert item_size({"PK": {"S": "POST#1"}}) == 2 + 6
    assert item_size({"n": {"N": "100"}}) == 1 + 2  # trailing zeros trimmed: 1 digit -> 1 byte + 1
    assert item_size({"n": {"N": "-12345"}}) == 1 + 4  # 5 digits -> 3 bytes + 1
    assert item_size({"n": {"N": "0.0012"}}) == 1 + 2
    assert item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 2 + 2
    assert item_size({"m": {"M": {"a": {"N": "1"}}}}) == 1 + 3 + (1 + 1 + 2)
    assert item_size({"l": {"L": [{"S": "xy"}, {"S": ""}]}}) == 1 + 3 + (1 + 2) + (1 + 0)
    assert item_size({"é": {"S": "é"}}) == 4  # UTF-8 bytes, not characters


def test_write_units_round_up_per_kb_and_double_for_transactions() -> None:
    assert write_units(1) == 1
    assert write_units(1024) == 1
    assert write_units(1025) == 2
    assert write_units(0) == 1
    assert write_units(3000, transactional=True) == 6


def test_replicated_units_size_the_new_image_or_the_deleted_one() -> None:
    big = {"PK": {"S": "x"}, "blob": {"S": "y" * 2000}}
    assert regions.replicated_units({"dynamodb": {"NewImage": big}}) == 2
    assert regions.replicated_units({"dynamodb": {"OldImage": {"PK": {"S": "x"}}, "Keys": {"PK": {"S": "x"}}}}) == 1


# -- the cost model -----------------------------------------------------------------------------------
STANDARD_LIKE = (ItemWrite("like state", transactional=True), ItemWrite("tally", transactional=True))


def test_model_single_region_is_the_local_write() -> None:
    assert model_units(STANDARD_LIKE, GlobalTableMode.NONE) == 4
    assert model_units((ItemWrite("capacity"),), GlobalTableMode.NONE) == 1


def test_model_adds_one_replicated_write_per_item_in_every_other_region() -> None:
    assert model_units((ItemWrite("capacity"),), GlobalTableMode.MREC) == 2
    assert model_units((ItemWrite("capacity"),), GlobalTableMode.MREC, replicas=3) == 3
    assert model_units(STANDARD_LIKE, GlobalTableMode.MREC) == 4 + 2  # the replica applies each item as a standard write
    assert model_units((ItemWrite("entry", kb=3),), GlobalTableMode.MREC) == 6


def test_model_mrsc_has_three_replicas_and_no_transactions() -> None:
    assert model_units((ItemWrite("capacity"),), GlobalTableMode.MRSC) == 3
    assert model_units((ItemWrite("capacity"),), GlobalTableMode.MRSC, replicas=2) == 2  # 2 replicas + a witness
    assert model_units(STANDARD_LIKE, GlobalTableMode.MRSC) is None


def test_model_counts_each_expiry_as_a_write_free_only_by_ttl_in_one_region() -> None:
    """MRSC has no TTL: the sweeper's DeleteItem is a write in its Region and each replica; on MREC a
    TTL delete is free where it happens and billed where it is replicated; one Region: free."""
    key = (ItemWrite("order"), ItemWrite("key record", expires=True))
    assert expiry_units(key, GlobalTableMode.NONE) == 0
    assert expiry_units(key, GlobalTableMode.MREC) == 1
    assert expiry_units(key, GlobalTableMode.MRSC) == 3
    assert expiry_units(key, GlobalTableMode.MRSC, replicas=2) == 2  # 2 replicas + a witness
    assert expiry_units((ItemWrite("record", kb=2, expires=True),), GlobalTableMode.MRSC) == 6
    assert expiry_units((ItemWrite("order"),), GlobalTableMode.MRSC) == 0


def test_sweep_reads_half_a_unit_per_4_kb_scanned() -> None:
    assert sweep_read_units(1) == 0.5
    assert sweep_read_units(4 * 1024) == 0.5
    assert sweep_read_units(1024 * 1024) == 128  # a full 1 MB page


def test_model_amortizes_batched_writes() -> None:
    hot = (ItemWrite("like state"), ItemWrite("tally", per=1 / 500))
    assert model_units(hot, GlobalTableMode.NONE) == pytest.approx(1.002)
    assert model_units(hot, GlobalTableMode.MREC) == pytest.approx(2.004)


def test_ratio_against_single_region() -> None:
    assert ratio(6.0, 4.0) == "1.50x"
    assert ratio(None, 4.0) == "-"
    assert ratio(3.0, None) == "-"


def test_every_bench_operation_has_a_model_in_every_mode_or_is_refused_on_mrsc_only() -> None:
    for op in regions.OPERATIONS:
        assert model_units(op.model_for(GlobalTableMode.NONE), GlobalTableMode.NONE) is not None
        assert model_units(op.model_for(GlobalTableMode.MREC), GlobalTableMode.MREC) is not None
    refused = {op.name for op in regions.OPERATIONS if model_units(op.model_for(GlobalTableMode.MRSC), GlobalTableMode.MRSC) is None}
    assert refused == {"like (standard)", "reservation (crt)"}
    orders = next(op for op in regions.OPERATIONS if op.name == "order (fast)")
    assert model_units(orders.model_for(GlobalTableMode.MRSC), GlobalTableMode.MRSC) == 9  # 3 single-item writes x 3 replicas
    assert expiry_units(orders.model_for(GlobalTableMode.MRSC), GlobalTableMode.MRSC) == 3  # its key record, swept after 24 h


# -- metering and the tables ----------------------------------------------------------------------------
class FakeClient:
    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []

    def update_item(self, **params: Any) -> dict[str, Any]:
        self.params.append(params)
        return {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0, "WriteCapacityUnits": 1.0}}

    def transact_write_items(self, **params: Any) -> dict[str, Any]:
        self.params.append(params)
        return {"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}]}

    def get_item(self, **params: Any) -> dict[str, Any]:
        return {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0, "ReadCapacityUnits": 1.0}}


def test_metered_asks_for_capacity_and_counts_writes_only() -> None:
    inner = FakeClient()
    metered = regions.Metered(inner)
    metered.update_item(TableName="t")
    metered.transact_write_items(TransactItems=[])
    metered.get_item(TableName="t")
    assert metered.write_units == 5.0
    assert all(p["ReturnConsumedCapacity"] == "TOTAL" for p in inner.params)


def test_wcu_table_ratios_against_the_none_row() -> None:
    rows = [
        regions.WcuRow("op", GlobalTableMode.NONE, regions.Measured(local=1.0), 1.0),
        regions.WcuRow("op", GlobalTableMode.MREC, regions.Measured(local=1.0, replicated=1.0), 2.0, 1.0),
        regions.WcuRow("op", GlobalTableMode.MRSC, regions.Measured(refused="refused: X"), None),
    ]
    lines = regions.wcu_table(rows, regions.Plan.quick())
    assert "| op | mrec | 1.00 | 1.00 | 2.00 | 2.00x | 2.00 | 2.00x | 1.00 |" in lines
    assert "| op | mrsc | refused: X | - | - | - | refused | - | - |" in lines


def test_transfer_table_without_the_reservations_helper_says_not_available() -> None:
    assert regions.transfer_table(None)[-1].startswith("not available")
    lines = regions.transfer_table(
        {"poll_step_seconds": 0.05, "wall_ms": {"p50": 3.0}, "samples": 5, "sim_seconds": {"p50": 1.5, "p99": 9.25}}
    )
    assert lines[-3] == "| samples | sim_seconds p50 | sim_seconds p99 | wall_ms p50 | poll_step_seconds |"
    assert lines[-1] == "| 5 | 1.50 | 9.25 | 3.00 | 0.05 |"


def test_a_refusal_is_told_apart_from_a_failure() -> None:
    from botocore.exceptions import ClientError

    def client_error(code: str, message: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": message}}, "TransactWriteItems")

    mrsc = client_error("ValidationException", "Transactions are not supported for global tables with multi-Region strong consistency")
    assert regions.describe_failure(mrsc) == "refused (no transactions on MRSC)"
    assert (
        regions.describe_failure(client_error("ValidationException", "Supplied AttributeValue is empty")) == "failed (ValidationException)"
    )
    assert regions.describe_failure(RuntimeError("boom")) == "failed (RuntimeError)"
