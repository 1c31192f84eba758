"""Powertools packages registered without their ``__init__``: what a function does not use stays unloaded.

``aws_lambda_powertools/utilities/data_classes/__init__.py`` imports every event Powertools knows
(S3, Kinesis, Kafka, Cognito, CloudWatch... about 40 modules, a tenth of ``import boto3``), and
importing any one event module (the REST resolver's proxy events, the batch utility's SQS and
stream records) runs it first. ``counters.runtime`` registers that package with
[`light_package`][counters.runtime.light.light_package] when it is imported, so a function's own
``app.py`` must take Powertools' batch utility from [`counters.runtime.batch`][counters.runtime.batch]
(which imports it after the registration), not import it before the layer.
``counters.http.powertools`` registers Powertools' event handler package the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"
"""Powertools' event data classes, registered without their ``__init__`` too."""
_EVENTS = {
    "alb_event": "ALBEvent",
    "api_gateway_proxy_event": "APIGatewayProxyEvent APIGatewayProxyEventV2",
    "api_gateway_websocket_event": "APIGatewayWebSocketEvent",
    "appsync_resolver_event": "AppSyncResolverEvent",
    "appsync_resolver_events_event": "AppSyncResolverEventsEvent",
    "aws_config_rule_event": "AWSConfigRuleEvent",
    "bedrock_agent_event": "BedrockAgentEvent",
    "bedrock_agent_function_event": "BedrockAgentFunctionEvent",
    "cloud_watch_alarm_event": "CloudWatchAlarmConfiguration CloudWatchAlarmData CloudWatchAlarmEvent CloudWatchAlarmMetric "
    "CloudWatchAlarmMetricStat CloudWatchAlarmState",
    "cloud_watch_custom_widget_event": "CloudWatchDashboardCustomWidgetEvent",
    "cloud_watch_logs_event": "CloudWatchLogsEvent",
    "cloudformation_custom_resource_event": "CloudFormationCustomResourceEvent",
    "code_deploy_lifecycle_hook_event": "CodeDeployLifecycleHookEvent",
    "code_pipeline_job_event": "CodePipelineJobEvent",
    "connect_contact_flow_event": "ConnectContactFlowEvent",
    "dynamo_db_stream_event": "DynamoDBStreamEvent",
    "event_bridge_event": "EventBridgeEvent",
    "event_source": "event_source",  # the decorator, not its submodule of the same name
    "kafka_event": "KafkaEvent",
    "kinesis_firehose_event": "KinesisFirehoseDataTransformationRecord KinesisFirehoseDataTransformationRecordMetadata "
    "KinesisFirehoseDataTransformationResponse KinesisFirehoseEvent",
    "kinesis_stream_event": "KinesisStreamEvent",
    "lambda_function_url_event": "LambdaFunctionUrlEvent",
    "s3_batch_operation_event": "S3BatchOperationEvent S3BatchOperationResponse S3BatchOperationResponseRecord",
    "s3_event": "S3Event S3EventBridgeNotificationEvent",
    "secrets_manager_event": "SecretsManagerEvent",
    "ses_event": "SESEvent",
    "sns_event": "SNSEvent",
    "sqs_event": "SQSEvent SQSRecord",
    "transfer_family_event": "TransferFamilyAuthorizer TransferFamilyAuthorizerResponse",
    "vpc_lattice": "VPCLatticeEvent VPCLatticeEventV2",
}
DATA_CLASSES_KNOWN = {name: module for module, names in _EVENTS.items() for name in names.split()}
"""Every name the event data classes' ``__init__`` binds, with its submodule: the light package never
runs that ``__init__`` for one of them. It must not: an event module that imports a name from the
package while the ``__init__`` imports it (``sqs_event`` asks for ``S3Event``) would meet itself
half-initialized. A test checks this against the ``__init__``'s ``__all__``."""


def light_package(name: str, known: dict[str, str] | None = None) -> ModuleType:
    """The package ``name``, registered without running its ``__init__`` (unless already imported).
    ``known``: names of the ``__init__`` and the submodule each comes from ([`KNOWN`][counters.http.powertools.KNOWN])."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    ran: list[bool] = []

    def __getattr__(attr: str) -> object:  # PEP 562: only for names the package does not hold yet
        if attr.startswith("__"):
            raise AttributeError(attr)
        if known and attr in known:  # before submodules: a name can be both (`event_source`)
            value: object = getattr(importlib.import_module(f"{name}.{known[attr]}"), attr)
            setattr(module, attr, value)
            return value
        try:
            return importlib.import_module(f"{name}.{attr}")  # a submodule: `from package import content_types`
        except ModuleNotFoundError as exc:
            if exc.name != f"{name}.{attr}":
                raise
        if not ran:
            ran.append(True)
            loader.exec_module(module)  # the real __init__, once: every name it defines
        if attr in module.__dict__:
            return module.__dict__[attr]
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(importlib.import_module(parent), child, module)
    return module
