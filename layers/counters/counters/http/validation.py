"""Request and response validation without pydantic: the route contracts of docs/openapi.json, checked at run time.

The API's pydantic models (each API function's ``contract.py``) are the source of docs/openapi.json
and of the tests; importing pydantic and building the models cost an API function more than a
third of ``import boto3`` at each cold start ([docs/bench.md, "Cold start"](../bench.md)). So the functions run
Powertools' REST resolver without its validation, and [`validate`][counters.http.validation.validate]
(a resolver middleware) checks each request against its route's contract in
[`counters.http.schemas`][counters.http.schemas], which ``python -m testkit.openapi`` generates from
the same models as docs/openapi.json (a unit test fails when it is not current).

It answers what pydantic answered (tests/unit/test_request_validation.py sends a corpus of bad
requests through both and compares status, error code and field paths):

* **Bodies are strict**, as the models are (``strict=True``, ``extra="forbid"``): a JSON string for
  an integer, an integer for a boolean, ``2.0`` for an integer (JSON Schema would call ``2.0`` an
  integer; the models never accepted it, and this keeps their answer: 400), an unknown field: 400.
* **Path, query and header values are strings, parsed as pydantic's lax mode does**: an integer
  may have surrounding whitespace, a sign, ``_`` between digits and a zero fraction (``" 2.0 "`` is
  2); a boolean is one of ``true false 1 0 yes no on off t f y n`` in any case.
* Errors are pydantic's error dicts (``type``, ``loc``, ``msg``, ``input``) in pydantic's order:
  path, query, header, then body; an object's declared fields in order, then its unknown fields.
  [`counters.http.resolver`][counters.http.resolver] turns them into the 400 answers.
* Patterns match anywhere in the value (``re.search``) with ``$`` meaning the end of the value
  only (the Rust regex pydantic uses; Python's ``$`` would also match before a final newline).

Responses are checked against the route's response model as Powertools' serializer did: its
fields first, in order, then the fields the model does not declare; a key the service's result
type may leave out stays out (an answer's model is that type: its optional keys have no default).
A response that does not match is a bug, answered 500 (logged).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from counters.http.schemas import ROUTES

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver, Response

__all__ = ["Fields", "as_fields", "check", "validate"]

Schema = Mapping[str, Any]
Errors = list[dict[str, Any]]
Loc = tuple[str | int, ...]

_LAX_INT = re.compile(r"\s*[+-]?[0-9](?:_?[0-9])*(?:\.0*)?\s*")
_LAX_BOOL = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
_LAX_BOOL |= {"on": True, "off": False, "t": True, "f": False, "y": True, "n": False}
_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(pattern: str) -> re.Pattern[str]:
    compiled = _PATTERNS.get(pattern)
    if compiled is None:  # an unescaped $ is the end of the value only, as in Rust's regex
        compiled = _PATTERNS[pattern] = re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern))
    return compiled


def _error(errors: Errors, kind: str, loc: Loc, msg: str, value: object) -> None:
    errors.append({"type": kind, "loc": loc, "msg": msg, "input": value})


def check(schema: Schema, value: Any, loc: Loc, errors: Errors, *, lax: bool = False, fill: bool = True) -> Any:
    """``value`` checked against ``schema`` (the JSON Schema subset of docs/openapi.json), errors
    appended to ``errors``; the value returned with defaults filled (``fill``: a request's missing
    optional field reads as its default) and parsed (``lax``)."""
    if "anyOf" in schema:  # X | None: pydantic's nullable, errors at X's location
        if value is None:
            return None
        branches = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return check(branches[0], value, loc, errors, lax=lax, fill=fill)
    kind = schema.get("type")
    if isinstance(value, str) and not _utf8(value):
        _error(errors, "string_unicode", loc, "Input should be a valid string, unable to parse raw data as a unicode string", value)
        return value
    if "enum" in schema or "const" in schema:
        allowed = schema["enum"] if "enum" in schema else [schema["const"]]
        if value not in allowed or type(value) is not type(allowed[0]):
            _error(errors, "literal_error", loc, f"Input should be {' or '.join(repr(a) for a in allowed)}", value)
        return value
    if kind == "string":
        return _string(schema, value, loc, errors)
    if kind == "integer":
        return _integer(schema, value, loc, errors, lax)
    if kind == "boolean":
        if lax and isinstance(value, str) and value.lower() in _LAX_BOOL:
            return _LAX_BOOL[value.lower()]
        if not isinstance(value, bool):
            _error(errors, "bool_parsing" if lax and isinstance(value, str) else "bool_type", loc, "Input should be a valid boolean", value)
        return value
    if kind == "array":
        return _array(schema, value, loc, errors, lax, fill)
    if kind == "object":
        return _object(schema, value, loc, errors, lax, fill)
    return value  # no type: anything


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string(schema: Schema, value: Any, loc: Loc, errors: Errors) -> Any:
    if not isinstance(value, str):
        _error(errors, "string_type", loc, "Input should be a valid string", value)
    elif "minLength" in schema and len(value) < schema["minLength"]:
        _error(errors, "string_too_short", loc, f"String should have at least {schema['minLength']} characters", value)
    elif "maxLength" in schema and len(value) > schema["maxLength"]:
        _error(errors, "string_too_long", loc, f"String should have at most {schema['maxLength']} characters", value)
    elif "pattern" in schema and not _pattern(schema["pattern"]).search(value):
        _error(errors, "string_pattern_mismatch", loc, f"String should match pattern '{schema['pattern']}'", value)
    return value


def _integer(schema: Schema, value: Any, loc: Loc, errors: Errors, lax: bool) -> Any:
    if lax and isinstance(value, str):
        if not _LAX_INT.fullmatch(value):
            _error(errors, "int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", value)
            return value
        value = int(value.strip().split(".")[0])
    if type(value) is not int:
        _error(errors, "int_type", loc, "Input should be a valid integer", value)
    elif "minimum" in schema and value < schema["minimum"]:
        _error(errors, "greater_than_equal", loc, f"Input should be greater than or equal to {schema['minimum']:g}", value)
    elif "maximum" in schema and value > schema["maximum"]:
        _error(errors, "less_than_equal", loc, f"Input should be less than or equal to {schema['maximum']:g}", value)
    return value


def _array(schema: Schema, value: Any, loc: Loc, errors: Errors, lax: bool, fill: bool) -> Any:
    if not isinstance(value, list):
        _error(errors, "list_type", loc, "Input should be a valid list", value)
        return value
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        _error(errors, "too_long", loc, f"List should have at most {schema['maxItems']} items after validation, not {len(value)}", value)
        return value
    items = schema.get("items", {})
    out = [check(items, item, (*loc, i), errors, lax=lax, fill=fill) for i, item in enumerate(value)]
    if "minItems" in schema and len(value) < schema["minItems"]:
        _error(errors, "too_short", loc, f"List should have at least {schema['minItems']} items after validation, not {len(value)}", value)
    return out


def _object(schema: Schema, value: Any, loc: Loc, errors: Errors, lax: bool, fill: bool) -> Any:
    if not isinstance(value, dict):
        kind = "model_type" if "properties" in schema else "dict_type"
        _error(errors, kind, loc, "Input should be a valid dictionary or instance of the model", value)
        return value
    properties: Mapping[str, Schema] = schema.get("properties", {})
    required = schema.get("required", ())
    out: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in value:
            out[name] = check(sub, value[name], (*loc, name), errors, lax=lax, fill=fill)
        elif name in required:
            _error(errors, "missing", (*loc, name), "Field required", value)
        elif fill:
            out[name] = sub.get("default")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            continue
        if extra is False:
            _error(errors, "extra_forbidden", (*loc, name), "Extra inputs are not permitted", item)
        else:
            out[name] = check(extra, item, (*loc, name), errors, lax=lax, fill=fill) if isinstance(extra, dict) else item
    return out


class Fields:
    """A validated JSON object read as its model's attributes (``body.authorId``): what a route
    receives for its body parameter, typed as its pydantic model in the handler (the model is the
    contract; this holds the same fields, checked against it). Nested objects are ``Fields`` too.
    The fields are the instance's only attributes (``vars(fields)``): no method of its own can hide
    a field (a field named ``items`` reads as the field)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fields) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Fields({vars(self)!r})"


def as_fields(schema: Schema, value: Any) -> Any:
    """A validated value as the route reads it: each object its schema declares fields for (a
    model) as [`Fields`][counters.http.validation.Fields], a free-form map (``dict[str, int]``) as a dict."""
    if "anyOf" in schema:
        if value is None:
            return None
        schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
    if isinstance(value, dict) and "properties" in schema:
        properties = schema["properties"]
        return Fields({k: as_fields(properties.get(k, {}), v) for k, v in value.items()})
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: as_fields(schema["additionalProperties"], v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_fields(schema.get("items", {}), v) for v in value]
    return value


def _params(app: APIGatewayRestResolver, where: str) -> tuple[Mapping[str, Any], set[str]]:
    """A request's query or header values as Powertools' validation read them, and the names
    sent as several values (kept as lists: a scalar parameter then fails as one)."""
    event = app.current_event
    if where == "query":
        multi = event.multi_value_query_string_parameters
        return event.resolved_query_string_parameters, set(multi)
    if where == "header":
        headers = event.resolved_headers_field
        return headers, {k.lower() for k in event.get("multiValueHeaders") or {}}
    return app.context.get("_route_args", {}), set()


def _scalar(source: Mapping[str, Any], alias: str, multi: set[str], where: str) -> Any:
    value = source.get(alias)
    named = alias.lower() if where == "header" else alias
    if isinstance(value, list) and len(value) > 1 and named not in multi and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def request_values(route: Mapping[str, Any], app: APIGatewayRestResolver) -> tuple[dict[str, Any], Errors]:
    """The route's arguments from the current request (path, query, header, body), and the errors."""
    values: dict[str, Any] = {}
    errors: Errors = []
    for where in ("path", "query", "header"):
        source, multi = _params(app, where)
        for param in route["params"]:
            if param["in"] != where:
                continue
            loc = (where, param["alias"])
            value = _scalar(source, param["alias"], multi, where)
            if value is None:
                if param["required"]:
                    _error(errors, "missing", loc, "Field required", None)
                else:
                    values[param["name"]] = param["schema"].get("default")
                continue
            values[param["name"]] = check(param["schema"], value, loc, errors, lax=True)
    body = route.get("body")
    if body is not None:
        try:
            received = app.current_event.json_body
        except ValueError as exc:  # json.JSONDecodeError
            raise _invalid(
                [{"type": "json_invalid", "loc": ("body", getattr(exc, "pos", 0)), "msg": "JSON decode error", "input": {}}]
            ) from exc
        if received is None:
            _error(errors, "missing", ("body",), "Field required", None)
        else:
            checked = check(body["schema"], received, ("body",), errors)
            values[body["name"]] = as_fields(body["schema"], checked)
    return values, errors


def _invalid(errors: Errors) -> Exception:
    from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

    return RequestValidationError(errors)


def response_body(route: Mapping[str, Any], body: Any) -> Any:
    """``body`` as its route's response model serializes it, or ResponseValidationError (a 500)."""
    schema = route.get("response")
    if schema is None:
        return body
    errors: Errors = []
    out = check(schema, body, ("response",), errors, fill=False)
    if errors:
        from aws_lambda_powertools.event_handler.openapi.exceptions import ResponseValidationError

        raise ResponseValidationError(errors, body=body)
    return out


def validate(app: APIGatewayRestResolver, next_middleware: Callable[[APIGatewayRestResolver], Response[Any]]) -> Response[Any]:
    """The resolver middleware: the route's arguments validated (400 before the route runs, so bad
    input writes nothing) and its JSON response serialized by its model (500 when it does not fit)."""
    current = app.context["_route"]
    route_key = f"{current.method} {current.openapi_path}"
    route = ROUTES.get(route_key)
    if route is None:
        if all(current is not r for r in (*app._static_routes, *app._dynamic_routes)):
            return next_middleware(app)  # Powertools' not-found route (404): nothing to validate
        # a route without a generated contract would run unvalidated: refuse it (500, logged)
        raise LookupError(f"no contract for {route_key} in counters.http.schemas: run python -m testkit.openapi")
    values, errors = request_values(route, app)
    if errors:
        raise _invalid(errors)
    app.context["_route_args"] = values  # what the route is called with (as Powertools' validation does)
    response = next_middleware(app)
    if isinstance(response.body, (dict, list)):
        response.body = response_body(route, response.body)
    return response
