"""One OpenAPI document for the whole API, merged from every function's Powertools resolver.

``python -m testkit.openapi`` writes docs/openapi.json and, from the same document, the route
contracts the functions validate against at run time without pydantic
(layers/counters/counters/http/schemas.py: :func:`routes`) and docs/consistency.md (each GET
route's consistency, from the contracts' ``READS``); a unit test fails when any of these files is
not what the handlers generate (run this command after changing a route or a model), and
another when it breaks the contract of the last release, docs/openapi-release.json
(:mod:`testkit.openapi_diff`; ``python -m testkit.openapi --release`` copies the current
document there when a release is cut: docs/deploy.md, "Releasing the API contract").

Security is what the deployed API (``AuthMode=COGNITO``) requires, per operation: every route
needs the ID token (the template's ``DefaultAuthorizer``), and a route whose handler calls
``require_admin`` also needs the admin role (``{"CognitoIdToken": ["admin"]}``: OpenAPI 3.1
lets a non-OAuth requirement list role names). How ``AuthMode=NONE`` differs is in ``info``.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from devstack.template import ROOT, read_stack
from testkit.functions import bound_handler_module, contract_module, environment

OUTPUT = ROOT / "docs" / "openapi.json"
SCHEMAS = ROOT / "layers" / "counters" / "counters" / "http" / "schemas.py"
"""The route contracts the functions validate against (counters.http.validation), generated with the document."""
CONSISTENCY = ROOT / "docs" / "consistency.md"
"""Every GET route's consistency (the contracts' ``READS``), generated with the document."""
RELEASE = ROOT / "docs" / "openapi-release.json"
"""The document of the last release: the contract a change must not break (updated deliberately)."""

SCHEME = "CognitoIdToken"
ADMIN_ROLE = "admin"
DESCRIPTION = (
    "Exact counters on Amazon DynamoDB.\n\n"
    "Authorization. This document describes the API as deployed with AuthMode=COGNITO: API Gateway's "
    "Cognito user-pool authorizer guards every route, so every operation needs a Cognito ID token in the "
    "Authorization header (401 without a valid one, before the function runs). An operation whose "
    f"security requirement lists the role '{ADMIN_ROLE}' also needs the caller to be a member of the "
    "stack's AdminGroup (default 'admin'; 403 otherwise), and ownership rules answer 403 or 404 "
    "(docs/auth.md). With AuthMode=NONE (local and dev stacks only: the template refuses Stage=prod) "
    "no operation needs a token: nobody is authenticated, every check passes, the ids in paths and "
    "bodies are trusted, and no 401 or 403 is answered.\n\n"
    "Idempotency-Key (draft-ietf-httpapi-idempotency-key-header-07): 400 idempotency_key_missing when a "
    "required key is missing, 422 idempotency_key_reused when a key is reused with another payload, 409 "
    "idempotency_key_in_flight while the first request with the key is still being processed; each "
    "route's header says whether the key is required and when it expires (docs/retries.md#idempotency-keys)."
)


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
UNAUTHORIZED_SCHEMA = {
    "type": "object",
    "required": ["message"],
    "properties": {
        "message": {"type": "string"},
        "error": {
            "type": "string",
            "description": "present when the function refused the caller (unauthorized: claims it cannot read); "
            "API Gateway's own 401 carries `message` only",
        },
    },
}
ERRORS = {
    "400": "Invalid request or JSON, or a required Idempotency-Key missing (idempotency_key_missing); nothing was written",
    "403": "AuthMode COGNITO: acting as another user, another user's ledger, or an admin route (nothing was written)",
    "404": "Not found (AuthMode COGNITO: also another user's reservation, order or operation, answered exactly as a missing one)",
    "409": "Conflict with the stored state; `wrong_region` (MREC global table): the id is created only in its home Region, "
    "named in `region` (nothing was written); `idempotency_key_in_flight`: the first request with this Idempotency-Key "
    "is still being processed: retry the same request later",
    "413": "The body is larger than 64 KiB (nothing was written)",
    "415": "The body must be JSON (application/json or a +json media type, any case)",
    "422": "Idempotency-Key reused with a different request (idempotency_key_reused), or older than its "
    "window (idempotency_key_expired: the ledger's retry window, an order key's IdempotencyWindowDays); nothing was written",
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


def requires_admin(handler: Callable[..., Any]) -> bool:
    """The handler calls ``<caller>.require_admin(...)`` (read from its source, so the document
    follows the check itself)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(handler)))
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "require_admin" for node in ast.walk(tree)
    )


def generate() -> dict[str, Any]:
    return _generate()[0]


def _generate() -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The document, and every route of every API function (its method, OpenAPI path, Powertools route)."""
    stack = read_stack("tally")
    api_functions = sorted({r.function for r in stack.routes})
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "Tally", "version": "1.0.0", "description": DESCRIPTION},
        "paths": {},
        "components": {
            "schemas": {},
            "securitySchemes": {
                SCHEME: {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "A Cognito ID token (the caller is its sub claim); the role 'admin' means membership of the "
                    "stack's AdminGroup. Required by every operation with AuthMode=COGNITO; not used with AuthMode=NONE.",
                }
            },
        },
        "security": [{SCHEME: []}],
    }
    admin: set[tuple[str, str]] = set()
    all_routes: list[tuple[str, Any]] = []
    consistency = reads()
    for name in api_functions:
        fn = stack.functions[name]
        with environment(fn, {"AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}):
            module = bound_handler_module(fn)
            part = json.loads(module.app.get_openapi_json_schema(title="Tally", version="1.0.0"))
            routes = module.app._static_routes + module.app._dynamic_routes  # noqa: SLF001 - Powertools keeps them there
            admin |= {(r.openapi_path, r.method.lower()) for r in routes if requires_admin(r.func)}
            all_routes += [(name, r) for r in routes]
        for path, operations in part.get("paths", {}).items():
            doc["paths"].setdefault(path, {}).update(operations)
        doc["components"]["schemas"].update(part.get("components", {}).get("schemas", {}))
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            operation["responses"] = _responses(method, operation.get("responses", {}))
            operation["security"] = [{SCHEME: [ADMIN_ROLE] if (path, method) in admin else []}]
            read = consistency.get(f"{method.upper()} {path}")
            if read is not None:
                operation["description"] = "\n\n".join(filter(None, [operation.get("description"), read.text()]))
    doc["components"]["schemas"]["Error"] = ERROR_SCHEMA
    doc["components"]["schemas"]["Pending"] = PENDING_SCHEMA
    doc["components"]["schemas"]["Unauthorized"] = UNAUTHORIZED_SCHEMA
    doc["components"]["schemas"].pop("HTTPValidationError", None)
    doc["components"]["schemas"].pop("ResponseValidationError", None)  # answered as Error (500)
    doc["components"]["schemas"].pop("ValidationError", None)
    doc["paths"] = dict(sorted(doc["paths"].items()))
    doc["components"]["schemas"] = dict(sorted(doc["components"]["schemas"].items()))
    return doc, all_routes


_KEPT = {
    "type", "anyOf", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "items", "minItems", "maxItems", "properties", "required", "additionalProperties", "default",
}  # fmt: skip
"""The JSON Schema keywords counters.http.validation reads (the rest documents)."""


def _inline(schema: Any, components: dict[str, Any]) -> Any:
    """``schema`` with its ``$ref``s replaced by what they name, and only the keywords that validate."""
    if isinstance(schema, list):
        return [_inline(s, components) for s in schema]
    if not isinstance(schema, dict):
        return int(schema) if isinstance(schema, float) and schema.is_integer() else schema
    if "$ref" in schema:
        return _inline(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _KEPT:
            continue
        if key == "properties":
            out[key] = {name: _inline(sub, components) for name, sub in value.items()}
        elif key in ("default", "enum", "const", "required"):
            out[key] = value
        else:
            out[key] = _inline(value, components)
    return out


def routes(doc: dict[str, Any], all_routes: list[tuple[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each route's contract, keyed ``"<METHOD> <OpenAPI path>"``: its parameters (where they are,
    their name in the request and the route function's argument name), its body and its response
    schema, taken from the document (so they are the document's) with the ``$ref``s inlined."""
    components = doc["components"]["schemas"]
    out: dict[str, dict[str, Any]] = {}
    for _, route in sorted(all_routes, key=lambda nr: (nr[1].openapi_path, nr[1].method)):
        operation = doc["paths"][route.openapi_path][route.method.lower()]
        dependant = route.dependant
        names = {
            (f.field_info.in_.value, f.alias): f.name for f in (*dependant.path_params, *dependant.query_params, *dependant.header_params)
        }
        params = [
            {
                "in": p["in"],
                "alias": p["name"],
                "name": names[(p["in"], p["name"])],
                "required": p.get("required", False),
                "schema": _inline(p["schema"], components),
            }
            for p in operation.get("parameters", [])
        ]
        contract: dict[str, Any] = {"params": params}
        if dependant.body_params:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            contract["body"] = {"name": dependant.body_params[0].name, "schema": _inline(schema, components)}
        success = operation["responses"].get("200", {}).get("content", {}).get("application/json")
        if success is not None and route.dependant.return_param is not None:
            contract["response"] = _inline(success["schema"], components)
        out[f"{route.method.upper()} {route.openapi_path}"] = contract
    return out


def reads() -> dict[str, Any]:
    """Every API function's declared reads (its contract's ``READS``: ``"GET <path>"`` -> counters.http.models.Read)."""
    stack = read_stack("tally")
    found: dict[str, Any] = {}
    for name in sorted({r.function for r in stack.routes}):
        contract = contract_module(stack.functions[name])
        found.update(getattr(contract, "READS", {}))
    return dict(sorted(found.items()))


def consistency_page() -> str:
    """docs/consistency.md: each GET route's consistency, from the contracts' ``READS``."""
    rows = "".join(f"| `{route}` | {read.strong or '-'} | {read.as_of or '-'} |\n" for route, read in reads().items())
    return (
        "# Consistency of each read\n\n"
        "<!-- generated by `python -m testkit.openapi` from each API function's contract (READS); do not edit -->\n\n"
        "A read is **strong** when its answer reflects every write acknowledged before the request was sent, "
        "or it is **as of a watermark**, named with how far behind it may be. The same statement is each GET "
        "operation's description in [openapi.json](openapi.json). Writes are not listed: each answers its own outcome.\n\n"
        "| route | strong | as of a watermark |\n|---|---|---|\n" + rows
    )


PAGES = {"posts": "likes.md", "audits": "likes.md", "ledgers": "ledgers.md", "orders": "orders.md", "resources": "reservations.md"}
PAGES |= {"operations": "retries.md"}
"""Each route family's page (by the path's first part), where its reads' consistency is generated."""
BEGIN, END = "<!-- consistency: generated by python -m testkit.openapi from the contracts' READS -->", "<!-- consistency: end -->"


def page_block(page: str) -> str:
    """The consistency of the reads of ``page``'s routes, as the page shows them (between BEGIN and END)."""
    lines = [
        f"- `{route}`: {read.text().removeprefix('Consistency: ')}"
        for route, read in reads().items()
        if PAGES[route.split()[1].split("/")[1]] == page
    ]
    return f"{BEGIN}\n**Consistency of each read** (all of them: [consistency.md](consistency.md)):\n\n" + "\n".join(lines) + f"\n{END}"


def with_block(text: str, page: str) -> str:
    """``text`` (the page) with its generated block replaced by the current one."""
    head, found, rest = text.partition(BEGIN)
    if not found:
        raise LookupError(f"docs/{page} has no {BEGIN!r} block: add one under its routes table")
    return head + page_block(page) + rest.partition(END)[2]


def render() -> str:
    return json.dumps(generate(), indent=2, sort_keys=False) + "\n"


def render_both() -> tuple[str, str]:
    """docs/openapi.json and counters/http/schemas.py, from one generation."""
    doc, all_routes = _generate()
    table = "{\n" + "".join(f"    {key!r}: {contract!r},\n" for key, contract in routes(doc, all_routes).items()) + "}"
    module = (
        '"""The route contracts of docs/openapi.json, which [`counters.http.validation`][counters.http.validation] checks\n'
        "requests and responses against without pydantic: generated by ``python -m testkit.openapi`` from the\n"
        'API functions\' contracts (their ``contract.py``: requests, and the services\' result types); do not edit (a unit test fails when it is stale)."""\n\n'
        "from typing import Any\n\n"
        f"ROUTES: dict[str, dict[str, Any]] = {table}\n"
        '"""Each route\'s parameters, body and response schema, keyed ``"<METHOD> <OpenAPI path>"``."""\n'
    )
    return json.dumps(doc, indent=2, sort_keys=False) + "\n", module


def main(argv: list[str]) -> int:
    """Write docs/openapi.json; with ``--release``, also make it the release baseline."""
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    document, schemas = render_both()
    OUTPUT.write_text(document)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    SCHEMAS.write_text(schemas)
    print(f"wrote {SCHEMAS.relative_to(ROOT)}")
    CONSISTENCY.write_text(consistency_page())
    print(f"wrote {CONSISTENCY.relative_to(ROOT)}")
    for page in sorted(set(PAGES.values())):
        path = OUTPUT.parent / page
        path.write_text(with_block(path.read_text(), page))
        print(f"wrote docs/{page} (its reads' consistency)")
    if "--release" in argv:
        shutil.copyfile(OUTPUT, RELEASE)
        print(f"wrote {RELEASE.relative_to(ROOT)} (the release baseline: commit it with the release)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
