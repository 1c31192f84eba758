"""Breaking changes between two OpenAPI 3.1 documents: what a client written against ``old`` meets in ``new``.

A focused stand-in for oasdiff's ``breaking`` (a Go binary; no PyPI package ships it), checking
the rules this API can break. Requests must not narrow (a request ``old`` accepted must still be
accepted); answers must not widen (an answer ``old`` promised must still hold):

* ``removed-path`` / ``removed-operation``: a path, or a method on it, is gone;
* ``removed-response``: an operation no longer documents a status code it did;
* ``new-required-parameter``: a parameter is required that was optional or absent;
* ``new-required-request-body`` / ``new-required-property``: a request body, or a property of
  one, is required that was not;
* ``removed-request-property``: a property a closed request object (``additionalProperties:
  false``) accepted is gone: sending it is now a 400;
* ``narrowed-type`` / ``narrowed-enum``: a parameter or request property accepts fewer types or
  values (a new ``enum`` or ``const`` where there was none counts);
* ``removed-response-property`` / ``response-property-optional``: an answer no longer carries a
  property, or no longer promises it;
* ``widened-response-type`` / ``widened-response-enum``: an answer's property may now hold a type
  or value it could not (a client switching on the old values breaks);
* ``stricter-security``: an operation needs a credential or role that it did not.

``python -m testkit.openapi_diff OLD NEW`` prints the breaking changes and exits 1 when there are any.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
Schema = dict[str, Any]


class _Docs:
    """Both documents, for resolving ``$ref``s (local ones: ``#/components/...``)."""

    def __init__(self, old: Schema, new: Schema) -> None:
        self.old, self.new = old, new

    @staticmethod
    def resolve(doc: Schema, schema: Any) -> Schema:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 32:
            node: Any = doc
            for part in str(schema["$ref"]).removeprefix("#/").split("/"):
                node = node.get(part, {}) if isinstance(node, dict) else {}
            schema, seen = node, seen + 1
        return schema if isinstance(schema, dict) else {}


def _types(schema: Schema, doc: Schema) -> frozenset[str]:
    """The JSON types a schema admits (empty: any). ``integer`` is a ``number``."""
    schema = _Docs.resolve(doc, schema)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        found: set[str] = set()
        for alt in alternatives:
            sub = _types(alt, doc)
            if not sub:
                return frozenset()
            found |= sub
        return frozenset(found)
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(str(k) for k in kind)
    if "properties" in schema:
        return frozenset({"object"})
    if "const" in schema or "enum" in schema:
        return frozenset(type_of(v) for v in _values(schema) or [])
    return frozenset()


def type_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _values(schema: Schema) -> list[Any] | None:
    """The values a schema is limited to (``enum``/``const``, across ``anyOf``), or None: unlimited."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    return None


def _covers(wide: frozenset[str], narrow: frozenset[str]) -> bool:
    """Every type of ``narrow`` is admitted by ``wide`` (empty: any)."""
    if not wide:
        return True
    if not narrow:
        return False
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _enum(schema: Schema, doc: Schema) -> list[Any] | None:
    schema = _Docs.resolve(doc, schema)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        values: list[Any] = []
        for alt in alternatives:
            sub = _enum(alt, doc)
            if sub is None:
                kinds = _types(alt, doc)
                if kinds == {"null"}:
                    values.append(None)
                    continue
                return None
            values += sub
        return values
    return _values(schema)


def _schema_changes(
    old: Any, new: Any, docs: _Docs, where: str, *, request: bool, seen: frozenset[tuple[int, int]], parameter: bool = False
) -> Iterator[str]:
    """Breaking changes from ``old`` to ``new`` for a schema a client sends (``request``) or reads.
    A ``parameter``'s ``null`` stands for "absent" (Powertools' optional header), which
    ``required`` decides, so it is not a type here."""
    old_s, new_s = docs.resolve(docs.old, old), docs.resolve(docs.new, new)
    pair = (id(old_s), id(new_s))
    if pair in seen:
        return
    seen = seen | {pair}
    old_t, new_t = _types(old_s, docs.old), _types(new_s, docs.new)
    if parameter:
        old_t, new_t = old_t - {"null"}, new_t - {"null"}
    if request and not _covers(new_t, old_t):
        yield f"narrowed-type: {where} accepted {sorted(old_t) or 'any'}, now {sorted(new_t)}"
    if not request and not _covers(old_t, new_t):
        yield f"widened-response-type: {where} was {sorted(old_t)}, now {sorted(new_t) or 'any'}"
    old_e, new_e = _enum(old_s, docs.old), _enum(new_s, docs.new)
    if request and new_e is not None and (old_e is None or any(v not in new_e for v in old_e)):
        dropped = "any value" if old_e is None else [v for v in old_e if v not in new_e]
        yield f"narrowed-enum: {where} no longer accepts {dropped}"
    if not request and old_e is not None and (new_e is None or any(v not in old_e for v in new_e)):
        added = "any value" if new_e is None else [v for v in new_e if v not in old_e]
        yield f"widened-response-enum: {where} may now be {added}"
    for old_alt, new_alt in _objects(old_s, new_s, docs):
        yield from _object_changes(old_alt, new_alt, docs, where, request=request, seen=seen)


def _objects(old_s: Schema, new_s: Schema, docs: _Docs) -> Iterator[tuple[Schema, Schema]]:
    """The object schemas to compare property by property: the objects themselves, or their
    object alternatives (``anyOf: [X, null]``) when each side has exactly one."""

    def only_object(schema: Schema, doc: Schema) -> Schema | None:
        alternatives = schema.get("anyOf") or schema.get("oneOf")
        if alternatives:
            objects = [s for s in (_Docs.resolve(doc, a) for a in alternatives) if "object" in _types(s, doc)]
            return objects[0] if len(objects) == 1 else None
        return schema if "properties" in schema or "items" in schema else None

    old_o, new_o = only_object(old_s, docs.old), only_object(new_s, docs.new)
    if old_o is not None and new_o is not None:
        yield old_o, new_o


def _object_changes(old: Schema, new: Schema, docs: _Docs, where: str, *, request: bool, seen: frozenset[tuple[int, int]]) -> Iterator[str]:
    if "items" in old and "items" in new:
        yield from _schema_changes(old["items"], new["items"], docs, f"{where}[]", request=request, seen=seen)
    old_p: dict[str, Any] = old.get("properties") or {}
    new_p: dict[str, Any] = new.get("properties") or {}
    old_r, new_r = set(old.get("required") or ()), set(new.get("required") or ())
    for name in sorted(old_p.keys() - new_p.keys()):
        if request and new.get("additionalProperties") is False:
            yield f"removed-request-property: {where}.{name} is no longer accepted"
        elif not request:
            yield f"removed-response-property: {where}.{name}"
    if request:
        for name in sorted(new_r - old_r):
            yield f"new-required-property: {where}.{name}"
    else:
        for name in sorted((old_r - new_r) & new_p.keys()):
            yield f"response-property-optional: {where}.{name} may now be absent"
    for name in sorted(old_p.keys() & new_p.keys()):
        yield from _schema_changes(old_p[name], new_p[name], docs, f"{where}.{name}", request=request, seen=seen)


def _json_schema(body: Any, doc: Schema) -> Any:
    content: dict[str, Any] = _Docs.resolve(doc, body).get("content") or {}
    media: Any = content.get("application/json") or next(iter(content.values()), {})
    return media.get("schema") if isinstance(media, dict) else None


def _parameters(operation: Schema, doc: Schema) -> dict[tuple[str, str], Schema]:
    found = {}
    for p in operation.get("parameters") or ():
        param = _Docs.resolve(doc, p)
        found[(str(param.get("in")), str(param.get("name")).lower())] = param
    return found


def _security(operation: Schema, doc: Schema) -> list[dict[str, set[str]]]:
    """The operation's alternatives (``{}``: anonymous), each scheme -> roles."""
    requirements = operation.get("security", doc.get("security")) or [{}]
    return [{scheme: set(roles or ()) for scheme, roles in alt.items()} for alt in requirements]


def _satisfies(held: dict[str, set[str]], wanted: dict[str, set[str]]) -> bool:
    """A client meeting ``held`` (an old alternative) also meets ``wanted`` (a new one)."""
    return all(scheme in held and roles <= held[scheme] for scheme, roles in wanted.items())


def breaking_changes(old: Schema, new: Schema) -> list[str]:
    """Every breaking change from ``old`` to ``new``, one line each (empty: compatible)."""
    docs, found = _Docs(old, new), []
    new_paths: dict[str, Any] = new.get("paths") or {}
    for path, old_ops in (old.get("paths") or {}).items():
        if path not in new_paths:
            found.append(f"removed-path: {path}")
            continue
        for method in METHODS:
            if method not in old_ops:
                continue
            where = f"{method.upper()} {path}"
            new_op = new_paths[path].get(method)
            if new_op is None:
                found.append(f"removed-operation: {where}")
                continue
            found += _operation_changes(old_ops[method], new_op, docs, where)
    return found


def _operation_changes(old_op: Schema, new_op: Schema, docs: _Docs, where: str) -> list[str]:
    found = []
    for code in sorted(set(old_op.get("responses") or {}) - set(new_op.get("responses") or {})):
        found.append(f"removed-response: {where} {code}")
    old_params, new_params = _parameters(old_op, docs.old), _parameters(new_op, docs.new)
    for key, param in sorted(new_params.items()):
        before = old_params.get(key)
        label = f"{where} {key[0]} parameter {key[1]}"
        if param.get("required") and not (before or {}).get("required"):
            found.append(f"new-required-parameter: {label}")
        if before is not None:
            found += _schema_changes(before.get("schema"), param.get("schema"), docs, label, request=True, seen=frozenset(), parameter=True)
    old_body, new_body = old_op.get("requestBody"), new_op.get("requestBody")
    if new_body is not None:
        if docs.resolve(docs.new, new_body).get("required") and not (old_body and docs.resolve(docs.old, old_body).get("required")):
            found.append(f"new-required-request-body: {where}")
        if old_body is not None:
            old_s, new_s = _json_schema(old_body, docs.old), _json_schema(new_body, docs.new)
            found += _schema_changes(old_s, new_s, docs, f"{where} request body", request=True, seen=frozenset())
    new_responses = new_op.get("responses") or {}
    for code, answer in sorted((old_op.get("responses") or {}).items()):
        if code in new_responses:
            old_s, new_s = _json_schema(answer, docs.old), _json_schema(new_responses[code], docs.new)
            if old_s is not None:
                found += _schema_changes(old_s, new_s or {}, docs, f"{where} {code} response", request=False, seen=frozenset())
    new_security = _security(new_op, docs.new)
    for held in _security(old_op, docs.old):
        if not any(_satisfies(held, wanted) for wanted in new_security):
            shown = json.dumps({scheme: sorted(roles) for scheme, roles in held.items()}) if held else "anonymous callers"
            found.append(f"stricter-security: {where} no longer accepts {shown}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m testkit.openapi_diff OLD.json NEW.json", file=sys.stderr)
        return 2
    old, new = (json.loads(Path(p).read_text()) for p in argv)
    changes = breaking_changes(old, new)
    for line in changes:
        print(line)
    print(f"{len(changes)} breaking change(s)", file=sys.stderr)
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
