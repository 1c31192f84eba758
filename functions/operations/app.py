"""Operations API: the status of a request that was deferred to the retry queue (202)."""

import os

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.errors import NotFound
from counters.deferral.operations import Operations
from counters.http.resolver import Body, OperationIdPath, build_app, json_response

TABLE_NAME = os.environ["TABLE_NAME"]

logger = Logger()
metrics = Metrics()
app = build_app(logger)
operations = Operations(TABLE_NAME)


class Operation(Body):
    operationId: str
    op: str
    status: str
    createdAt: int


@app.get("/operations/<operationId>")
def get_operation(operationId: OperationIdPath) -> Response[Operation]:
    operation = operations.get(operationId, caller=app.caller)
    if operation is None:
        raise NotFound(f"operation {operationId!r} not found")
    return json_response(200, operation)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return app.resolve(event, context)
