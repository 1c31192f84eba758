"""The AWS vocabulary: which services are in scope, their boto3 operations, and the IAM action each needs."""

from __future__ import annotations

from functools import cache

import botocore.session
from botocore import xform_name

SERVICES = ("dynamodb", "sqs")
TX_WRITE_KINDS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
TX_KINDS = frozenset({*TX_WRITE_KINDS, "Get"})
# IAM actions that are not named like the operation (the batch APIs share the single-item action).
ACTION_ALIASES = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


class AnalysisError(Exception):
    """The code (or the template) does something the analysis cannot read (it would otherwise under-derive)."""


@cache
def known_services() -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_available_services())


@cache
def operations(service: str) -> dict[str, str]:
    """boto3 method name -> API operation name, from botocore's bundled service model."""
    model = botocore.session.get_session().get_service_model(service)
    return {xform_name(op): op for op in model.operation_names}


@cache
def operation_names() -> frozenset[str]:
    """Every boto3 method name of the services in scope."""
    return frozenset(method for service in SERVICES for method in operations(service))


def iam_action(service: str, method: str) -> str:
    operation = operations(service)[method]
    return f"{service}:{ACTION_ALIASES.get(operation, operation)}"
