"""Read template.yaml the way the local stack needs it: functions, API routes, the table.

The template is read by cfn-lint's CloudFormation YAML loader (the one `make lint` uses):
short-form tags (``!Ref``, ``!Sub``, ``!GetAtt``...) become ``{"Ref": ...}`` / ``{"Fn::Sub": ...}``,
resolved here against parameter defaults and the local names of resources. Nothing here is a
copy of the template: change the template and the local stack follows.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
# The template declares these empty (for `sam local --env-vars`); locally the devstack and the
# tests set them, so an empty template value must not override the process's endpoint.
ENDPOINT_VARIABLES = frozenset({"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"})


def load(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as plain JSON data: cfn-lint's nodes carry source marks and cannot be pickled
    into the Lambda workers (an unquoted YAML date becomes its string, as CloudFormation reads it).
    cfn-lint is imported here, not at module level: it takes about a second to import, and every
    spawned Lambda worker imports this module."""
    path = Path(path)
    return json.loads(_as_json(str(path.resolve()), path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _as_json(path: str, mtime_ns: int) -> str:
    """Parsed once per file version (a test session reads the template hundreds of times);
    every caller gets its own copy from the JSON text."""
    from cfnlint.decode import cfn_yaml

    return json.dumps(cfn_yaml.load(path), default=str)


@dataclass
class Route:
    method: str
    path: str  # SAM form: /posts/{postId}
    function: str
    regex: re.Pattern[str] = field(repr=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        pattern = ""
        for segment in self.path.strip("/").split("/"):
            if segment.endswith("+}"):
                pattern += f"/(?P<{segment[1:-2]}>.+)"
            elif segment.startswith("{"):
                pattern += f"/(?P<{segment[1:-1]}>[^/]+)"
            elif segment:
                pattern += "/" + re.escape(segment)
        self.regex = re.compile("^" + (pattern or "/") + "/?$")

    @property
    def specificity(self) -> tuple[int, int]:
        """Literal segments beat parameters, as in API Gateway (/orders/latest before /orders/{id})."""
        segments = self.path.strip("/").split("/")
        return (-sum(1 for s in segments if not s.startswith("{")), sum(1 for s in segments if s.endswith("+}")))


@dataclass
class Function:
    name: str
    code_dir: Path
    handler: str
    timeout: int
    memory: int
    environment: dict[str, str]
    layers: list[Path]


@dataclass
class QueueSource:
    """An SQS event source: which function consumes which queue, in what batches."""

    function: str
    queue: str  # logical id
    batch_size: int
    report_failures: bool


@dataclass
class Stack:
    functions: dict[str, Function]
    routes: list[Route]
    queue_sources: list[QueueSource]
    table: dict[str, Any]  # CreateTable arguments
    table_extras: dict[str, Any]  # TTL, streams: applied after creation
    table_name: str
    authorizer_header: str | None = None  # the API's Cognito authorizer reads this header; None: no auth


class Resolver:
    """Resolves intrinsics with parameter defaults (or overrides) and local resource names.

    ``AWS::Region`` is the process's ``AWS_REGION`` (the Region the local stack plays), unless
    ``params`` sets it; a ``CommaDelimitedList`` parameter resolves to its list of strings, as
    CloudFormation passes it; ``AWS::NoValue`` drops the property or list entry it stands for.
    """

    def __init__(
        self, template: dict[str, Any], names: dict[str, str], params: dict[str, str] | None = None, attrs: dict[str, str] | None = None
    ):
        self.attrs = attrs or {}
        self.values: dict[str, Any] = {
            "AWS::Region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
            "AWS::StackName": "tally-local",
            "AWS::AccountId": "123456789012",
            "AWS::NoValue": None,
        }
        lists = {k for k, spec in template.get("Parameters", {}).items() if spec.get("Type") == "CommaDelimitedList"}
        for key, spec in template.get("Parameters", {}).items():
            self.values[key] = str(spec.get("Default", ""))
        self.values.update(params or {})
        for key in lists:
            value = self.values[key]
            self.values[key] = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
        self.values.update(names)
        self.conditions = template.get("Conditions", {})

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.values.get(arg, arg)
            if key == "Fn::Sub":
                text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], {k: self(v) for k, v in arg[1].items()})
                return re.sub(r"\$\{([^}]+)\}", lambda m: str(extra.get(m[1], self.values.get(m[1], m[0]))), text)
            if key == "Fn::GetAtt":
                return self.attrs.get(f"{arg[0]}.{arg[1]}", f"{arg[0]}.{arg[1]}")
            if key == "Fn::If":
                cond, yes, no = arg
                return self(yes) if self.condition(cond) else self(no)
            if key == "Fn::Join":
                return arg[0].join(str(v) for v in self._list(arg[1]))
            if key == "Fn::Split":
                return str(self(arg[1])).split(arg[0])
            if key == "Fn::Select":
                return self._list(arg[1])[int(self(arg[0]))]
        if isinstance(value, dict):
            return {k: r for k, r in ((k, self(v)) for k, v in value.items()) if r is not None}
        if isinstance(value, list):
            return [r for r in (self(v) for v in value) if r is not None]
        return value

    def _list(self, value: Any) -> list[Any]:
        resolved = self(value)
        if not isinstance(resolved, list):
            raise ValueError(f"expected a list, got {resolved!r} from {value!r}")
        return resolved

    def condition(self, name: str) -> bool:
        return self.evaluate(self.conditions.get(name, {}))

    def evaluate(self, spec: Any) -> bool:
        """A condition function: Fn::Equals/And/Or/Not and {"Condition": name}."""
        if not isinstance(spec, dict) or len(spec) != 1:
            raise ValueError(f"unsupported condition {spec!r}")
        ((key, arg),) = spec.items()
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Equals":
            return str(self(arg[0])) == str(self(arg[1]))
        if key == "Fn::And":
            return all(self.evaluate(c) for c in arg)
        if key == "Fn::Or":
            return any(self.evaluate(c) for c in arg)
        if key == "Fn::Not":
            return not self.evaluate(arg[0])
        raise ValueError(f"unsupported condition {key}")

    def rule_holds(self, spec: Any) -> bool:
        """A Rules assertion (the rule functions the template uses)."""
        ((key, arg),) = spec.items()
        if key == "Fn::Equals":
            return bool(self(arg[0]) == self(arg[1]))
        if key == "Fn::Not":
            return not self.rule_holds(arg[0])
        if key == "Fn::And":
            return all(self.rule_holds(a) for a in arg)
        if key == "Fn::Or":
            return any(self.rule_holds(a) for a in arg)
        if key == "Fn::Contains":
            return self(arg[1]) in self(arg[0])
        if key == "Fn::EachMemberEquals":
            return all(v == self(arg[1]) for v in self(arg[0]))
        raise ValueError(f"unsupported rule function {key}")

    def refusals(self, template: dict[str, Any]) -> dict[str, str]:
        """The template's Rules that refuse these parameters (CloudFormation then creates nothing):
        rule name -> the failed assertion's description."""
        failed = {}
        for name, rule in template.get("Rules", {}).items():
            if "RuleCondition" in rule and not self.rule_holds(rule["RuleCondition"]):
                continue
            for assertion in rule["Assertions"]:
                if not self.rule_holds(assertion["Assert"]):
                    failed[name] = " ".join(str(assertion.get("AssertDescription", name)).split())
                    break
        return failed


TABLE_TYPES = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")


def _local_table(resources: dict[str, Any], table_ids: list[str], resolve: Resolver) -> str:
    """The table this Region's stack uses: the one whose Condition holds (the single-Region table,
    or the global table in the stack that declares it); in a Region whose stack only names the
    global table, that table's definition (its replica exists here, as it does on AWS)."""
    live = [k for k in table_ids if "Condition" not in resources[k] or resolve.condition(resources[k]["Condition"])]
    if len(live) > 1:
        raise ValueError(f"expected one DynamoDB table for these parameters, found {live}")
    if live:
        return live[0]
    global_tables = [k for k in table_ids if resources[k]["Type"] == "AWS::DynamoDB::GlobalTable"]
    if len(global_tables) != 1:
        raise ValueError(f"no table for these parameters and not one global table to use: {table_ids}")
    return global_tables[0]


def queue_definitions(path: Path = TEMPLATE) -> dict[str, dict[str, Any]]:
    """SQS queues by logical id, with their properties (intrinsics unresolved), DLQs first."""
    resources = load(path)["Resources"]
    queues = {k: r.get("Properties", {}) for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    return dict(sorted(queues.items(), key=lambda kv: "RedrivePolicy" in kv[1]))


def read_stack(
    table_name: str,
    params: dict[str, str] | None = None,
    path: Path = TEMPLATE,
    refs: dict[str, str] | None = None,
    attrs: dict[str, str] | None = None,
) -> Stack:
    """Everything the local stack runs, read from the template.

    ``refs``/``attrs`` give local values for ``!Ref X`` / ``!GetAtt X.Attr`` (e.g. queue URLs and ARNs).
    """
    template = load(path)
    resources = template["Resources"]
    table_ids = [k for k, r in resources.items() if r["Type"] in TABLE_TYPES]
    if not table_ids:
        raise ValueError("expected a DynamoDB table in the template, found none")
    layers = {k: ROOT / r["Properties"]["ContentUri"] for k, r in resources.items() if r["Type"] == "AWS::Serverless::LayerVersion"}
    # Resources the local stack did not create resolve to "" (a function then runs without them).
    # Every table resource, and a global table's name, is the local table.
    names = {**{k: "" for k in resources}, **{k: table_name for k in table_ids}, "GlobalTableName": table_name, **(refs or {})}
    resolve = Resolver(template, names, params, attrs)
    refused = resolve.refusals(template)
    if refused:  # as `sam deploy` would be: the template's Rules refuse these parameters
        raise ValueError("template.yaml refuses these parameters: " + "; ".join(f"{k}: {v}" for k, v in refused.items()))
    table_id = _local_table(resources, table_ids, resolve)

    glob = template.get("Globals", {}).get("Function", {})
    functions: dict[str, Function] = {}
    routes: list[Route] = []
    sources: list[QueueSource] = []
    for name, res in resources.items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        if "Condition" in res and not resolve.condition(res["Condition"]):
            continue  # not created for these parameters (e.g. EscrowFunction: MREC only)
        props = res["Properties"]
        env = dict(glob.get("Environment", {}).get("Variables", {}))
        env.update(props.get("Environment", {}).get("Variables", {}))
        layer_refs = props.get("Layers", glob.get("Layers", []))
        functions[name] = Function(
            name=name,
            code_dir=ROOT / props["CodeUri"],
            handler=props["Handler"],
            timeout=int(resolve(props.get("Timeout", glob.get("Timeout", 3)))),
            memory=int(resolve(props.get("MemorySize", glob.get("MemorySize", 128)))),
            environment={
                k: str(v) for k, v in ((k, resolve(v)) for k, v in env.items()) if v is not None and (v or k not in ENDPOINT_VARIABLES)
            },
            layers=[layers[ref["Ref"]] for ref in layer_refs if isinstance(ref, dict) and ref.get("Ref") in layers],
        )
        for event in (props.get("Events") or {}).values():
            p = event["Properties"]
            if event["Type"] == "Api":
                routes.append(Route(p["Method"].upper(), p["Path"], name))
            elif event["Type"] == "SQS":
                queue = p["Queue"]["Fn::GetAtt"][0] if isinstance(p["Queue"], dict) and "Fn::GetAtt" in p["Queue"] else str(p["Queue"])
                sources.append(
                    QueueSource(name, queue, int(p.get("BatchSize", 10)), "ReportBatchItemFailures" in p.get("FunctionResponseTypes", []))
                )
    routes.sort(key=lambda r: r.specificity)
    authorizer_header = None
    for res in resources.values():
        if res["Type"] == "AWS::Serverless::Api":
            auth = resolve(res.get("Properties", {}).get("Auth"))
            if auth and auth.get("DefaultAuthorizer"):
                spec = auth["Authorizers"][auth["DefaultAuthorizer"]]
                if "UserPoolArn" not in spec:
                    raise ValueError("the local API emulates Cognito user-pool authorizers only")
                authorizer_header = spec.get("Identity", {}).get("Header", "Authorization")

    tprops = resolve(resources[table_id]["Properties"])
    create = {
        k: tprops[k]
        for k in (
            "AttributeDefinitions",
            "KeySchema",
            "BillingMode",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "StreamSpecification",
            "ProvisionedThroughput",
        )
        if k in tprops
    }
    if "StreamSpecification" in create:
        create["StreamSpecification"] = {"StreamEnabled": True, **create["StreamSpecification"]}
    create["TableName"] = table_name
    extras = {k: tprops[k] for k in ("TimeToLiveSpecification",) if k in tprops}
    return Stack(
        functions=functions,
        routes=routes,
        queue_sources=sources,
        table=create,
        table_extras=extras,
        table_name=table_name,
        authorizer_header=authorizer_header,
    )
