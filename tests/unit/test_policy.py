"""The Region policy (counters.core.policy): capabilities resolved once per feature (refusals are the family tables', tests/unit/test_tables.py)."""

from __future__ import annotations

from counters.core.policy import IN_ORDER, ONE_REGION_POLICY, TOGETHER, RegionPolicy
from counters.core.regions import GlobalTableMode, Topology

NONE, MREC, MRSC = GlobalTableMode.NONE, GlobalTableMode.MREC, GlobalTableMode.MRSC
TWO = ("eu-west-1", "us-east-1")
THREE = ("eu-west-1", "us-east-1", "us-west-2")


def test_one_region_is_the_single_layout_with_transactions() -> None:
    policy = RegionPolicy.of(Topology())
    assert policy == ONE_REGION_POLICY
    assert (policy.writer, policy.readers, policy.stride, policy.index) == ("", ("",), 1, 0)
    assert (policy.writes, policy.escrowed, policy.others, policy.stamp, policy.stamped()) == (TOGETHER, (), (), "", {})


def test_a_single_region_table_stamps_nothing_even_with_table_regions_set_by_hand() -> None:
    policy = RegionPolicy.of(Topology(NONE, "eu-west-1", TWO))
    assert (policy.regions, policy.stamp, policy.escrowed, policy.others) == ((), "", (), ())


def test_mrec_writes_per_region_items_and_conditions_see_one_replica() -> None:
    policy = RegionPolicy.of(Topology(MREC, "us-east-1", TWO, "eu-west-1"))
    assert (policy.writer, policy.readers, policy.stride, policy.index) == ("us-east-1", TWO, 2, 1)
    assert (policy.writes, policy.escrowed, policy.others, policy.stamp) == (TOGETHER, TWO, ("eu-west-1",), "us-east-1")
    assert policy.stamped() == {"writerRegion": "us-east-1"}
    assert policy.counts_here("us-east-1") and not policy.counts_here("eu-west-1")


def test_mrsc_keeps_the_one_layout_unless_the_feature_counts_per_region() -> None:
    topology = Topology(MRSC, "us-west-2", THREE)
    shared = RegionPolicy.of(topology)
    assert (shared.writer, shared.readers, shared.stride) == ("", ("",), 1)
    assert (shared.writes, shared.escrowed, shared.others, shared.stamp) == (IN_ORDER, (), (), "us-west-2")
    assert shared.counts_here("eu-west-1") and shared.counts_here("")  # one shared item: every write counts
    per_region = RegionPolicy.of(topology, per_region_in=(MREC, MRSC))
    assert (per_region.writer, per_region.readers, per_region.stride, per_region.index) == ("us-west-2", THREE, 3, 2)
    assert (per_region.writes, per_region.escrowed, per_region.others) == (IN_ORDER, (), THREE[:2])


def test_writes_choose_and_complete_by_how_a_group_is_written() -> None:
    done: list[str] = []
    assert TOGETHER.choose(together="tx", in_order="steps") == "tx"
    assert IN_ORDER.choose(together="tx", in_order="steps") == "steps"
    TOGETHER.complete(lambda: done.append("together"))  # a transaction wrote the group: a missing item has not replicated yet
    IN_ORDER.complete(lambda: done.append("in order"))  # the writer died between its single-item writes: complete it
    assert done == ["in order"]
    assert (repr(TOGETHER), repr(IN_ORDER)) == ("Writes.TOGETHER", "Writes.IN_ORDER")
