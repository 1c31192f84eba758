"""Orders without DynamoDB Local: request validation (4xx, nothing written), the template's
wiring (mode parameter, scoped IAM, stream filter) and the pointer function's batch logic."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from counters.core import client as dynamo
from counters.core.outcome import Outcome, Result
from counters.core.policy import ONE_REGION_POLICY, RegionPolicy
from counters.core.regions import GlobalTableMode
from counters.core.settings import SettingsError
from counters.services.orders import Orders, OrderSettings
from devstack.dynamodb_local import create_table
from devstack.runtime import LambdaContext
from devstack.streams import matches, subscriptions
from devstack.template import load, read_stack
from tests.conftest import api_event, invoke, load_event


@pytest.fixture
def moto_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)  # moto, not DynamoDB Local
    with mock_aws():
        dynamo.reset_client()
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(ddb, read_stack("orders-unit"))
        yield ddb, "orders-unit"
    dynamo.reset_client()


@pytest.fixture
def orders_app(moto_table: tuple[Any, str], load_function: Any) -> Any:
    return load_function("OrdersFunction", moto_table[1])


BODY = {"customerId": "c1", "items": [{"sku": "sku-1", "quantity": 2}]}
KEY = {"Idempotency-Key": "k-1"}

INVALID = [
    ("POST", "/orders", BODY, {}, "idempotency_key_missing"),  # no Idempotency-Key (docs/retries.md#idempotency-keys)
    ("POST", "/orders", BODY, {"Idempotency-Key": "a#b"}, "validation_error"),
    ("POST", "/orders", BODY, {"Idempotency-Key": "k" * 65}, "validation_error"),
    ("POST", "/orders", "{not json", KEY, "invalid_json"),
    ("POST", "/orders", {"items": BODY["items"]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": []}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1"}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": 0}]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": -3}]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": "1"}]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": 1.5}]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s#1", "quantity": 1}]}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": "c1", "items": [{"sku": "s", "quantity": 1, "price": 3}]}, KEY, "validation_error"),
    ("POST", "/orders", {**BODY, "orderId": 7}, KEY, "validation_error"),
    ("POST", "/orders", {"customerId": 5, "items": BODY["items"]}, KEY, "validation_error"),
    ("POST", "/orders", ["c1", "sku-1"], KEY, "validation_error"),
    ("GET", "/orders/0", None, {}, "validation_error"),
    ("GET", "/orders/-1", None, {}, "validation_error"),
    ("GET", "/orders/abc", None, {}, "validation_error"),
    ("GET", "/orders/1.5", None, {}, "validation_error"),
    ("GET", "/orders/99999999999999999999", None, {}, "validation_error"),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "code"), INVALID)
def test_invalid_requests_are_400_and_write_nothing(
    method: str, path: str, body: Any, headers: dict[str, str], code: str, orders_app: Any, moto_table: tuple[Any, str]
) -> None:
    ddb, table = moto_table
    status, answer = invoke(orders_app, api_event(method, path, body, headers=headers))
    assert (status, answer["error"]) == (400, code), answer
    assert "Traceback" not in answer["message"]
    assert ddb.scan(TableName=table)["Count"] == 0  # nothing was written, not even a sequence value


def test_idempotency_header_is_case_insensitive_and_latest_is_a_literal_route(orders_app: Any, moto_table: tuple[Any, str]) -> None:
    status, body = invoke(orders_app, api_event("POST", "/orders", BODY, headers={"idempotency-key": "k-1"}))
    assert status == 201 and body["orderId"] == 1
    assert invoke(orders_app, api_event("GET", "/orders/latest")) == (200, {"orderId": None})  # not /orders/{orderId}


def test_unknown_order_is_404(orders_app: Any) -> None:
    status, body = invoke(orders_app, api_event("GET", "/orders/42"))
    assert (status, body["error"]) == (404, "not_found")


# ---------------------------------------------------------------------------- template wiring
def test_sequence_mode_parameter_reaches_the_function() -> None:
    assert read_stack("t").functions["OrdersFunction"].environment["SEQUENCE_MODE"] == "fast"  # the default
    assert read_stack("t", params={"SequenceMode": "gapless"}).functions["OrdersFunction"].environment["SEQUENCE_MODE"] == "gapless"
    assert load()["Parameters"]["SequenceMode"]["AllowedValues"] == ["fast", "gapless"]


def test_a_bad_sequence_mode_fails_the_first_invocation_loudly(load_function: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is read at import; the first invocation parses the settings and answers a bare 500."""
    fn = read_stack("t", params={"SequenceMode": "gapy"}).functions["OrdersFunction"]
    assert fn.environment["SEQUENCE_MODE"] == "gapy"
    with pytest.raises(SettingsError, match="SEQUENCE_MODE='gapy'"):
        OrderSettings.from_env(fn.environment)
    orders = load_function("OrdersFunction", "t")
    monkeypatch.setenv("SEQUENCE_MODE", "gapy")
    orders.function.configure(None)  # the next invocation reads the environment
    status, body = invoke(orders, api_event("GET", "/orders/latest"))
    assert (status, body["error"]) == (500, "internal_error") and "gapy" not in str(body)


def _statements(function: str) -> list[dict[str, Any]]:
    policies = load()["Resources"][function]["Properties"]["Policies"]
    return [s for p in policies for s in p["Statement"]]


def test_iam_is_action_level_and_scoped_to_key_prefixes() -> None:
    pointer = [s for s in _statements("OrderPointerFunction") if s["Effect"] == "Allow"]  # its Deny: the stream (test_template)
    assert [(s["Action"], s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]) for s in pointer] == [
        (["dynamodb:UpdateItem"], ["POINTER#LAST_ORDER", "POINTER#LAST_ORDER#*"])  # the one item, or this Region's (MREC)
    ]
    statements = _statements("OrdersFunction")
    orders = {tuple(s["Action"]): s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] for s in statements if "Condition" in s}
    assert orders == {
        ("dynamodb:GetItem",): ["ORDER#*", "ORDERKEY#*", "SEQ#ORDER", "SEQ#ORDER#*", "POINTER#LAST_ORDER", "POINTER#LAST_ORDER#*"],
        ("dynamodb:UpdateItem",): ["SEQ#ORDER", "SEQ#ORDER#*"],  # the one sequence, or this Region's (MREC fast ids)
        ("dynamodb:PutItem",): ["ORDER#*", "ORDERKEY#*"],
        ("dynamodb:PutItem", "dynamodb:DeleteItem"): ["OP#*"],  # operation records of deferred requests
    }
    (queue,) = [s for s in statements if "Condition" not in s]
    assert (queue["Action"], queue["Resource"]) == ("sqs:SendMessage", {"Fn::GetAtt": ["RetryQueue", "Arn"]})


def test_the_stream_event_is_filtered_to_order_inserts() -> None:
    (sub,) = [s for s in subscriptions() if s.function == "OrderPointerFunction"]
    assert sub.report_failures and sub.batch_size == 100
    (pattern,) = sub.filters

    def record(name: str, pk: str) -> dict[str, Any]:
        return {"eventName": name, "dynamodb": {"Keys": {"PK": {"S": pk}, "SK": {"S": "META"}}}}

    assert matches(pattern, record("INSERT", "ORDER#12"))
    assert not matches(pattern, record("MODIFY", "ORDER#12"))
    assert not matches(pattern, record("REMOVE", "ORDER#12"))
    assert not matches(pattern, record("INSERT", "ORDERKEY#k1"))
    assert not matches(pattern, record("INSERT", "SEQ#ORDER"))
    assert not matches(pattern, record("INSERT", "POINTER#LAST_ORDER"))
    assert read_stack("t").table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


# ---------------------------------------------------------------------------- the pointer function
class FakePointer:
    """Records advances; answers ``contention`` for the values in ``busy``; ``policy``: the real
    pointer's (the function reads which orders its pointer follows from it)."""

    def __init__(self, busy: set[int] | None = None, policy: RegionPolicy = ONE_REGION_POLICY) -> None:
        self.calls: list[int] = []
        self.busy = busy or set()
        self.policy = policy

    def advance(self, value: int) -> Result:
        self.calls.append(value)
        return Result(Outcome.CONTENTION if value in self.busy else Outcome.APPLIED, value=value)


def stream_event(*records: tuple[str, str]) -> dict[str, Any]:
    template = load_event("order_pointer/order_inserts.json")["Records"][0]
    out = []
    for i, (name, pk) in enumerate(records):
        record = json.loads(json.dumps(template))
        record["eventName"] = name
        record["dynamodb"]["Keys"]["PK"] = {"S": pk}
        record["dynamodb"]["SequenceNumber"] = str(1000 + i)
        out.append(record)
    return {"Records": out}


@pytest.fixture
def pointer_app(load_function: Any) -> Any:
    return load_function("OrderPointerFunction", "unused")


def test_one_conditional_write_per_batch_for_its_greatest_order(pointer_app: Any) -> None:
    fake = FakePointer()
    pointer_app.function.configure(pointer_app.function.settings, fake)
    event = stream_event(
        ("INSERT", "ORDER#3"), ("INSERT", "ORDER#9"), ("MODIFY", "SEQ#ORDER"), ("INSERT", "ORDER#5"), ("INSERT", "ORDERKEY#x")
    )
    assert pointer_app.lambda_handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert fake.calls == [9]
    assert pointer_app.lambda_handler(stream_event(("MODIFY", "ORDER#4")), LambdaContext()) == {"batchItemFailures": []}
    assert fake.calls == [9]  # no insert, no write


def test_a_failed_advance_reports_the_greatest_record_so_the_shard_restarts_there(pointer_app: Any) -> None:
    pointer_app.function.configure(pointer_app.function.settings, FakePointer(busy={9}))
    event = stream_event(("INSERT", "ORDER#3"), ("INSERT", "ORDER#9"), ("INSERT", "ORDER#5"))
    assert pointer_app.lambda_handler(event, LambdaContext()) == {"batchItemFailures": [{"itemIdentifier": "1001"}]}


def test_on_mrec_the_pointer_function_follows_only_orders_placed_in_its_region(pointer_app: Any) -> None:
    """Each Region's stream also carries the orders replicated into it (AWS: global tables). On MREC
    this Region's pointer item counts only its own Region's orders (``writerRegion``); the other
    Region's function counts the rest in its own item, and a read takes the max. Counting a
    replicated order here would make this Region's item a second writer of facts it does not own."""
    settings = dataclasses.replace(
        pointer_app.function.settings, global_table_mode=GlobalTableMode.MREC, region="eu-west-1", table_regions="us-east-1,eu-west-1"
    )
    fake = FakePointer(policy=pointer_app.pointer(settings).policy)  # the policy the function builds from its settings
    pointer_app.function.configure(settings, fake)
    event = stream_event(("INSERT", "ORDER#3"), ("INSERT", "ORDER#10"), ("INSERT", "ORDER#5"), ("INSERT", "ORDER#12"))
    for record, region in zip(event["Records"], ["eu-west-1", "us-east-1", "eu-west-1", None], strict=True):
        if region:
            record["dynamodb"]["NewImage"]["writerRegion"] = {"S": region}
    assert pointer_app.lambda_handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert fake.calls == [5]  # 10 was replicated from us-east-1; 12 names no Region: not this Region's
    one_region = dataclasses.replace(settings, global_table_mode=GlobalTableMode.NONE)
    fake = FakePointer(policy=pointer_app.pointer(one_region).policy)
    pointer_app.function.configure(one_region, fake)
    pointer_app.lambda_handler(event, LambdaContext())
    assert fake.calls == [12]  # one Region: every order counts (the batch's greatest, 12)


def test_gapless_outside_its_home_region_is_a_409_naming_the_home_region(load_function: Any) -> None:
    """RegionSettings reach the orders function: a gapless order in a Region that is not the MREC
    home Region is refused before anything is read or written (no table is touched here)."""
    orders = load_function("OrdersFunction", "unused")
    settings = dataclasses.replace(
        orders.function.settings,
        sequence_mode="gapless",
        global_table_mode=GlobalTableMode.MREC,
        region="us-east-1",
        table_regions="eu-west-1,us-east-1",
        home_region="eu-west-1",
    )
    orders.function.configure(settings, Orders.from_settings(settings))
    status, body = invoke(
        orders,
        api_event("POST", "/orders", {"customerId": "c1", "items": [{"sku": "a", "quantity": 1}]}, headers={"Idempotency-Key": "k1"}),
    )
    assert (status, body["error"]) == (409, "unsupported_in_region_mode") and "eu-west-1" in body["message"]
