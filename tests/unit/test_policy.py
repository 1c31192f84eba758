"""The Region policy (counters.core.policy): capabilities resolved once per feature, and one refusal table."""

from __future__ import annotations

import pytest

from counters.core.errors import UnsupportedInMode
from counters.core.policy import IN_ORDER, ONE_REGION_POLICY, REFUSALS, TOGETHER, RegionPolicy, refusal_message
from counters.core.regions import GlobalTableMode, Topology
from scripts.refusals_table import DOC, rendered

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


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_every_refusal_refuses_in_its_modes_only_with_the_one_wording(name: str) -> None:
    row = REFUSALS[name]
    assert row.why, f"{name} refuses in no mode"
    topologies = {NONE: Topology(), MREC: Topology(MREC, "eu-west-1", TWO), MRSC: Topology(MRSC, "eu-west-1", THREE)}
    for mode, topology in topologies.items():
        policy = RegionPolicy.of(topology)
        if mode in row.why:
            with pytest.raises(UnsupportedInMode) as refused:
                policy.require(name)
            assert str(refused.value) == refusal_message(name, mode)
            assert str(refused.value).startswith(f"{row.what} is not available on ")
            assert str(refused.value).endswith("(docs/regions.md)")
        else:
            policy.require(name)  # allowed: no exception


def test_only_the_home_region_takes_what_only_a_home_takes_on_mrec() -> None:
    RegionPolicy.of(Topology(MREC, "eu-west-1", TWO, "eu-west-1")).require_home("a gapless sequence")
    RegionPolicy.of(Topology(MRSC, "eu-west-1", THREE)).require_home("a gapless sequence")
    ONE_REGION_POLICY.require_home("a gapless sequence")
    with pytest.raises(UnsupportedInMode, match="send the request to eu-west-1"):
        RegionPolicy.of(Topology(MREC, "us-east-1", TWO, "eu-west-1")).require_home("a gapless sequence")
    with pytest.raises(UnsupportedInMode, match="needs a home Region"):
        RegionPolicy.of(Topology(MREC, "us-east-1", TWO)).require_home("a gapless sequence")


def test_the_refusals_table_in_docs_regions_is_current() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/refusals_table.py"
