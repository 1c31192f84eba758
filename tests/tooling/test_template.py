"""template.yaml invariants: storage settings, logging, least-privilege IAM, routes vs events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.template import ROOT, load, read_stack

TEMPLATE = load()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = {k: r for k, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"}
BROAD_ACTIONS = {"dynamodb:*", "dynamodb:Scan", "*", "sqs:*"}


def test_table_is_on_demand_with_ttl_pitr_and_string_keys() -> None:
    table = next(r for r in RESOURCES.values() if r["Type"] == "AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    keys = {k["AttributeName"]: k["KeyType"] for k in props["KeySchema"]}
    assert keys == {"PK": "HASH", "SK": "RANGE"}
    assert table.get("DeletionPolicy") == "Retain"


def test_layer_is_built_by_sam_from_the_package() -> None:
    """`sam build` runs the package's Makefile (layers/counters/pyproject.toml is what it installs;
    tests/e2e/test_wheel.py runs that target)."""
    layers = {k: r for k, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::LayerVersion"}
    assert layers
    for logical_id, layer in layers.items():
        assert layer["Metadata"]["BuildMethod"] == "makefile"
        source = ROOT / layer["Properties"]["ContentUri"]
        assert (source / "pyproject.toml").is_file()
        assert f"\nbuild-{logical_id}:" in (source / "Makefile").read_text()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_has_a_log_group_with_retention(name: str) -> None:
    groups = [
        r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::Logs::LogGroup" and r["Properties"]["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{{name}}}"}
    ]
    assert len(groups) == 1, f"{name} needs exactly one log group"
    assert groups[0]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def _statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for policy in function["Properties"].get("Policies", []):
        assert isinstance(policy, dict), "managed/SAM policy templates are too broad here; list actions"
        assert not ({"DynamoDBCrudPolicy", "DynamoDBWritePolicy", "AmazonDynamoDBFullAccess"} & set(policy)), policy
        out += policy.get("Statement", [])
    return out


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_iam_is_action_level_and_scoped_to_the_table(name: str) -> None:
    statements = _statements(FUNCTIONS[name])
    assert statements, f"{name} has no policy"
    broad = BROAD_ACTIONS - ({"dynamodb:Scan"} if name == "ExpirySweeperFunction" else set())  # MRSC's expiry: below
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not broad & set(actions), (name, actions)
        assert all(not a.endswith("*") for a in actions), (name, actions)
        if statement["Effect"] == "Allow":
            assert statement["Resource"] != "*", name


def test_likes_function_may_only_touch_post_items_and_defer() -> None:
    posts, operations, queue = _statements(FUNCTIONS["LikesFunction"])
    assert sorted(posts["Action"]) == [  # an unlike keeps a tombstone: nothing under POST# is deleted
        "dynamodb:BatchGetItem",  # a grown post's likers listing reads users' lower lanes
        "dynamodb:ConditionCheckItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    ]
    assert posts["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["POST#*"]
    assert sorted(operations["Action"]) == ["dynamodb:DeleteItem", "dynamodb:PutItem"]
    assert operations["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["OP#*"]
    assert queue == {
        "Sid": "DeferToRetryQueue",
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": {"Fn::GetAtt": ["RetryQueue", "Arn"]},
    }


STREAM_READS = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
# This Region's stream: the single-Region table's, the global table's in the stack that declares it,
# or (the other Regions' stacks) the replica's, given as ReplicaStreamArn.
TABLE_STREAM = {
    "Fn::If": [
        "OwnsGlobalTable",
        {"Fn::GetAtt": ["CountersGlobalTable", "StreamArn"]},
        {"Fn::If": ["GlobalTable", {"Ref": "ReplicaStreamArn"}, {"Fn::GetAtt": ["CountersTable", "StreamArn"]}]},
    ]
}


@pytest.mark.parametrize(
    "name", sorted(n for n, f in FUNCTIONS.items() if any(e["Type"] == "DynamoDB" for e in f["Properties"].get("Events", {}).values()))
)
def test_stream_consumers_read_only_the_tables_stream(name: str) -> None:
    """SAM's AWSLambdaDynamoDBExecutionRole grants the stream reads on "*"; a Deny on everything but
    the table's stream takes them back."""
    events = [e for e in FUNCTIONS[name]["Properties"]["Events"].values() if e["Type"] == "DynamoDB"]
    assert {json.dumps(e["Properties"]["Stream"]) for e in events} == {json.dumps(TABLE_STREAM)}
    denies = [s for s in _statements(FUNCTIONS[name]) if s["Effect"] == "Deny"]
    assert [(sorted(s["Action"]), s["NotResource"]) for s in denies] == [(STREAM_READS, TABLE_STREAM)], name
    assert all("Resource" not in s and "Condition" not in s for s in denies), name


def _top_level_names(params: dict[str, Any]) -> set[str]:
    """The top-level attributes an UpdateItem names (what dynamodb:Attributes holds): its key and the
    first element of every path in its expressions."""
    import re

    names = params.get("ExpressionAttributeNames", {})
    found = set(params["Key"])
    for expression in (params["UpdateExpression"], params.get("ConditionExpression", "")):
        for path in re.findall(r"(?<![\w.#:])(#?\w+)(?:\.#?\w+)*", expression):
            if path.startswith("#"):
                found.add(names[path])
    return found


def test_like_aggregator_may_write_only_the_tally_and_checkpoint_attributes() -> None:
    from counters.primitives.aggregator import Change
    from counters.streams import like_aggregator

    (statement,) = [s for s in _statements(FUNCTIONS["LikeAggregatorFunction"]) if s.get("Sid") == "AggregateIntoPostMeta"]
    assert statement["Action"] == ["dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"]
    allowed = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]
    assert statement["Condition"]["StringEqualsIfExists"]["dynamodb:ReturnValues"] == ["NONE", "UPDATED_OLD", "UPDATED_NEW"]
    # What the aggregator writes (a change and a probe in two lanes), all of it inside the grant...
    changes = [Change("p1", "S0", "100", 1, 5), Change("p1", "S3", "200", 0, 6, probe="t")]
    used: set[str] = set()
    for region in ("", "eu-west-1"):  # one Region: META; a global table: the Region's own TALLY#<Region> item
        aggregator = like_aggregator("t", region=region)
        runs, net, counted, lag = aggregator._runs(changes)
        params = aggregator.store.update("p1", runs, net, counted, lag).params()
        assert "ReturnValues" not in params
        used |= _top_level_names(params)
        if not region:  # past 64 lanes: a lane group's item, made in a transaction that checks the post
            used |= _top_level_names(aggregator.store.update("p1", runs, net, counted, lag, group=1).params())
            check, make = aggregator.store.group_creation("p1", 1).items()
            used |= _names_in(check["ConditionCheck"], "ConditionExpression") | _names_in(make["Update"], "UpdateExpression")
    assert used <= set(allowed), used - set(allowed)
    # ...and the grant no wider than that (a post's other attributes stay out of reach).
    assert set(allowed) == used, set(allowed) - used


def _names_in(params: dict[str, Any], *expressions: str) -> set[str]:
    """The top-level attributes a request's expressions name (placeholders resolved), and its key's."""
    import re

    names = params.get("ExpressionAttributeNames", {})
    found = set(params.get("Key", {}))
    for expression in expressions:
        for path in re.findall(r"(?<![\w.#:])(#?\w+)(?:\.#?\w+)*", params.get(expression, "")):
            if path.startswith("#"):  # every attribute name goes through a placeholder (STYLE 4)
                found.add(names[path])
    return found


def test_like_aggregator_merges_only_like_items_attributes_and_reads_only_a_posts_spread() -> None:
    """The merge of a user's duplicate like items (counters.services.likes.merging) runs in the
    aggregator under its own statements: like items under spread keys only (never META: a post id
    holds no '#'), their own attributes only; on META, the spread alone, read."""
    from counters.core.ids import ID_RE
    from counters.store.like_merges import LikeItem, LikeMergeStore
    from counters.store.toggles import Stamp, StateItem

    statements = {s.get("Sid"): s for s in _statements(FUNCTIONS["LikeAggregatorFunction"]) if s["Effect"] == "Allow"}
    assert set(statements) == {"AggregateIntoPostMeta", "ReadPostSpread", "MergeLikeItems", "DeferExaminations"}
    assert statements["DeferExaminations"]["Action"] == "sqs:SendMessage"
    assert statements["DeferExaminations"]["Resource"] == {"Fn::GetAtt": ["RetryQueue", "Arn"]}
    spread, merge = statements["ReadPostSpread"], statements["MergeLikeItems"]
    assert spread["Action"] == ["dynamodb:GetItem"]
    assert sorted(merge["Action"]) == ["dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    assert merge["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["POST#*#S*"]
    assert ID_RE.match("p#S1") is None  # so POST#<id> (META) never matches POST#*#S*
    assert merge["Condition"]["StringEqualsIfExists"]["dynamodb:ReturnValues"] == ["NONE"]
    store = LikeMergeStore("t")
    get = _names_in(store.spread_get("p1").params(), "ProjectionExpression")
    assert get == set(spread["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"])
    key = {"PK": "POST#p1#S3", "SK": "LIKE#USER#u"}
    (ask,) = store.batch_get([key]).params([{"PK": {"S": key["PK"]}, "SK": {"S": key["SK"]}}])["RequestItems"].values()
    used = _names_in(ask, "ProjectionExpression") | {"PK", "SK"}
    on = LikeItem(key, StateItem(True, Stamp(5, "r5"), "r5"), liked_at=1)
    off = LikeItem({**key, "PK": "POST#p1#S11"}, StateItem(False, Stamp(6, "r6"), "r6"), expires_at=9)
    lane = {**key, "PK": "POST#p1#S27"}  # the user's lane: a pointer put there, or re-pointed
    pointed = LikeItem(lane, StateItem(False, None, None, points_to=11))
    for latest in (on, off):
        for pointer in (None, (lane, None), (lane, pointed), (off.key, off)):
            for action in store.transaction(on, latest, [off], -1, pointer).items():
                ((kind, body),) = action.items()
                assert "ReturnValues" not in body
                used |= _names_in(body, "UpdateExpression", "ConditionExpression") | set(body.get("Item", {}))
    assert used == set(merge["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"])


@pytest.mark.parametrize("timeout", ["10", "60", "900"])
def test_every_sqs_consumer_stays_inside_its_queues_visibility_whatever_function_timeout_is_set(timeout: str) -> None:
    """``FunctionTimeoutSeconds`` (the Globals timeout, raised by sam local) never reaches an SQS
    consumer: its queue's visibility stays at least 6x its timeout (Lambda's advice for SQS sources)."""
    stack = read_stack("t", params={"FunctionTimeoutSeconds": timeout})
    assert stack.functions["OrdersFunction"].timeout == int(timeout)  # the parameter is the Globals timeout
    consumers = {name: fn for name, fn in FUNCTIONS.items() for e in (fn["Properties"].get("Events") or {}).values() if e["Type"] == "SQS"}
    assert consumers
    for name, fn in consumers.items():
        for event in fn["Properties"]["Events"].values():
            queue = RESOURCES[event["Properties"]["Queue"]["Fn::GetAtt"][0]]["Properties"]
            assert queue["VisibilityTimeout"] >= 6 * stack.functions[name].timeout, name


def test_retry_queue_redrive_stays_inside_the_client_request_token_window() -> None:
    queue = RESOURCES["RetryQueue"]["Properties"]
    worker = FUNCTIONS["RetryWorkerFunction"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * worker["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 5
    assert queue["RedrivePolicy"]["maxReceiveCount"] * queue["VisibilityTimeout"] < 600  # 10-minute CRT window
    assert worker["Events"]["Retries"]["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    alarm = RESOURCES["RetryDLQDepthAlarm"]["Properties"]
    assert (alarm["MetricName"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "ApproximateNumberOfMessagesVisible",
        1,
        "GreaterThanOrEqualToThreshold",
    )


def test_every_api_event_is_on_the_one_rest_api() -> None:
    for name, function in FUNCTIONS.items():
        for event in (function["Properties"].get("Events") or {}).values():
            if event["Type"] == "Api":
                assert event["Properties"]["RestApiId"] == {"Ref": "TallyApi"}, name


def test_every_sample_api_event_matches_a_route() -> None:
    routes = {(r.method, r.path) for r in read_stack("unused").routes}
    events = [json.loads(p.read_text()) for p in sorted((ROOT / "events").rglob("*.json"))]
    api_events = [e for e in events if "httpMethod" in e]
    assert api_events
    for event in api_events:
        assert (event["httpMethod"], event["resource"]) in routes, event["resource"]
        assert event["requestContext"]["resourcePath"] == event["resource"]


def test_auth_mode_is_a_parameter_and_prod_refuses_none() -> None:
    params = TEMPLATE["Parameters"]
    assert params["AuthMode"]["AllowedValues"] == ["NONE", "COGNITO"] and params["AuthMode"]["Default"] == "NONE"
    rule = TEMPLATE["Rules"]["ProdNeedsAuthorization"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "Stage"}, "prod"]}
    assert rule["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AuthMode"}, "NONE"]}]}
    assert TEMPLATE["Transform"] == ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"]  # resolves the Auth Fn::If
    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert env["AUTH_MODE"] == {"Ref": "AuthMode"} and env["ADMIN_GROUP"] == {"Ref": "AdminGroup"}


def test_cognito_mode_puts_every_route_behind_the_user_pool() -> None:
    """The translated CloudFormation for both modes is checked by scripts/check_auth_modes.py
    (make validate, with sam-cli's translator); here, what the local API emulates."""
    assert read_stack("t").authorizer_header is None
    assert read_stack("t", params={"AuthMode": "COGNITO"}).authorizer_header == "Authorization"
    auth = RESOURCES["TallyApi"]["Properties"]["Auth"]["Fn::If"]
    assert auth[0] == "UseCognito" and auth[2] == {"Ref": "AWS::NoValue"}
    assert auth[1]["DefaultAuthorizer"] == "CognitoAuthorizer"
    for name in ("UserPool", "UserPoolClient", "AdminUserGroup"):
        assert RESOURCES[name]["Condition"] == "CreateUserPool"


def test_endpoint_variables_are_declared_empty_and_never_override_a_local_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sam local --env-vars` can only set variables the template declares; in AWS they stay
    empty, which botocore treats as unset. Locally an empty template value must not replace
    the endpoint the devstack/tests set (a worker would then call real AWS)."""
    import boto3

    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert env["AWS_ENDPOINT_URL_DYNAMODB"] == "" and env["AWS_ENDPOINT_URL_SQS"] == ""
    for fn in read_stack("t").functions.values():
        assert "AWS_ENDPOINT_URL_DYNAMODB" not in fn.environment and "AWS_ENDPOINT_URL_SQS" not in fn.environment, fn.name
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    session = boto3.session.Session(region_name="us-east-1")
    assert session.client("dynamodb").meta.endpoint_url == "https://dynamodb.us-east-1.amazonaws.com"
    assert session.client("sqs").meta.endpoint_url == "https://sqs.us-east-1.amazonaws.com"


def test_deployments_are_canary_in_prod_all_at_once_in_dev_and_roll_back_on_alarms() -> None:
    glob = TEMPLATE["Globals"]["Function"]
    assert glob["AutoPublishAlias"] == "live"
    preference = glob["DeploymentPreference"]
    assert preference["Type"] == {"Fn::If": ["IsProd", "Canary10Percent5Minutes", "AllAtOnce"]}
    alarms = {a["Ref"] for a in preference["Alarms"]}
    assert {"Api5xxAlarm", "FunctionErrorsAlarm"} <= alarms and alarms <= {
        k for k, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    metrics = [m["Fn::If"][1] if "Fn::If" in m else m for m in RESOURCES["FunctionErrorsAlarm"]["Properties"]["Metrics"]]
    watched = {m["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"] for m in metrics if "MetricStat" in m}
    assert watched == set(FUNCTIONS)  # a new function's errors must roll its canary back too


def test_tracing_and_reserved_concurrency_are_parameters() -> None:
    assert TEMPLATE["Parameters"]["Tracing"]["AllowedValues"] == ["Active", "PassThrough"]
    assert TEMPLATE["Parameters"]["TracingProvider"]["AllowedValues"] == ["xray", "otel", "none"]
    assert TEMPLATE["Parameters"]["TracingProvider"]["Default"] == "xray"  # today's behaviour unless asked
    assert RESOURCES["TallyApi"]["Properties"]["TracingEnabled"] == {"Fn::If": ["TracingActive", True, False]}
    for name, function in FUNCTIONS.items():
        reserved = function["Properties"].get("ReservedConcurrentExecutions")
        if reserved is not None:  # never unconditional: a new account (limit 10) refuses any reservation
            assert reserved["Fn::If"][0] == "ReservesConcurrency" and reserved["Fn::If"][2] == {"Ref": "AWS::NoValue"}, name


def test_scheduled_compaction_retries_once_then_goes_to_an_alarmed_queue() -> None:
    config = FUNCTIONS["LedgerCompactionFunction"]["Properties"]["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] <= 2
    failure = config["DestinationConfig"]["OnFailure"]
    assert failure["Type"] == "SQS" and failure["Destination"] == {"Fn::GetAtt": ["CompactionDLQ", "Arn"]}
    alarm = RESOURCES["CompactionDLQDepthAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["CompactionDLQ", "QueueName"]}


def test_mrsc_expiry_sweeper_is_scheduled_in_mrsc_stacks_only_and_deletes_only_expiring_families() -> None:
    """MRSC has no TTL: the sweeper exists exactly when GlobalTableMode is mrsc, runs on a schedule,
    may Scan only this table, delete only the families that carry expiresAt (as the code declares
    them) and touch only its checkpoint otherwise."""
    from counters.store.expiry import CHECKPOINT_KEY, EXPIRING

    sweeper = FUNCTIONS["ExpirySweeperFunction"]
    assert TEMPLATE["Conditions"]["StrongConsistency"] == {"Fn::Equals": [{"Ref": "GlobalTableMode"}, "mrsc"]}
    assert sweeper["Condition"] == "StrongConsistency" and RESOURCES["ExpirySweeperLogGroup"]["Condition"] == "StrongConsistency"
    assert [e["Type"] for e in sweeper["Properties"]["Events"].values()] == ["Schedule"]
    by_sid = {s["Sid"]: s for s in _statements(sweeper)}
    assert by_sid["FindExpiredItems"]["Action"] == "dynamodb:Scan" and "Condition" not in by_sid["FindExpiredItems"]
    assert "${GlobalTableName}" in by_sid["FindExpiredItems"]["Resource"]["Fn::Sub"]
    leading = by_sid["DeleteExpiredItems"]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert leading == [f"{prefix}*" for prefix in EXPIRING]
    assert by_sid["SweepCheckpoint"]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [CHECKPOINT_KEY["PK"]]
    others = [
        n for n, f in FUNCTIONS.items() if n != "ExpirySweeperFunction" for st in _statements(f) if "dynamodb:Scan" in str(st["Action"])
    ]
    assert not others, others


@pytest.mark.parametrize(("name", "threshold_ms"), [("ReplicationLatencyAlarm", 60_000), ("ReplicaStalledAlarm", 900_000)])
def test_a_global_stack_alarms_on_replication_latency_to_every_other_replica(name: str, threshold_ms: int) -> None:
    """Every global-table stack watches ReplicationLatency from its Region to each replica Region (the
    2 or 3 of ReplicaRegions; its own has no data), on the global table, with the stack's alarm topic."""
    alarm = RESOURCES[name]
    assert alarm["Condition"] == "GlobalTable"
    props = alarm["Properties"]
    stats = [m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m]
    assert {s["Metric"]["MetricName"] for s in stats} == {"ReplicationLatency"} and {s["Stat"] for s in stats} == {"Maximum"}
    dims = [{d["Name"]: d["Value"] for d in s["Metric"]["Dimensions"]} for s in stats]
    assert all(d["TableName"] == {"Ref": "GlobalTableName"} for d in dims)
    receiving = [d["ReceivingRegion"] for d in dims]
    assert receiving[:2] == [{"Fn::Select": [i, {"Ref": "ReplicaRegions"}]} for i in range(2)]
    assert receiving[2] == {"Fn::If": ["HasThirdReplicaRegion", {"Fn::Select": [2, {"Ref": "ReplicaRegions"}]}, "none"]}
    (expression,) = [m for m in props["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "MAX([r0, r1, r2])" and expression["ReturnData"] is True
    assert props["Threshold"] == threshold_ms and props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["AlarmActions"] == {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
    assert "runbook" in alarm_description(props)


def alarm_description(props: dict[str, Any]) -> str:
    return " ".join(str(props["AlarmDescription"]).split())


def test_api_access_logs_go_to_a_log_group_with_retention() -> None:
    setting = RESOURCES["TallyApi"]["Properties"]["AccessLogSetting"]
    assert setting["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    assert json.loads(setting["Format"].replace("\n", ""))["status"] == "$context.status"
    assert RESOURCES["ApiAccessLogGroup"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_every_checkov_skip_says_why() -> None:
    skips = [(k, s) for k, r in RESOURCES.items() for s in (r.get("Metadata") or {}).get("checkov", {}).get("skip", [])]
    assert skips
    for name, skip in skips:
        assert skip["id"].startswith("CKV_") and len(skip.get("comment", "")) >= 30, (name, skip)


def _recorded_metric_names() -> set[str]:
    """Metric names the handlers emit: record(metrics, "<Op>", ...) gives <Op>.<outcome>."""
    import re

    from counters.core.outcome import Outcome

    names: set[str] = set()
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        text = app.read_text()
        for op in re.findall(r'record\(metrics, "(\w+)"', text):
            names |= {f"{op}.{o.value}" for o in Outcome}
        names |= set(re.findall(r'add_metric\(name="([\w.]+)"', text))
    return names


def test_dashboard_shows_every_metric_the_functions_emit() -> None:
    import re

    body, variables = RESOURCES["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    for ref in re.findall(r"\$\{([^}]+)\}", body):  # every substitution names a parameter, resource, variable or pseudo parameter
        assert ref.split(".")[0] in RESOURCES or ref in TEMPLATE["Parameters"] or ref in variables or ref.startswith("AWS::"), ref
    widgets = json.loads(re.sub(r"\$\{[^}]+\}", "x", body))["widgets"]
    shown = {m[1] for w in widgets for m in w["properties"].get("metrics", []) if m[0] == "Tally"}
    emitted = _recorded_metric_names() | {"ConsumedWCU", "ConsumedRCU", "Retries", "Deferred"}  # Deferred: counters.http.resolver
    assert emitted <= shown, emitted - shown
    assert {f"Replay.{s}" for s in ("applied", "duplicate", "rejected", "redelivered", "poison")} <= shown
    assert "Deferred" in shown  # the 202s, from the metric (not counted from log lines)


def test_deploy_page_lists_every_parameter_and_output() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    for name in [*TEMPLATE["Parameters"], *TEMPLATE["Outputs"]]:
        assert f"`{name}`" in page, f"docs/deploy.md does not mention {name}"


def test_env_local_names_every_queue_a_function_is_given() -> None:
    """`sam local invoke --env-vars events/env.local.json`: a queue URL the template gives a
    function (RETRY_DLQ_URL: the retry worker's poison path) must point at the emulator, or the
    function sends to the unresolved logical id and the message never lands."""
    local = json.loads((ROOT / "events" / "env.local.json").read_text())["Parameters"]
    resources = TEMPLATE["Resources"]
    queues = {name for name, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    functions = [TEMPLATE["Globals"]["Function"]] + [
        r["Properties"] for r in resources.values() if r["Type"] == "AWS::Serverless::Function"
    ]
    wanted = {
        var: value["Ref"]
        for properties in functions
        for var, value in properties.get("Environment", {}).get("Variables", {}).items()
        if isinstance(value, dict) and value.get("Ref") in queues
    }
    assert {"RETRY_QUEUE_URL", "RETRY_DLQ_URL"} <= set(wanted)
    for var, queue in wanted.items():
        assert local.get(var, "").endswith(f"/{local['TABLE_NAME']}-{queue}"), (var, local.get(var))


ADOT = "arn:aws:lambda:us-east-1:615299751070:layer:AWSOpenTelemetryDistroPython:11"


@pytest.mark.parametrize(
    ("params", "tracing", "variables", "extra_layers"),
    [
        ({}, "PassThrough", {"TALLY_TRACING": "xray"}, []),  # the default: X-Ray as the Tracing parameter says
        ({"Tracing": "Active"}, "Active", {"TALLY_TRACING": "xray"}, []),
        ({"TracingProvider": "none", "Tracing": "Active"}, "PassThrough", {"TALLY_TRACING": "none"}, []),
        (
            {"TracingProvider": "otel", "AdotLayerArn": ADOT},
            "Active",  # the ADOT layer sends its spans through Lambda's X-Ray tracing
            {"TALLY_TRACING": "otel", "AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument", "OTEL_SERVICE_NAME": "tally"},
            [ADOT],
        ),
    ],
)
def test_tracing_provider_sets_every_function_up(
    params: dict[str, str], tracing: str, variables: dict[str, str], extra_layers: list[str]
) -> None:
    """Globals carry it all (no function sets its own Tracing, Layers or these variables), resolved
    as CloudFormation would with these parameters."""
    from devstack.template import Resolver

    resolve = Resolver(TEMPLATE, {"CountersLayer": "CountersLayer"}, params)
    assert not resolve.refusals(TEMPLATE)
    glob = TEMPLATE["Globals"]["Function"]
    assert resolve(glob["Tracing"]) == tracing
    assert resolve(glob["Layers"]) == ["CountersLayer", *extra_layers]
    env = resolve(glob["Environment"]["Variables"])
    otel = {"TALLY_TRACING", "AWS_LAMBDA_EXEC_WRAPPER", "OTEL_SERVICE_NAME"}
    assert {k: v for k, v in env.items() if k in otel} == variables
    for name, function in FUNCTIONS.items():
        props = function["Properties"]
        assert "Tracing" not in props and "Layers" not in props, name
        assert not otel & set((props.get("Environment") or {}).get("Variables", {})), name


@pytest.mark.parametrize(
    "params",
    [{"TracingProvider": "otel"}, {"TracingProvider": "xray", "AdotLayerArn": ADOT}, {"TracingProvider": "none", "AdotLayerArn": ADOT}],
)
def test_the_adot_layer_comes_with_otel_and_only_with_it(params: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="AdotLayerArn"):
        read_stack("t", params)
