"""core.regions: the topology a function reads from its settings, and the refusal it raises."""

from __future__ import annotations

import pytest

from counters.core.regions import GlobalTableMode, RegionSettings, Topology
from counters.core.settings import SettingsError

MREC, MRSC = GlobalTableMode.MREC, GlobalTableMode.MRSC


def test_a_single_region_table_writes_under_one_empty_name() -> None:
    single = Topology()
    assert (single.multi_region, single.writer, single.writers, single.index, single.stride, single.is_home) == (
        False,
        "",
        ("",),
        0,
        1,
        True,
    )


def test_settings_read_the_mode_the_regions_and_this_region() -> None:
    env = {"TABLE_NAME": "t", "GLOBAL_TABLE_MODE": "mrec", "AWS_REGION": "us-east-1", "TABLE_REGIONS": "us-east-1, eu-west-1"}
    topology = RegionSettings.from_env(env).topology
    assert topology == Topology(MREC, "us-east-1", ("eu-west-1", "us-east-1"))
    assert (topology.writer, topology.index, topology.stride, topology.eventual) == ("us-east-1", 1, 2, True)


@pytest.mark.parametrize(
    ("mode", "region", "regions", "home"),
    [
        (MREC, "us-east-1", "us-east-1", ""),  # one Region is not a global table
        (MREC, "ap-south-1", "eu-west-1,us-east-1", ""),  # this Region is not a replica
        (MRSC, "us-east-1", "eu-west-1,us-east-1", ""),  # MRSC has exactly three
        (MREC, "us-east-1", "eu-west-1,us-east-1", "ap-south-1"),  # the home Region is not a replica
    ],
)
def test_an_inconsistent_topology_fails_the_first_invocation_naming_the_variables(
    mode: GlobalTableMode, region: str, regions: str, home: str
) -> None:
    env = {"TABLE_NAME": "t", "GLOBAL_TABLE_MODE": mode.value, "AWS_REGION": region, "TABLE_REGIONS": regions, "HOME_REGION": home}
    with pytest.raises(SettingsError, match="TABLE_REGIONS"):
        RegionSettings.from_env(env).topology


def test_only_the_home_region_takes_home_only_writes_under_mrec() -> None:
    regions = ("eu-west-1", "us-east-1")
    assert Topology(MREC, "eu-west-1", regions, "eu-west-1").is_home
    assert not Topology(MREC, "us-east-1", regions, "eu-west-1").is_home
    assert Topology(MRSC, "us-east-1", ("ap-south-1", "eu-west-1", "us-east-1"), "eu-west-1").is_home  # one consistent store
