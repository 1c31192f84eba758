"""The API answers bad input as it did with pydantic: a corpus of requests through both validations.

The API functions validate with counters.http.validation (the route contracts generated into
counters.http.schemas, no pydantic at run time). Each request of the corpus goes through two
resolvers built alike (build_app: the same error mapping) with the same routes: one validating with
Powertools' pydantic validation (as the functions did), one with counters.http.validation. The
route functions are replaced by a stub that answers the arguments it received, so the comparison
covers every answer: the status, the error code, the field paths of a 400 (in order), and for a
request both accept, the values the route receives (defaults filled, path and query values
parsed). Each route's corpus is built from its contract: a good request, then each parameter and
each body field made wrong in the ways a client gets them wrong (types, ``2.0`` for an integer,
bounds, patterns, a final newline, unknown and missing fields, several values, malformed JSON).
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from typing import Any

import pytest

from counters.http.resolver import build_app, json_response
from counters.http.schemas import ROUTES
from counters.http.validation import Fields, as_fields, validate
from devstack.template import read_stack
from testkit.functions import bound_handler_module, environment
from tests.conftest import LambdaContext

API_FUNCTIONS = sorted({r.function for r in read_stack("unused").routes})


class _Called(Exception):
    def __init__(self, args: dict[str, Any]) -> None:
        self.args_seen = args


def _plain(value: Any) -> Any:
    """A route argument as JSON: a pydantic model and Fields as ``{"fields": ...}`` (both read as
    attributes), a dict as itself (a map, read with ``[]``): a map given as Fields would differ."""
    if hasattr(value, "model_dump"):
        return {"fields": {k: _plain(getattr(value, k)) for k in type(value).model_fields}}
    if isinstance(value, Fields):
        return {"fields": {k: _plain(v) for k, v in vars(value).items()}}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _stub(func: Any) -> Any:
    """A function with ``func``'s name, signature and module (so Powertools reads the same
    parameters from it) that raises the arguments it received."""

    called = _Called  # a closure cell: the stub runs with func's module as its globals

    def stub(**kwargs: Any) -> Any:
        raise called(kwargs)

    made = types.FunctionType(stub.__code__, func.__globals__, func.__name__, None, stub.__closure__)
    made.__annotations__ = dict(func.__annotations__)
    made.__kwdefaults__ = None
    made.__signature__ = __import__("inspect").signature(func)  # type: ignore[attr-defined]
    return made


def _resolvers(module: Any) -> tuple[Any, Any]:
    """(pydantic, contract): two resolvers with the module's routes, stubbed."""
    resolvers = []
    for pydantic in (True, False):
        app = build_app(module.logger)
        if pydantic:  # as the functions were: Powertools' validation, 500 for a response that does not fit
            app._router_middlewares = [m for m in app._router_middlewares if m is not validate]  # noqa: SLF001
            app._enable_validation = True  # noqa: SLF001 - Powertools builds its middlewares on the first request
            app._has_response_validation_error = True  # noqa: SLF001

        @app.exception_handler(_Called)
        def _called(exc: _Called) -> Any:
            return json_response(299, {"args": _plain(exc.args_seen)})

        for route in module.app._static_routes + module.app._dynamic_routes:  # noqa: SLF001
            app.route(route.path, route.method)(_stub(route.func))
        resolvers.append(app)
    return resolvers[0], resolvers[1]


# -- the corpus -----------------------------------------------------------------------------------------

GOOD_STRINGS = {
    r"^[a-z]{2}(-[a-z]+)+-\d$": "eu-west-1",
    r"^[0-9a-f]{32}$": "0123456789abcdef0123456789abcdef",
}


def good(schema: dict[str, Any], name: str = "") -> Any:
    """A value ``schema`` accepts."""
    if "anyOf" in schema:
        return good(next(s for s in schema["anyOf"] if s.get("type") != "null"), name)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        if schema.get("pattern") in GOOD_STRINGS:
            return GOOD_STRINGS[schema["pattern"]]
        return "k" * max(schema.get("minLength", 1), 3)
    if kind == "integer":
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [good(schema.get("items", {}))]
    if kind == "object":
        if "properties" not in schema:
            return {"us-east-1": 1}
        return {k: good(v, k) for k, v in schema["properties"].items() if k in schema.get("required", ())}
    return "x"


def bad_values(schema: dict[str, Any]) -> list[Any]:
    """JSON values a client may send for a field of ``schema`` (most of them wrong)."""
    base = [None, 2.0, 1.5, "2", True, 0, -1, 1, [], {}, "", "x\n", "\ud800", 10**16, "a b", "k" * 65, "k" * 5000]
    inner = next((s for s in schema.get("anyOf", []) if s.get("type") != "null"), schema)
    if inner.get("type") == "integer":
        base += [inner.get("minimum", 0) - 1, inner.get("maximum", 10**15) + 1, inner.get("maximum", 2), float(inner.get("maximum", 2))]
    if inner.get("type") == "array":
        item = good(inner.get("items", {}))
        base += [[item] * (inner.get("maxItems", 3) + 1), [None], ["bad id!"], [item, 2.0], [{"sku": "a", "quantity": 0}], [{"sku": "a"}]]
        base += [[{"sku": "a", "quantity": 1, "extra": 1}], [{"sku": "a", "quantity": "1"}]]
    if inner.get("type") == "object" and "properties" not in inner:
        base += [{"us-east-1": "1"}, {"us-east-1": 2.0}, {"us-east-1": None}, {"a": 1, "b": True}]
    if "enum" in inner:
        base += ["HOT", "hot ", inner["enum"][-1]]
    return base


def bad_params(schema: dict[str, Any]) -> list[Any]:
    """Values of a path, query or header parameter (strings, or several values)."""
    values: list[Any] = ["", " ", "k", "k\n", "a b", "k" * 65, "k" * 1025, "bad!", "-x", "..", "0", "1", "-1", "2.0", " 5 ", "+7"]
    values += ["1_0", "1e3", "0x10", "101", "100", "1000000000000001", "TRUE", "yes", "off", "2", "١٢", "01HZY3Q6K3F1V2YQ8V9X4Z7ABC"]
    values += [["1", "2"], ["7"], "1,2"]
    return values


def event(
    method: str, path: str, *, query: dict[str, Any] | None = None, headers: dict[str, Any] | None = None, body: str | None = None
) -> dict[str, Any]:
    multi_headers = {"Content-Type": ["application/json"]}
    for k, v in (headers or {}).items():
        multi_headers[k] = v if isinstance(v, list) else [v]
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()},
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: (v[-1] if isinstance(v, list) else v) for k, v in (query or {}).items()} or None,
        "multiValueQueryStringParameters": {k: (v if isinstance(v, list) else [v]) for k, v in (query or {}).items()} or None,
        "pathParameters": None,
        "requestContext": {"requestTimeEpoch": 0, "resourcePath": path, "httpMethod": method, "stage": "dev"},
        "body": body,
        "isBase64Encoded": False,
    }


def corpus(key: str, contract: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, event) for one route: a good request, then one thing wrong at a time, then a few together."""
    method, path = key.split(" ", 1)
    params = contract["params"]
    good_params = {p["alias"]: good(p["schema"]) for p in params}
    body_schema = contract.get("body", {}).get("schema")
    good_body = good(body_schema) if body_schema else None

    def make(values: dict[str, Any], body: Any = None, raw: str | None = None) -> dict[str, Any]:
        url = path
        for p in params:
            if p["in"] == "path":
                url = url.replace("{" + p["alias"] + "}", str(values.get(p["alias"], "")))
        query = {p["alias"]: values[p["alias"]] for p in params if p["in"] == "query" and p["alias"] in values}
        headers = {p["alias"]: values[p["alias"]] for p in params if p["in"] == "header" and p["alias"] in values}
        text = raw if raw is not None else (json.dumps(body) if body_schema is not None else None)
        return event(method, url, query=query, headers=headers, body=text)

    yield "good", make(good_params, good_body)
    for p in params:
        for value in bad_params(p["schema"]):
            if p["in"] == "path" and (not isinstance(value, str) or not value.strip() or "/" in value):
                continue  # no route matches: both answer 404 before validating
            yield f"{p['in']} {p['alias']}={value!r}", make({**good_params, p["alias"]: value}, good_body)
        if p["in"] != "path":
            yield f"{p['in']} {p['alias']} missing", make({k: v for k, v in good_params.items() if k != p["alias"]}, good_body)
    if body_schema is None:
        return
    for raw in ["", "null", "5", '"text"', "{", "{}", "tru", '{"a": NaN}', '{"a": 1', "[]", "[1]", " {} ", '{"x": 1e400}']:
        yield f"body {raw!r}", make(good_params, raw=raw)
    for name, schema in body_schema["properties"].items():
        for value in bad_values(schema):
            yield f"body {name}={value!r}", make(good_params, {**good_body, name: value})
        yield f"body {name} missing", make(good_params, {k: v for k, v in good_body.items() if k != name})
    yield "body extra field", make(good_params, {**good_body, "zzz": 1, "aaa": None})
    yield "body all wrong", make(good_params, {name: 2.0 for name in body_schema["properties"]} | {"extra": 1})
    headers = [p for p in params if p["in"] == "header"]
    for p in headers:  # a missing or empty key with other errors: idempotency_key_missing, "also ..."
        without = {k: v for k, v in good_params.items() if k != p["alias"]}
        yield f"{p['alias']} missing and a bad body", make(without, {**good_body, "zzz": 1})
        yield f"{p['alias']} empty and a bad body", make({**without, p["alias"]: ""}, {"zzz": 1})


FIXED = {
    # No route matches a path holding a newline: Powertools' not-found route ran its pydantic
    # validation with no parameters to read and answered 500; it is now the 404 of any unknown path.
    ("GET /posts/{postId}/likes", "path postId='k\\n'"): ((500, "internal_error", None, None), (404, "no_route", None, None)),
}
"""Where the answers differ, on purpose: (route, request) -> (with pydantic, now)."""


def _answer(response: dict[str, Any]) -> tuple[int, str | None, list[str] | None, Any]:
    """(status, error code, the field paths of a 400 in order, the route's arguments)."""
    body = json.loads(response["body"]) if response.get("body") else None
    status = response["statusCode"]
    if status == 299:
        return status, None, None, body["args"]
    code = body.get("error") if isinstance(body, dict) else None
    message = body.get("message", "") if isinstance(body, dict) else ""
    paths = None
    if code == "validation_error":
        paths = [part.split(": ", 1)[0] for part in message.split("; ")]
    elif code == "idempotency_key_missing" and "; also " in message:
        paths = [part.split(": ", 1)[0] for part in message.split("; also ", 1)[1].split("; ")]
    return status, code, paths, None


def cases() -> Iterator[Any]:
    for name in API_FUNCTIONS:
        yield pytest.param(name, id=name)


@pytest.mark.parametrize("name", API_FUNCTIONS)
def test_the_contract_validation_answers_as_pydantic_did(name: str) -> None:
    fn = read_stack("unused").functions[name]
    with environment(fn, {"AWS_DEFAULT_REGION": "us-east-1"}):
        module = bound_handler_module(fn)
        old, new = _resolvers(module)
        keys = [f"{r.method} {r.openapi_path}" for r in module.app._static_routes + module.app._dynamic_routes]  # noqa: SLF001
        assert keys and all(k in ROUTES for k in keys)
        context = LambdaContext.for_function("test", 512, 10)
        differences, count, statuses = [], 0, set()
        for key in keys:
            for label, request in corpus(key, ROUTES[key]):
                count += 1
                before = _answer(old.resolve(json.loads(json.dumps(request)), context))
                after = _answer(new.resolve(json.loads(json.dumps(request)), context))
                statuses.add(before[0])
                if before != after and FIXED.get((key, label)) != (before, after):
                    differences.append(f"{key} {label}: pydantic {before}, contract {after}")
    print(f"{name}: {count} requests")
    assert differences == [], f"{len(differences)} of {count} differ:\n" + "\n".join(differences[:40])
    assert {299, 400} <= statuses  # the corpus has good and bad requests


def test_a_body_field_reads_as_itself_whatever_its_name() -> None:
    """A body arrives as Fields: its fields are attributes, and no method can hide one (an order's
    ``items`` once read as Mapping.items, a 500 on every order)."""
    schema = ROUTES["POST /orders"]["body"]["schema"]
    body = as_fields(schema, {"customerId": "c", "items": [{"sku": "a", "quantity": 1}]})
    assert [(line.sku, line.quantity) for line in body.items] == [("a", 1)]
    body = Fields({"items": [Fields({"sku": "a", "quantity": 1})], "keys": 1, "get": 2})
    assert [(line.sku, line.quantity) for line in body.items] == [("a", 1)]
    assert (body.keys, body.get) == (1, 2)
    assert vars(body)["keys"] == 1


def test_a_route_without_a_contract_is_refused_not_run_unvalidated(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    app = build_app(logging.getLogger("test"))
    ran: list[str] = []

    @app.post("/not-in-the-contract")
    def handler() -> Any:
        ran.append("ran")
        return json_response(200, {})

    response = app.resolve(event("POST", "/not-in-the-contract", body="{}"), LambdaContext.for_function("test", 512, 10))
    assert (response["statusCode"], ran) == (500, [])
