"""The derived-IAM analysis (tools/iam): the real template, mutated copies of it, small programs."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.iam.program import (
    SERVICES,
    TEMPLATE,
    BroaderGrant,
    Derivation,
    FunctionNode,
    MissingGrant,
    Program,
    Scope,
    check,
    code_roots,
    derivation,
    derive,
    derived,
    functions,
    granted,
    needed,
    operations,
    program,
    sam_event_actions,
    top_level,
)

# --------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------
# Disagreements found, kept visible until the template is fixed (strict: a fix makes them fail).
KNOWN_GAPS: dict[str, tuple[type[Exception], str]] = {}  # function -> (error, why): a gap the template still has


def _param(name: str) -> Any:
    if name in KNOWN_GAPS:
        raises, reason = KNOWN_GAPS[name]
        return pytest.param(name, marks=pytest.mark.xfail(raises=raises, strict=True, reason=reason))
    return name


@pytest.mark.parametrize("name", [_param(n) for n in functions(TEMPLATE)])
def test_policies_grant_exactly_what_the_code_performs(name: str) -> None:
    check(TEMPLATE, name)


@pytest.mark.parametrize("name", functions(TEMPLATE))
def test_condition_check_is_granted_only_where_code_builds_condition_checks(name: str) -> None:
    _, kinds = derivation(TEMPLATE, name)
    if "ConditionCheck" not in kinds:
        assert "dynamodb:ConditionCheckItem" not in granted(TEMPLATE, name)


def test_every_function_derives_some_action() -> None:
    """An empty derivation would mean the analysis lost the code, not that it needs nothing."""
    assert all(derived(TEMPLATE, name) for name in functions(TEMPLATE))


# -- the checker catches broader and missing grants (mutated copies of the template) ----------
def _add_statement(template: dict[str, Any], name: str, action: str) -> None:
    policies = template["Resources"][name]["Properties"]["Policies"]
    policies[0]["Statement"].append({"Effect": "Allow", "Action": action, "Resource": {"Fn::GetAtt": ["CountersTable", "Arn"]}})


def _matching(predicate: Any) -> str:
    names = [n for n in functions(TEMPLATE) if n not in KNOWN_GAPS and predicate(n)]
    assert names, "no function to mutate"
    return names[0]


@pytest.mark.parametrize(
    ("action", "match"),
    [
        ("dynamodb:DeleteItem", "dynamodb:DeleteItem"),  # on a function that never deletes
        ("dynamodb:ConditionCheckItem", "dynamodb:ConditionCheckItem"),  # no code builds ConditionCheck items
        ("dynamodb:*", r"dynamodb:\*"),
    ],
)
def test_a_broader_grant_fails(action: str, match: str) -> None:
    name = _matching(lambda n: action not in needed(TEMPLATE, n))
    template = copy.deepcopy(TEMPLATE)
    _add_statement(template, name, action)
    with pytest.raises(BroaderGrant, match=match):
        check(template, name)


def test_a_missing_grant_fails() -> None:
    name = _matching(lambda n: "dynamodb:PutItem" in needed(TEMPLATE, n))
    template = copy.deepcopy(TEMPLATE)
    for policy in template["Resources"][name]["Properties"]["Policies"]:
        for statement in policy["Statement"]:
            actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            statement["Action"] = [a for a in actions if a != "dynamodb:PutItem"]
        policy["Statement"] = [s for s in policy["Statement"] if s["Action"]]
    with pytest.raises(MissingGrant, match="dynamodb:PutItem"):
        check(template, name)


def test_event_source_actions_are_sams_not_the_policies() -> None:
    name = _matching(lambda n: sam_event_actions(TEMPLATE, n))
    template = copy.deepcopy(TEMPLATE)
    extra = sorted(sam_event_actions(TEMPLATE, name))[0]
    _add_statement(template, name, extra)
    with pytest.raises(BroaderGrant, match=extra):
        check(template, name)


# -- the analysis itself, on small programs ---------------------------------------------------
def _derive(tmp_path: Path, files: dict[str, str]) -> Derivation:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return derive(Program([tmp_path]), "app")


CLIENT = 'import boto3\n\ndef client():\n    return boto3.client("dynamodb")\n'


def test_a_module_imported_for_a_constant_grants_nothing(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/db.py": CLIENT,
            "lib/orders.py": "from lib.db import client\nLIMIT = 3\n\ndef write():\n    client().put_item(TableName='t', Item={})\n",
            "app.py": "from lib.orders import LIMIT\n\ndef handler(event, context):\n    return LIMIT\n",
        },
    )
    assert found.actions() == set()


def test_dict_update_and_get_are_not_table_calls(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "app.py": CLIENT + "\ndef handler(event, context):\n    d = {}\n    d.update(a=1)\n    d.get('a')\n"
            "    client().update_item(TableName='t', Key={})\n",
        },
    )
    assert found.actions() == {"dynamodb:UpdateItem"}


def test_methods_reach_through_typed_attributes_and_client_parameters(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "store.py": CLIENT + "\ndef scan_all(ddb):\n    return ddb.scan(TableName='t')\n\n"
            "class Store:\n    @property\n    def dynamodb(self):\n        return client()\n\n"
            "    def get(self, key):\n        return self.dynamodb.get_item(TableName='t', Key=key)\n\n"
            "    def drop(self, key):\n        self.dynamodb.delete_item(TableName='t', Key=key)\n\n"
            "    def dump(self):\n        return scan_all(self.dynamodb)\n\n"
            "class Service:\n    def __init__(self):\n        self.store = Store()\n\n"
            "    def read(self, key):\n        return self.store.get(key)\n",
            "app.py": "from store import Service\n\nservice = Service()\n\ndef handler(event, context):\n    return service.read(event)\n",
        },
    )
    assert found.actions() == {"dynamodb:GetItem"}  # neither drop (never called) nor dump/scan


def test_transactions_need_the_actions_of_their_item_kinds(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "app.py": CLIENT + "\ndef handler(event, context):\n"
            "    items = [{'ConditionCheck': {'TableName': 't'}}, {'Put': {'TableName': 't'}}]\n"
            "    client().transact_write_items(TransactItems=items)\n"
            "    client().get_paginator('query')\n"
            "    boto3.client('sqs').send_message_batch(QueueUrl='q', Entries=[])\n",
        },
    )
    assert found.actions() == {"dynamodb:ConditionCheckItem", "dynamodb:PutItem", "dynamodb:Query", "sqs:SendMessage"}


def test_dynamic_imports_of_a_package_load_every_module_under_it(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "db.py": CLIENT,
            "plugins/__init__.py": "",
            "plugins/a.py": "from db import client\n\nclass A:\n    def run(self):\n        client().delete_item(TableName='t', Key={})\n\nPLUGIN = A\n",
            "app.py": "import importlib\n\ndef handler(event, context):\n    importlib.import_module(f'plugins.{event}').PLUGIN().run()\n",
        },
    )
    assert found.actions() == {"dynamodb:DeleteItem"}


def _all_units(program: Program) -> Iterator[tuple[Scope, ast.AST]]:
    for func in program.funcs.values():
        yield program.scope(func.key), func.node
    for module, tree in program.modules.items():
        for stmt in top_level(tree.body):
            if not isinstance(stmt, FunctionNode | ast.ClassDef):
                yield program.scope(module), stmt


@pytest.mark.parametrize("name", functions(TEMPLATE))
def test_every_operation_is_on_a_recognised_client(name: str) -> None:
    """The guard against under-deriving: a call named like a DynamoDB/SQS operation that the
    analysis cannot tie to a client (a new client helper, a boto3 resource) fails here."""
    code = program(tuple(code_roots(TEMPLATE, name)))
    names = {method for service in SERVICES for method in operations(service)}
    unknown = [
        f"{scope.func.key if scope.func else scope.module}: {ast.unparse(node)}"
        for scope, unit in _all_units(code)
        for node in ast.walk(unit)
        if isinstance(node, ast.Attribute) and node.attr in names and scope.client(node.value) is None
    ]
    assert not unknown, unknown
