"""Operations API: the status of a request that was deferred to the retry queue (202).

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counters.core.errors import NotFound
from counters.deferral.operations import Operations
from counters.http.function import ApiFunction, ApiSettings
from counters.http.powertools import Response
from counters.http.resolver import json_response

function = ApiFunction(ApiSettings, Operations.from_settings)
app, logger, metrics = function.app, function.logger, function.metrics

if TYPE_CHECKING:
    from .contract import Operation, OperationIdPath


@app.get("/operations/<operationId>")
def get_operation(operationId: OperationIdPath) -> Response[Operation]:
    operation = function.service.read(operationId, caller=app.caller)
    if operation is None:
        raise NotFound(f"operation {operationId!r} not found")
    return json_response(200, operation)


lambda_handler = function.lambda_handler
