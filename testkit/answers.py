"""Every answer the API gives, checked against docs/openapi.json with its objects closed.

The document is the API's contract; the run-time check (counters.http.validation) lets a field the
document does not declare pass through, so that a newer layer's field never turns a good answer into
a 500. That tolerance also hides a drift: an answer carrying a field the document never names. So the
tests and the HTTP proof read every answer through [drifts][testkit.answers.drifts]: the operation's
schema for the answer's status (JSON Schema 2020-12, as OpenAPI 3.1 is), every object that declares
its properties closed (``additionalProperties: false``), a free-form map left free-form.

``tests/conftest.py`` applies it to every HTTP response a test receives (``requests``, so the
schemathesis run and the HTTP proof too) and to every API event a test invokes a handler with
(``invoke``); a test that received an answer off the document fails, naming the route and the field.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator

from testkit.openapi import OUTPUT

GATEWAY_ANSWERS = {403, 405, 413, 429, 502, 504}
"""What API Gateway (or the local API standing in for it) answers before or instead of the function:
unknown resource 403, another method 405, a body over its limit 413, throttled 429, a failed or timed-out function
502/504. Not the function's answers, so not checked against the operations' schemas."""


@cache
def _document() -> dict[str, Any]:
    return dict(json.loads(OUTPUT.read_text()))


@cache
def _routes() -> list[tuple[re.Pattern[str], str]]:
    """Each documented path as a pattern, the literal ones first (``/orders/latest`` before ``/orders/{orderId}``)."""
    paths = sorted(_document()["paths"], key=lambda p: (p.count("{"), p))
    return [(re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(p)) + "$"), p) for p in paths]


def template(path: str) -> str | None:
    """The documented path ``path`` (``/posts/p1``) is an instance of (``/posts/{postId}``), or None."""
    path = urlsplit(path).path
    return next((t for pattern, t in _routes() if pattern.match(path)), None)


def closed(schema: Any, components: dict[str, Any]) -> Any:
    """``schema`` with its ``$ref``s inlined and every object that names its properties closed."""
    if isinstance(schema, list):
        return [closed(s, components) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return closed(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    out = {k: v if k in ("enum", "const", "default", "required", "examples") else closed(v, components) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {name: closed(sub, components) for name, sub in schema["properties"].items()}
        if not isinstance(schema.get("additionalProperties"), dict):
            out["additionalProperties"] = False
    return out


@cache
def _validator(path: str, method: str, status: str) -> Draft202012Validator | None:
    operation = _document()["paths"][path][method]
    answer = operation["responses"].get(status)
    if answer is None:
        return None
    schema = (answer.get("content") or {}).get("application/json", {}).get("schema")
    return Draft202012Validator(closed(schema if schema is not None else {}, _document()["components"]["schemas"]))


def drifts(method: str, path: str, status: int, body: Any) -> list[str]:
    """How the answer ``status``/``body`` to ``method path`` departs from docs/openapi.json (empty:
    it does not). A path or method the document does not have is not the API's: nothing to check."""
    route = template(path)
    method = method.lower()
    if route is None or method not in _document()["paths"][route] or status in GATEWAY_ANSWERS:
        return []
    where = f"{method.upper()} {route} {status}"
    if status not in (204, 304) and method != "head" and body is None:
        return [f"{where}: no JSON body"]
    validator = _validator(route, method, str(status))
    if validator is None:
        return [f"{where}: the document has no such answer for this operation"]
    return [f"{where}: {'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}" for e in validator.iter_errors(body)]


def body_of(text: str | bytes | None) -> Any:
    """A response body as JSON, or None when it is empty or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
