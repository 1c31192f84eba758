"""One OpenAPI document for the whole API, merged from every function's Powertools resolver.

``python -m testkit.openapi`` writes docs/openapi.json; a unit test fails when the file is
not what the handlers generate (run this command after changing a route or a model).
"""

from __future__ import annotations

import json
import os
from typing import Any

from devstack.template import ROOT, read_stack
from testkit.functions import environment, handler_module

OUTPUT = ROOT / "docs" / "openapi.json"


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string"},
        "message": {"type": "string"},
        "region": {"type": "string", "description": "wrong_region: the Region to send the request to"},
    },
    "additionalProperties": False,
}
PENDING_SCHEMA = {
    "type": "object",
    "required": ["status", "operationId"],
    "properties": {"status": {"type": "string", "enum": ["PENDING"]}, "operationId": {"type": "string"}},
    "additionalProperties": False,
}
ERRORS = {
    "400": "Invalid request or JSON (nothing was written)",
    "403": "AuthMode COGNITO: acting as another user, another user's ledger, or an admin route (nothing was written)",
    "404": "Not found (AuthMode COGNITO: also another user's reservation, order or operation, answered exactly as a missing one)",
    "409": "Conflict with the stored state; `wrong_region` (MREC global table): the id is created only in its home Region, "
    "named in `region` (nothing was written)",
    "413": "The body is larger than 64 KiB (nothing was written)",
    "415": "The body must be JSON (application/json or a +json media type, any case)",
    "422": "Idempotency-Key reused with a different request",
    "500": "Internal error (no details; the request may be retried)",
    "503": "Contention outlasted the retry budget; retry the same request",
}


def _responses(method: str, generated: dict[str, Any]) -> dict[str, Any]:
    """Powertools documents 422 for validation; the API answers errors as {"error", "message"}."""
    responses = {k: v for k, v in generated.items() if k != "422"}
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for code, description in ERRORS.items():
        responses[code] = {"description": description, "content": ref}
    responses["401"] = {
        "description": "AuthMode COGNITO: no valid ID token (API Gateway answers before the function runs)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Unauthorized"}}},
    }
    if method in ("post", "put", "delete"):
        success = responses.get("200")
        if success is not None and method == "post":
            responses["201"] = {**success, "description": "Created"}
        responses["202"] = {
            "description": "Deferred to the retry queue",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pending"}}},
        }
    return dict(sorted(responses.items()))


def generate() -> dict[str, Any]:
    stack = read_stack("tally")
    api_functions = sorted({r.function for r in stack.routes})
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Tally", "version": "1.0.0", "description": "Exact counters on Amazon DynamoDB"},
        "paths": {},
        "components": {
            "schemas": {},
            "securitySchemes": {
                "CognitoIdToken": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "AuthMode COGNITO: a Cognito ID token (the caller is its sub claim). AuthMode NONE: not used.",
                }
            },
        },
        "security": [{"CognitoIdToken": []}, {}],
    }
    for name in api_functions:
        fn = stack.functions[name]
        with environment(fn, {"AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}):
            module = handler_module(fn)
            part = json.loads(module.app.get_openapi_json_schema(title="Tally", version="1.0.0"))
        for path, operations in part.get("paths", {}).items():
            doc["paths"].setdefault(path, {}).update(operations)
        doc["components"]["schemas"].update(part.get("components", {}).get("schemas", {}))
    for operations in doc["paths"].values():
        for method, operation in operations.items():
            operation["responses"] = _responses(method, operation.get("responses", {}))
    doc["components"]["schemas"]["Error"] = ERROR_SCHEMA
    doc["components"]["schemas"]["Pending"] = PENDING_SCHEMA
    doc["components"]["schemas"]["Unauthorized"] = {"type": "object", "properties": {"message": {"type": "string"}}}
    doc["components"]["schemas"].pop("HTTPValidationError", None)
    doc["components"]["schemas"].pop("ResponseValidationError", None)  # answered as Error (500)
    doc["components"]["schemas"].pop("ValidationError", None)
    doc["paths"] = dict(sorted(doc["paths"].items()))
    doc["components"]["schemas"] = dict(sorted(doc["components"]["schemas"].items()))
    return doc


def render() -> str:
    return json.dumps(generate(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(render())
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
