"""The local stack takes template parameter overrides (`python -m devstack --parameter-overrides`)
and reads the template for them as CloudFormation would: the Rules refuse what a deploy would
refuse, the table is the one the parameters pick, and every function's environment follows."""

from __future__ import annotations

import pytest

from devstack.__main__ import parameter_overrides
from devstack.template import read_stack

MREC = {"GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "eu-west-1"}
MRSC = {"GlobalTableMode": "mrsc", "ReplicaRegions": "us-east-1,us-east-2,us-west-2", "HomeRegion": "us-east-1"}
STREAM = {"ReplicaStreamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/tally-local/stream/local"}
"""What a stack outside HomeRegion gives (the tests run as us-east-1; MREC's HomeRegion is eu-west-1)."""


def test_an_override_reaches_the_functions_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    params = parameter_overrides(
        [*(f"{k}={v}" for k, v in {**MREC, **STREAM}.items()), "LedgerRetryWindowSeconds=5 LedgerClockSkewSeconds=2"]
    )
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
    stack = read_stack("tally-local", params={**MREC, **STREAM} if region != MREC["HomeRegion"] else MREC)
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
        ({**MREC, "AWS::Region": "us-east-1"}, "GlobalStackOutsideHomeReadsItsReplicasStream"),
        ({**MRSC, "AWS::Region": "us-west-2"}, "GlobalStackOutsideHomeReadsItsReplicasStream"),
    ],
)
def test_the_templates_rules_refuse_locally_what_a_deploy_refuses(params: dict[str, str], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        read_stack("tally-local", params=params)


@pytest.mark.parametrize("params", [{**MREC, "AWS::Region": "eu-west-1"}, {**MREC, **STREAM, "AWS::Region": "us-east-1"}, MRSC])
def test_a_global_stack_in_home_region_or_with_its_replicas_stream_is_accepted(params: dict[str, str]) -> None:
    read_stack("tally-local", params={"AWS::Region": "us-east-1", **params})


def test_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="no parameter 'GlobalTablemode'"):
        parameter_overrides(["GlobalTablemode=mrec"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parameter_overrides(["mrec"])


def test_dev_regions_runs_one_stack_per_region_with_its_region_and_the_global_tables_parameters() -> None:
    from devstack.regions import region_stacks

    stacks = region_stacks(
        ["eu-west-1", "us-east-1"],
        "mrec",
        "eu-west-1",
        endpoint="http://127.0.0.1:8000",
        port=3000,
        sqs_port=9324,
        table="tally-local",
        overrides=["LedgerRetryWindowSeconds=5"],
        concurrency=2,
        quiet=True,
    )
    assert [(s.region, s.port) for s in stacks] == [("eu-west-1", 3000), ("us-east-1", 3001)]
    for i, stack in enumerate(stacks):
        assert stack.env["AWS_REGION"] == stack.env["AWS_DEFAULT_REGION"] == stack.region
        assert stack.env["AWS_ENDPOINT_URL_DYNAMODB"] == "http://127.0.0.1:8000"  # one DynamoDB Local for every Region
        args = stack.command
        assert args[args.index("--region") + 1] == stack.region and args[args.index("--sqs-port") + 1] == str(9324 + i)
        overrides = args[args.index("--parameter-overrides") + 1 :]
        outside_home = ["ReplicaStreamArn=arn:aws:dynamodb:us-east-1:123456789012:table/tally-local/stream/local"] if i else []
        assert overrides == [
            "GlobalTableMode=mrec",
            "ReplicaRegions=eu-west-1,us-east-1",
            "HomeRegion=eu-west-1",
            *outside_home,  # the template refuses a stack outside HomeRegion without it
            "LedgerRetryWindowSeconds=5",
        ]
        env = {**stack.env, "AWS_REGION": stack.region}
        read_stack("tally-local", params={"AWS::Region": env["AWS_REGION"], **parameter_overrides(overrides)})  # not refused


def test_an_empty_map_from_dynamodb_locals_stream_is_mended() -> None:
    """DynamoDB Local's Streams API gives an empty map as {}; replicated as is, PutItem refuses it."""
    from testkit.regions import mend

    assert mend({}) == {"M": {}}
    assert mend({"M": {"a": {}, "b": {"L": [{}, {"S": "x"}]}}}) == {"M": {"a": {"M": {}}, "b": {"L": [{"M": {}}, {"S": "x"}]}}}
    assert mend({"NULL": True}) == {"NULL": True}


def test_deliveries_json_becomes_the_local_stacks_delivery_faults() -> None:
    from devstack.__main__ import delivery_options
    from devstack.sqs import DeliveryFaults

    options = delivery_options('{"duplicate": 0.15, "late": 0.1, "stream_duplicate": 0.25, "seed": 7, "visibility": 2, "queue_pollers": 2}')
    assert options == {
        "delivery_faults": DeliveryFaults(duplicate=0.15, late=0.1, seed=7),
        "stream_duplicates": 0.25,
        "visibility_override": 2,
        "queue_pollers": 2,
    }
    assert delivery_options(None) == {}


@pytest.mark.parametrize("text", ["{", "[]", '{"duplicates": 0.1}'])
def test_deliveries_refuses_what_it_does_not_know(text: str) -> None:
    from devstack.__main__ import delivery_options

    with pytest.raises(ValueError, match="--deliveries"):
        delivery_options(text)
