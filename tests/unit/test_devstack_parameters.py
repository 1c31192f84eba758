"""The local stack takes template parameter overrides (`python -m devstack --parameter-overrides`)
and reads the template for them as CloudFormation would: the Rules refuse what a deploy would
refuse, the table is the one the parameters pick, and every function's environment follows."""

from __future__ import annotations

import pytest

from devstack.__main__ import parameter_overrides
from devstack.template import read_stack

MREC = {"GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "eu-west-1"}
MRSC = {"GlobalTableMode": "mrsc", "ReplicaRegions": "us-east-1,us-east-2,us-west-2", "HomeRegion": "us-east-1"}


def test_an_override_reaches_the_functions_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    params = parameter_overrides([*(f"{k}={v}" for k, v in MREC.items()), "LedgerRetryWindowSeconds=5 LedgerClockSkewSeconds=2"])
    stack = read_stack("tally-local", params=params)
    ledger = stack.functions["LedgerFunction"].environment
    assert ledger["LEDGER_RETRY_WINDOW_SECONDS"] == "5"
    assert ledger["LEDGER_CLOCK_SKEW_SECONDS"] == "2"
    for fn in stack.functions.values():
        env = fn.environment
        assert (env["GLOBAL_TABLE_MODE"], env["TABLE_REGIONS"], env["HOME_REGION"]) == ("mrec", "eu-west-1,us-east-1", "eu-west-1"), fn.name
        assert env["TABLE_NAME"] == "tally-local", fn.name  # the global table's name is the local table
    # without overrides: the defaults (one Region)
    default = read_stack("tally-local").functions["LedgerFunction"].environment
    assert (default["GLOBAL_TABLE_MODE"], default["TABLE_REGIONS"], default["LEDGER_RETRY_WINDOW_SECONDS"]) == ("none", "", "600")


def test_a_witness_region_is_one_of_the_tables_regions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    params = {**MRSC, "ReplicaRegions": "us-east-1,us-east-2", "WitnessRegion": "us-west-2"}
    env = read_stack("tally-local", params=params).functions["OrdersFunction"].environment
    assert env["TABLE_REGIONS"] == "us-east-1,us-east-2,us-west-2"


@pytest.mark.parametrize("region", ["eu-west-1", "us-east-1"])
def test_every_region_creates_the_global_tables_definition(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """The home Region's stack declares the global table, the other only names it: locally both create it."""
    monkeypatch.setenv("AWS_REGION", region)
    stack = read_stack("tally-local", params=MREC)
    assert stack.table["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert stack.table_extras["TimeToLiveSpecification"]["Enabled"] is True


def test_mrsc_has_no_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert "TimeToLiveSpecification" not in read_stack("tally-local", params=MRSC).table_extras
    assert "TimeToLiveSpecification" in read_stack("tally-local").table_extras


@pytest.mark.parametrize(
    ("params", "rule"),
    [
        ({**MRSC, "SequenceMode": "gapless"}, "MrscRefusesTransactions"),
        ({**MREC, "HomeRegion": "us-west-2"}, "GlobalTableNeedsItsRegions"),
        ({"ReplicaRegions": "eu-west-1,us-east-1"}, "SingleRegionTakesNoReplicas"),
        ({**MREC, "WitnessRegion": "us-west-2"}, "WitnessOnlyWithMrsc"),
    ],
)
def test_the_templates_rules_refuse_locally_what_a_deploy_refuses(params: dict[str, str], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        read_stack("tally-local", params=params)


def test_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="no parameter 'GlobalTablemode'"):
        parameter_overrides(["GlobalTablemode=mrec"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parameter_overrides(["mrec"])
