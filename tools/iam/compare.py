"""The template side: each function's code (CodeUri + Handler, through its layers), its Policies, and where they differ.

SAM event sources. An ``SQS`` event attaches AWSLambdaSQSQueueExecutionRole and a ``DynamoDB``
stream event AWSLambdaDynamoDBExecutionRole (samtranslator, eventsources/pull.py), both on
Resource "*": the poller uses those actions, so they are taken off the derived set and must not
be in ``Policies``. A stream's ``DestinationConfig.OnFailure`` of Type SQS makes SAM add
sqs:SendMessage on that destination (for the poller); the code never sends there, so it is
neither derived nor expected in ``Policies``.

What is compared. The ``Allow`` statements of ``Policies`` (dynamodb:/sqs: actions and ``*``) must
equal the derived set: a broader grant fails, a missing grant fails. The comparison is per
action, not per resource or ``dynamodb:LeadingKeys``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

# The one place the tool reads the template: resolved as the local stack reads it (short-form tags).
from devstack.template import ROOT, load
from tools.iam.aws import SERVICES, AnalysisError
from tools.iam.clients import unrecognised
from tools.iam.derive import derive
from tools.iam.program import Program

TEMPLATE_PATH = ROOT / "template.yaml"
# What SAM attaches for pull event sources (managed policies on Resource "*").
SAM_EVENT_ACTIONS = {
    "SQS": frozenset({"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}),  # AWSLambdaSQSQueueExecutionRole
    "DynamoDB": frozenset(  # AWSLambdaDynamoDBExecutionRole
        {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
    ),
}


class GrantMismatch(AssertionError):
    pass


class BroaderGrant(GrantMismatch):
    pass


class MissingGrant(GrantMismatch):
    pass


@cache
def program(roots: tuple[Path, ...]) -> Program:
    """Parsed once per set of code roots (functions sharing a directory and layers share it)."""
    return Program(list(roots))


@cache
def _derivation(roots: tuple[Path, ...], handler: str) -> tuple[frozenset[str], frozenset[str]]:
    found = derive(program(roots), handler.rpartition(".")[0])
    return frozenset(found.actions()), frozenset(found.kinds)


def in_scope(action: str) -> bool:
    return action == "*" or action.split(":")[0] in SERVICES


@dataclass(frozen=True)
class Verdict:
    """One function: what its code performs, what SAM and its Policies grant, what differs."""

    name: str
    derived: frozenset[str] = frozenset()
    event_actions: frozenset[str] = frozenset()  # SAM's, for the function's pull event sources
    granted: frozenset[str] = frozenset()
    unrecognised: tuple[str, ...] = ()  # operation-named attributes on no known client
    error: str | None = None  # the analysis could not read the code or the Policies

    @property
    def needed(self) -> frozenset[str]:
        return self.derived - self.event_actions

    @property
    def missing(self) -> frozenset[str]:
        return self.needed - self.granted

    @property
    def broader(self) -> frozenset[str]:
        return self.granted - self.needed

    @property
    def problems(self) -> list[str]:
        if self.error:
            return [self.error]
        found = [f"operation on no recognised client: {u}" for u in self.unrecognised]
        if not self.derived:
            found.append("derives no action (the analysis lost the code?)")
        return found

    @property
    def ok(self) -> bool:
        return not (self.missing or self.broader or self.problems)


@dataclass
class Stack:
    """A template (a dict as ``devstack.template.load`` reads it) and the directory its CodeUris are relative to."""

    template: dict[str, Any]
    root: Path

    @classmethod
    def load(cls, path: Path | None = None) -> Stack:
        path = Path(path) if path is not None else TEMPLATE_PATH
        return cls(load(path), path.resolve().parent)

    def copy(self) -> Stack:
        """A deep copy to mutate."""
        return Stack(copy.deepcopy(self.template), self.root)

    def functions(self) -> list[str]:
        return sorted(k for k, r in self.template["Resources"].items() if r["Type"] == "AWS::Serverless::Function")

    def properties(self, name: str) -> dict[str, Any]:
        return self.template["Resources"][name]["Properties"]

    def code_roots(self, name: str) -> list[Path]:
        """The function's code directory, then the content of its layers (they share sys.path)."""
        resources = self.template["Resources"]
        props = self.properties(name)
        layers = props.get("Layers", self.template.get("Globals", {}).get("Function", {}).get("Layers", []))
        roots = [self.root / props["CodeUri"]]
        for layer in layers:
            resource = resources.get(layer.get("Ref", "")) if isinstance(layer, dict) else None
            if resource is not None and resource["Type"] == "AWS::Serverless::LayerVersion":
                roots.append(self.root / resource["Properties"]["ContentUri"])
        return roots

    def program(self, name: str) -> Program:
        return program(tuple(self.code_roots(name)))

    def derivation(self, name: str) -> tuple[frozenset[str], frozenset[str]]:
        """(the actions the function's code can perform, the transaction item kinds it builds)."""
        return _derivation(tuple(self.code_roots(name)), self.properties(name)["Handler"])

    def derived(self, name: str) -> frozenset[str]:
        return self.derivation(name)[0]

    def event_actions(self, name: str) -> frozenset[str]:
        """Actions SAM's managed policies give the function for its pull event sources."""
        events = (self.properties(name).get("Events") or {}).values()
        return frozenset().union(*(SAM_EVENT_ACTIONS.get(event["Type"], frozenset()) for event in events))

    def granted(self, name: str) -> frozenset[str]:
        """The DynamoDB/SQS actions the function's ``Policies`` allow."""
        actions: set[str] = set()
        for policy in self.properties(name).get("Policies", []):
            if not isinstance(policy, dict) or "Statement" not in policy:
                raise AnalysisError(f"{name}: cannot read the actions of {policy!r}; list them in a statement")
            for statement in policy["Statement"]:
                if "NotAction" in statement:
                    raise AnalysisError(f"{name}: NotAction grants everything else")
                if statement.get("Effect") == "Allow":
                    action = statement["Action"]
                    actions.update(a for a in ([action] if isinstance(action, str) else action) if in_scope(a))
        return frozenset(actions)

    def needed(self, name: str) -> frozenset[str]:
        return self.derived(name) - self.event_actions(name)

    def check(self, name: str) -> None:
        """Raise when the function's Policies grant more, or less, than its code needs."""
        grant, need = self.granted(name), self.needed(name)
        if grant - need:
            raise BroaderGrant(f"{name} is granted {sorted(grant - need)} that its code never performs (needs {sorted(need)})")
        if need - grant:
            raise MissingGrant(f"{name} performs {sorted(need - grant)} that its Policies do not grant (grants {sorted(grant)})")

    def unrecognised(self, name: str) -> list[str]:
        return unrecognised(self.program(name))

    def verdict(self, name: str) -> Verdict:
        try:
            return Verdict(
                name,
                derived=self.derived(name),
                event_actions=self.event_actions(name),
                granted=self.granted(name),
                unrecognised=tuple(self.unrecognised(name)),
            )
        except AnalysisError as error:
            return Verdict(name, error=str(error))
