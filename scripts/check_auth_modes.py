"""Translate template.yaml for AuthMode NONE and COGNITO (LanguageExtensions, then the SAM
transform, both offline) and check the API's authorization in the CloudFormation that results.

Run with the sam-cli venv's Python (``make validate``): it needs samcli and samtranslator.
``sam validate`` checks one set of parameter values; this checks both branches of the Fn::If.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from samcli.lib.cfn_language_extensions.sam_integration import expand_language_extensions
from samcli.yamlhelper import yaml_parse
from samtranslator.translator.managed_policy_translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from samtranslator_notices import show_each_once  # noqa: E402

show_each_once()  # the translator logs the same notice on every translation: once is enough
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # the translator asks boto3 for a region; no call is made


class NoManagedPolicies(ManagedPolicyLoader):
    """The template names no managed policies; never call IAM (offline, no credentials)."""

    def __init__(self) -> None:
        pass

    def load(self) -> dict[str, str]:
        return {}


def translate(params: dict[str, str]) -> dict[str, Any]:
    template = yaml_parse((ROOT / "template.yaml").read_text())
    values = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::StackName": "tally", **params}
    expanded = expand_language_extensions(template, values, enabled=True).expanded_template
    for resource in expanded["Resources"].values():  # as `sam validate` does: packaging is not checked here
        props = resource.get("Properties", {})
        for uri in ("CodeUri", "ContentUri"):
            if isinstance(props.get(uri), str) and not props[uri].startswith("s3://"):
                props[uri] = "s3://bucket/key"
    return transform(expanded, params, NoManagedPolicies())


def methods(cfn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    api = next(r for r in cfn["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi")
    paths = api["Properties"]["Body"]["paths"]
    return {f"{verb.upper()} {path}": op for path, ops in paths.items() for verb, op in ops.items() if verb != "options"}


def main() -> int:
    problems = []
    open_api = translate({"AuthMode": "NONE"})
    for route, op in methods(open_api).items():
        if op.get("security"):
            problems.append(f"AuthMode NONE: {route} has security {op['security']}")
    if any(r["Type"] == "AWS::Cognito::UserPool" for r in open_api["Resources"].values() if "Condition" not in r):
        problems.append("AuthMode NONE: an unconditional user pool")

    secured = translate({"AuthMode": "COGNITO"})
    routes = methods(secured)
    for route, op in routes.items():
        if op.get("security") != [{"CognitoAuthorizer": []}]:
            problems.append(f"AuthMode COGNITO: {route} is not behind the Cognito authorizer ({op.get('security')})")
    body = next(r for r in secured["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi")["Properties"]["Body"]
    authorizer = body.get("securityDefinitions", {}).get("CognitoAuthorizer", {})
    if authorizer.get("x-amazon-apigateway-authtype") != "cognito_user_pools":
        problems.append(f"AuthMode COGNITO: no Cognito user-pool authorizer ({authorizer})")
    for line in problems:
        print(line, file=sys.stderr)
    print(f"auth modes: NONE leaves {len(methods(open_api))} routes open; COGNITO puts {len(routes)} behind the user pool")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
