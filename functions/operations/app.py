"""Operations API: the status of a request that was deferred to the retry queue (202)."""

from counters.core.errors import NotFound
from counters.deferral.operations import Operations
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Response
from counters.http.resolver import Body, OperationIdPath, json_response

function = ApiFunction(ApiSettings, Operations.from_settings)
app, logger, metrics = function.app, function.logger, function.metrics


class Operation(Body):
    operationId: str
    op: str
    status: str
    createdAt: int


@app.get("/operations/<operationId>")
def get_operation(operationId: OperationIdPath) -> Response[Operation]:
    operation = function.service.read(operationId, caller=app.caller)
    if operation is None:
        raise NotFound(f"operation {operationId!r} not found")
    return json_response(200, operation)


lambda_handler = function.lambda_handler
