"""tools/iam, on small programs and templates written here (not on the project's own code).

The analysis (derive.py, clients.py) on synthetic programs; the comparison with a template
(compare.py) and the command line (__main__.py) on a synthetic stack in tmp_path.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tools.iam.__main__ import main
from tools.iam.aws import AnalysisError
from tools.iam.clients import unrecognised
from tools.iam.compare import BroaderGrant, MissingGrant, Stack
from tools.iam.derive import Derivation, derive
from tools.iam.program import Program


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _derive(tmp_path: Path, files: dict[str, str]) -> Derivation:
    _write(tmp_path, files)
    return derive(Program([tmp_path]), "app")


CLIENT = 'import boto3\n\ndef client():\n    return boto3.client("dynamodb")\n'


# -- the analysis: reachability -----------------------------------------------------------------
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


def test_a_botocore_session_client_is_a_client(tmp_path: Path) -> None:
    """The layer builds its clients with botocore (``get_session().create_client("sqs")``)."""
    found = _derive(
        tmp_path,
        {
            "app.py": "import botocore.session\n\n_q = None\n\ndef queue():\n    global _q\n"
            "    _q = _q or botocore.session.get_session().create_client('sqs')\n    return _q\n\n"
            "def handler(event, context):\n    queue().send_message(QueueUrl='q', MessageBody='m')\n",
        },
    )
    assert found.actions() == {"sqs:SendMessage"}


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


def test_a_typed_call_reaches_the_override_of_a_live_subclass_only(tmp_path: Path) -> None:
    found = _derive(
        tmp_path,
        {
            "app.py": CLIENT
            + """
class Base:
    def save(self):
        client().put_item(TableName='t', Item={})

class Live(Base):
    def save(self):
        client().update_item(TableName='t', Key={})

class Dead(Base):
    def save(self):
        client().delete_item(TableName='t', Key={})

def run(obj: Base):
    Base.save(obj)

def handler(event, context):
    run(Live())
""",
        },
    )
    assert found.actions() == {"dynamodb:PutItem", "dynamodb:UpdateItem"}


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


def test_a_dynamic_import_it_cannot_read_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError, match="cannot tell which module"):
        _derive(tmp_path, {"app.py": "import importlib\n\ndef handler(event, context):\n    importlib.import_module(event['name'])\n"})


# -- the analysis: operations and transactions --------------------------------------------------
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


def test_transact_get_items_needs_get_item(tmp_path: Path) -> None:
    found = _derive(tmp_path, {"app.py": CLIENT + "\ndef handler(event, context):\n    client().transact_get_items(TransactItems=[])\n"})
    assert found.actions() == {"dynamodb:GetItem"}


def test_a_write_transaction_with_no_item_kind_built_is_an_error(tmp_path: Path) -> None:
    found = _derive(
        tmp_path, {"app.py": CLIENT + "\ndef handler(event, context):\n    client().transact_write_items(TransactItems=event)\n"}
    )
    with pytest.raises(AnalysisError, match="TransactWriteItems"):
        found.actions()


# -- the analysis: clients are found, whatever the modules and helpers are called ---------------
def test_client_factories_are_found_by_analysis_not_by_name(tmp_path: Path) -> None:
    """No module or helper name is known to the tool: a factory in any package, a Session's
    client, a property, a global assigned from a factory, a variable assigned from an ``or``."""
    found = _derive(
        tmp_path,
        {
            "shop/__init__.py": "",
            "shop/core/__init__.py": "",
            "shop/core/connect.py": "import boto3\n\ndef make(service):\n    return boto3.Session().client(service)\n\n"
            "def tables():\n    return boto3.Session().client('dynamodb')\n",
            "shop/deferral/__init__.py": "",
            "shop/deferral/outbox.py": """
                import boto3

                from shop.core.connect import tables

                QUEUE = boto3.client("sqs")
                DB = tables()

                class Outbox:
                    @property
                    def queue(self):
                        return QUEUE

                    def post(self, body):
                        self.queue.send_message(QueueUrl="q", MessageBody=body)

                def record(key, ddb=None):
                    db = ddb or DB
                    db.update_item(TableName="t", Key=key)
            """,
            "app.py": "from shop.deferral.outbox import Outbox, record\n\ndef handler(event, context):\n"
            "    Outbox().post(event)\n    record(event)\n",
        },
    )
    assert found.actions() == {"sqs:SendMessage", "dynamodb:UpdateItem"}


def test_an_operation_on_no_recognised_client_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "app.py": CLIENT + "\ndef handler(event, context):\n    client().get_item(TableName='t', Key={})\n"
            "    boto3.resource('dynamodb').Table('t').put_item(Item={})\n",
        },
    )
    assert unrecognised(Program([tmp_path])) == ["app:handler: boto3.resource('dynamodb').Table('t').put_item"]


# -- the comparison with a template, and the command line --------------------------------------
TEMPLATE = """\
Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Layers: [!Ref Lib]
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Queue:
    Type: AWS::SQS::Queue
  Lib:
    Type: AWS::Serverless::LayerVersion
    Properties: {ContentUri: lib/}
  WriterFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/writer/
      Handler: app.handler
      Policies:
        - Statement:
            - Effect: Allow
              Action: [dynamodb:GetItem, dynamodb:PutItem]
              Resource: !GetAtt Table.Arn
  WorkerFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/worker/
      Handler: app.handler
      Events:
        Queue: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}
      Policies:
        - Statement:
            - Effect: Allow
              Action: dynamodb:UpdateItem
              Resource: !GetAtt Table.Arn
"""
CODE = {
    "lib/shop/__init__.py": "",
    "lib/shop/items.py": CLIENT + "\ndef put(item):\n    client().put_item(TableName='t', Item=item)\n\n"
    "def get(key):\n    return client().get_item(TableName='t', Key=key)\n\n"
    "def bump(key):\n    client().update_item(TableName='t', Key=key)\n",
    "functions/writer/app.py": "from shop.items import get, put\n\ndef handler(event, context):\n    put(event)\n    return get(event)\n",
    "functions/worker/app.py": "from shop.items import bump\n\ndef handler(event, context):\n    for record in event['Records']:\n        bump(record)\n",
}


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    _write(tmp_path, {**CODE, "template.yaml": TEMPLATE})
    return Stack.load(tmp_path / "template.yaml")


def _add_statement(stack: Stack, name: str, action: str) -> None:
    stack.properties(name)["Policies"][0]["Statement"].append({"Effect": "Allow", "Action": action, "Resource": "*"})


def test_a_function_reaches_its_code_through_the_global_layers(stack: Stack) -> None:
    assert stack.code_roots("WriterFunction") == [stack.root / "functions/writer/", stack.root / "lib/"]
    assert stack.derived("WriterFunction") == {"dynamodb:GetItem", "dynamodb:PutItem"}
    assert stack.derived("WorkerFunction") == {"dynamodb:UpdateItem"}
    for name in stack.functions():
        stack.check(name)


@pytest.mark.parametrize(
    ("action", "match"),
    [
        ("dynamodb:DeleteItem", "dynamodb:DeleteItem"),  # the code never deletes
        ("dynamodb:ConditionCheckItem", "dynamodb:ConditionCheckItem"),  # no code builds ConditionCheck items
        ("dynamodb:*", r"dynamodb:\*"),
        ("*", r"'\*'"),
    ],
)
def test_a_broader_grant_fails(stack: Stack, action: str, match: str) -> None:
    _add_statement(stack, "WriterFunction", action)
    with pytest.raises(BroaderGrant, match=match):
        stack.check("WriterFunction")


def test_a_missing_grant_fails(stack: Stack) -> None:
    stack.properties("WriterFunction")["Policies"][0]["Statement"][0]["Action"] = ["dynamodb:GetItem"]
    with pytest.raises(MissingGrant, match="dynamodb:PutItem"):
        stack.check("WriterFunction")


def test_a_deny_or_another_service_grants_nothing_here(stack: Stack) -> None:
    stack.properties("WriterFunction")["Policies"][0]["Statement"] += [
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"},
    ]
    stack.check("WriterFunction")


def test_event_source_actions_are_sams_not_the_policies(stack: Stack) -> None:
    assert stack.event_actions("WorkerFunction") == {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    _add_statement(stack, "WorkerFunction", "sqs:ReceiveMessage")
    with pytest.raises(BroaderGrant, match="sqs:ReceiveMessage"):
        stack.check("WorkerFunction")


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        ("DynamoDBCrudPolicy", "cannot read the actions"),  # a SAM policy template: no actions to compare
        ({"Statement": [{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}]}, "NotAction"),
    ],
)
def test_policies_it_cannot_read_are_errors(stack: Stack, policy: object, match: str) -> None:
    stack.properties("WriterFunction")["Policies"].append(policy)
    with pytest.raises(AnalysisError, match=match):
        stack.granted("WriterFunction")
    assert not stack.verdict("WriterFunction").ok


def test_the_command_line_passes_a_matching_stack(stack: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--template", str(stack.root / "template.yaml")]) == 0
    out = capsys.readouterr().out
    assert "WorkerFunction" in out and "sqs DeleteMessage GetQueueAttributes ReceiveMessage" in out
    assert "2/2 functions" in out


def test_the_command_line_fails_on_a_missing_grant_and_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, {**CODE, "template.yaml": TEMPLATE.replace("[dynamodb:GetItem, dynamodb:PutItem]", "[dynamodb:GetItem]")})
    assert main(["--template", str(tmp_path / "template.yaml")]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("WriterFunction"))
    assert "FAIL" in row and "dynamodb PutItem" in row


def test_the_command_line_fails_when_a_function_derives_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = {**CODE, "functions/worker/app.py": "def handler(event, context):\n    return None\n"}
    _write(tmp_path, {**code, "template.yaml": TEMPLATE.replace("Action: dynamodb:UpdateItem", "Action: []")})
    assert main(["--template", str(tmp_path / "template.yaml")]) == 1
    assert "WorkerFunction: derives no action" in capsys.readouterr().out
