"""Translate template.yaml for every GlobalTableMode (none, mrec, mrsc; the stack in HomeRegion and
the stack in another Region, which must give its replica's stream; MRSC with 3 replicas and with 2
and a witness), offline, then evaluate the CloudFormation that results the way CloudFormation would
for those parameters: its Rules, its Conditions, which table resource each stack creates, what the
global table declares, what every function's environment and stream event source get, which stacks
run the expiry sweeper (mrsc only), and that nothing live names a resource that the parameters leave out.

Run with the sam-cli venv's Python (``make validate``), like scripts/check_auth_modes.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from check_auth_modes import translate  # noqa: E402

from devstack.template import Resolver  # noqa: E402

ACCOUNT = "123456789012"
STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/tally-global/stream/2026-11-25T00:00:00.000"
STREAM_EAST_2 = "arn:aws:dynamodb:us-east-2:123456789012:table/tally-global/stream/2026-11-25T00:00:00.000"


@dataclass
class Case:
    name: str
    region: str
    params: dict[str, str]
    refused: str | None = None  # the Rule that must refuse these parameters
    table: str | None = None  # the table resource this stack creates (None: it only names the global one)
    replicas: list[str] = field(default_factory=list)
    witnesses: list[str] = field(default_factory=list)
    consistency: str = ""
    ttl: bool = True
    stream: Any = None  # every stream event source's EventSourceArn, resolved
    env: dict[str, str] = field(default_factory=dict)


GLOBAL = {"GlobalTableName": "tally-global"}
CASES = [
    Case(
        "none",
        "us-east-1",
        {},
        table="CountersTable",
        stream="CountersTable.StreamArn",
        env={"GLOBAL_TABLE_MODE": "none", "TABLE_REGIONS": "", "HOME_REGION": ""},
    ),
    Case(
        "mrec, HomeRegion's stack",
        "eu-west-1",
        {**GLOBAL, "GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "eu-west-1"},
        table="CountersGlobalTable",
        replicas=["eu-west-1", "us-east-1"],
        consistency="EVENTUAL",
        stream="CountersGlobalTable.StreamArn",
        env={"GLOBAL_TABLE_MODE": "mrec", "TABLE_REGIONS": "eu-west-1,us-east-1", "HOME_REGION": "eu-west-1", "TABLE_NAME": "tally-global"},
    ),
    Case(
        "mrec, another Region's stack",
        "us-east-1",
        {
            **GLOBAL,
            "GlobalTableMode": "mrec",
            "ReplicaRegions": "eu-west-1,us-east-1",
            "HomeRegion": "eu-west-1",
            "ReplicaStreamArn": STREAM,
        },
        stream=STREAM,
        env={"GLOBAL_TABLE_MODE": "mrec", "TABLE_REGIONS": "eu-west-1,us-east-1", "HOME_REGION": "eu-west-1", "TABLE_NAME": "tally-global"},
    ),
    Case(
        "mrec, another Region's stack, no stream",
        "us-east-1",
        {**GLOBAL, "GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "eu-west-1"},
        refused="GlobalStackOutsideHomeReadsItsReplicasStream",  # else both stream consumers map EventSourceArn ''
    ),
    Case(
        "mrec, 3 Regions",
        "us-east-1",
        {**GLOBAL, "GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1,ap-northeast-1", "HomeRegion": "us-east-1"},
        table="CountersGlobalTable",
        replicas=["eu-west-1", "us-east-1", "ap-northeast-1"],
        consistency="EVENTUAL",
        stream="CountersGlobalTable.StreamArn",
        env={"TABLE_REGIONS": "eu-west-1,us-east-1,ap-northeast-1"},
    ),
    Case(
        "mrsc, 3 replicas",
        "us-east-1",
        {**GLOBAL, "GlobalTableMode": "mrsc", "ReplicaRegions": "us-east-1,us-east-2,us-west-2", "HomeRegion": "us-east-1"},
        table="CountersGlobalTable",
        replicas=["us-east-1", "us-east-2", "us-west-2"],
        consistency="STRONG",
        ttl=False,
        stream="CountersGlobalTable.StreamArn",
        env={"GLOBAL_TABLE_MODE": "mrsc", "TABLE_REGIONS": "us-east-1,us-east-2,us-west-2", "HOME_REGION": "us-east-1"},
    ),
    Case(
        "mrsc, 2 replicas and a witness",
        "us-east-1",
        {
            **GLOBAL,
            "GlobalTableMode": "mrsc",
            "ReplicaRegions": "us-east-1,us-east-2",
            "WitnessRegion": "us-west-2",
            "HomeRegion": "us-east-1",
        },
        table="CountersGlobalTable",
        replicas=["us-east-1", "us-east-2"],
        witnesses=["us-west-2"],
        consistency="STRONG",
        ttl=False,
        stream="CountersGlobalTable.StreamArn",
        env={"TABLE_REGIONS": "us-east-1,us-east-2,us-west-2"},
    ),
    Case(
        "mrsc, another Region's stack",
        "us-east-2",
        {
            **GLOBAL,
            "GlobalTableMode": "mrsc",
            "ReplicaRegions": "us-east-1,us-east-2,us-west-2",
            "HomeRegion": "us-east-1",
            "ReplicaStreamArn": STREAM_EAST_2,
        },
        stream=STREAM_EAST_2,
        env={
            "GLOBAL_TABLE_MODE": "mrsc",
            "TABLE_REGIONS": "us-east-1,us-east-2,us-west-2",
            "HOME_REGION": "us-east-1",
            "TABLE_NAME": "tally-global",
        },
    ),
    Case(
        "mrsc, another Region's stack, no stream",
        "us-east-2",
        {**GLOBAL, "GlobalTableMode": "mrsc", "ReplicaRegions": "us-east-1,us-east-2,us-west-2", "HomeRegion": "us-east-1"},
        refused="GlobalStackOutsideHomeReadsItsReplicasStream",
    ),
    Case(
        "mrsc with SequenceMode gapless",
        "us-east-1",
        {
            **GLOBAL,
            "GlobalTableMode": "mrsc",
            "ReplicaRegions": "us-east-1,us-east-2,us-west-2",
            "HomeRegion": "us-east-1",
            "SequenceMode": "gapless",
        },
        refused="MrscRefusesTransactions",
    ),
    Case(
        "mrec without a table name",
        "us-east-1",
        {"GlobalTableMode": "mrec", "ReplicaRegions": "eu-west-1,us-east-1", "HomeRegion": "us-east-1"},
        refused="GlobalTableNeedsItsRegions",
    ),
    Case(
        "mrec, HomeRegion not a replica",
        "us-east-1",
        {
            **GLOBAL,
            "GlobalTableMode": "mrec",
            "ReplicaRegions": "eu-west-1,us-east-1",
            "HomeRegion": "us-west-2",
            "ReplicaStreamArn": STREAM,
        },
        refused="GlobalTableNeedsItsRegions",
    ),
    Case("replicas with mode none", "us-east-1", {"ReplicaRegions": "eu-west-1,us-east-1"}, refused="SingleRegionTakesNoReplicas"),
    Case(
        "a witness with mrec",
        "us-east-1",
        {
            **GLOBAL,
            "GlobalTableMode": "mrec",
            "ReplicaRegions": "eu-west-1,us-east-1",
            "HomeRegion": "us-east-1",
            "WitnessRegion": "us-west-2",
        },
        refused="WitnessOnlyWithMrsc",
    ),
]


class Tracking(Resolver):
    """Resolves as CloudFormation would for these parameters and records what a live value names."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.named: set[str] = set()

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" and (arg in self.values or arg.startswith("AWS::")):  # parameters, pseudo parameters
                return self.values.get(arg, arg)
            if key == "Ref":
                self.named.add(arg)
                return f"{arg}.Ref"
            if key == "Fn::GetAtt":
                target = arg if isinstance(arg, list) else str(arg).split(".", 1)
                self.named.add(target[0])
                return f"{target[0]}.{target[1]}"
            if key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                extra = {} if isinstance(arg, str) else arg[1]
                import re

                for name in re.findall(r"\$\{([^}!]+)\}", text):
                    base = name.split(".")[0]
                    if base not in self.values and base not in extra and not base.startswith("AWS::"):
                        self.named.add(base)
        return super().__call__(value)


def check(case: Case) -> list[str]:
    problems: list[str] = []
    params = {"AWS::Region": case.region, **case.params}
    raw = translate(params)
    resolve = Tracking(raw, {}, params)
    refused = list(resolve.refusals(raw))
    if case.refused:
        return [] if refused == [case.refused] else [f"refused by {refused}, expected {case.refused}"]
    if refused:
        return [f"refused by {refused}"]
    live = {k: r for k, r in raw["Resources"].items() if "Condition" not in r or resolve.condition(r["Condition"])}
    tables = sorted(k for k, r in live.items() if r["Type"].startswith("AWS::DynamoDB::"))
    if tables != ([case.table] if case.table else []):
        problems.append(f"table resources {tables}, expected {case.table}")
    props = {k: resolve(r.get("Properties", {})) for k, r in live.items()}
    if case.table == "CountersGlobalTable":
        table = props[case.table]
        if [r["Region"] for r in table["Replicas"]] != case.replicas:
            problems.append(f"replicas {table['Replicas']}")
        if [w["Region"] for w in table.get("GlobalTableWitnesses", [])] != case.witnesses:
            problems.append(f"witnesses {table.get('GlobalTableWitnesses')}")
        if table["MultiRegionConsistency"] != case.consistency:
            problems.append(f"MultiRegionConsistency {table['MultiRegionConsistency']}")
        if ("TimeToLiveSpecification" in table) != case.ttl:
            problems.append(f"TimeToLiveSpecification {table.get('TimeToLiveSpecification')}")
        if not all(r["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] for r in table["Replicas"]):
            problems.append("a replica without point-in-time recovery")
        if table.get("StreamSpecification", {}).get("StreamViewType") not in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            problems.append(f"StreamSpecification {table.get('StreamSpecification')}")
    functions = {k: p for k, p in props.items() if live[k]["Type"] == "AWS::Lambda::Function"}
    if ("ExpirySweeperFunction" in functions) != (case.params.get("GlobalTableMode") == "mrsc"):  # MRSC has no TTL: only it sweeps
        problems.append(f"ExpirySweeperFunction {'present' if 'ExpirySweeperFunction' in functions else 'missing'}")
    for name, fn in functions.items():
        env = fn.get("Environment", {}).get("Variables", {})
        wrong = {k: env.get(k) for k, v in case.env.items() if env.get(k) != v}
        if wrong:
            problems.append(f"{name} environment {wrong}, expected {case.env}")
    sources = [
        p["EventSourceArn"]
        for k, p in props.items()
        if live[k]["Type"] == "AWS::Lambda::EventSourceMapping" and "Queue" not in str(p["EventSourceArn"])
    ]
    if not sources or any(s != case.stream for s in sources):
        problems.append(f"stream event sources {sources}, expected {case.stream}")
    dead = sorted(resolve.named - set(live))
    if dead:
        problems.append(f"live values name resources these parameters leave out: {dead}")
    return problems


def main() -> int:
    failed = 0
    for case in CASES:
        problems = check(case)
        verdict = ("refused by " + case.refused) if case.refused else "ok"
        print(f"GlobalTableMode {case.name:40} {'FAILED' if problems else verdict}")
        for line in problems:
            print(f"    {line}", file=sys.stderr)
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
