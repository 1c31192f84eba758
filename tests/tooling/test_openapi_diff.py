"""testkit.openapi_diff: each breaking-change rule on a small document, and what it lets pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from testkit.openapi_diff import breaking_changes, main

Doc = dict[str, Any]


def base() -> Doc:
    """One API: POST /things (a closed request object, a header, a query) and GET /things/{id}."""
    return {
        "openapi": "3.1.0",
        "security": [{"Token": []}],
        "paths": {
            "/things": {
                "post": {
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": False,
                            "schema": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                        },
                        {"name": "mode", "in": "query", "required": False, "schema": {"type": "string", "enum": ["a", "b"]}},
                    ],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/New"}}}},
                    "responses": {
                        "201": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
                        "400": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    },
                }
            },
            "/things/{id}": {
                "get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}}
            },
        },
        "components": {
            "schemas": {
                "New": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "size": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "Thing": {
                    "type": "object",
                    "required": ["id", "status"],
                    "properties": {
                        "id": {"type": "string"},
                        "status": {"type": "string", "enum": ["NEW", "DONE"]},
                        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    },
                },
                "Error": {"type": "object", "properties": {"error": {"type": "string"}}},
            }
        },
    }


def changed(edit: Callable[[Doc], None]) -> list[str]:
    old = base()
    new = copy.deepcopy(old)
    edit(new)
    return breaking_changes(old, new)


def test_the_same_document_has_no_breaking_change() -> None:
    assert breaking_changes(base(), base()) == []


# (rule, an edit that breaks the contract)
BREAKING: list[tuple[str, Callable[[Doc], None]]] = [
    ("removed-path", lambda d: d["paths"].pop("/things/{id}")),
    ("removed-operation", lambda d: d["paths"]["/things"].pop("post")),
    ("removed-response", lambda d: d["paths"]["/things"]["post"]["responses"].pop("400")),
    ("new-required-parameter", lambda d: d["paths"]["/things"]["post"]["parameters"][0].update(required=True)),
    (
        "new-required-parameter",
        lambda d: d["paths"]["/things"]["post"]["parameters"].append(
            {"name": "x", "in": "query", "required": True, "schema": {"type": "string"}}
        ),
    ),
    ("new-required-property", lambda d: d["components"]["schemas"]["New"]["required"].append("size")),
    ("removed-request-property", lambda d: d["components"]["schemas"]["New"]["properties"].pop("size")),
    ("narrowed-type", lambda d: d["components"]["schemas"]["New"]["properties"].update(size={"type": "string"})),
    ("narrowed-type", lambda d: d["components"]["schemas"]["New"]["properties"]["tags"].update(items={"type": "integer"})),
    ("narrowed-type", lambda d: d["paths"]["/things"]["post"]["parameters"][0].update(schema={"type": "integer"})),
    ("narrowed-enum", lambda d: d["paths"]["/things"]["post"]["parameters"][1]["schema"].update(enum=["a"])),
    ("narrowed-enum", lambda d: d["components"]["schemas"]["New"]["properties"].update(name={"type": "string", "const": "x"})),
    ("removed-response-property", lambda d: d["components"]["schemas"]["Thing"]["properties"].pop("note")),
    ("response-property-optional", lambda d: d["components"]["schemas"]["Thing"]["required"].remove("status")),
    ("widened-response-type", lambda d: d["components"]["schemas"]["Thing"]["properties"].update(id={"type": ["string", "null"]})),
    ("widened-response-enum", lambda d: d["components"]["schemas"]["Thing"]["properties"]["status"]["enum"].append("LOST")),
    ("stricter-security", lambda d: d["paths"]["/things"]["post"].update(security=[{"Token": ["admin"]}])),
    ("stricter-security", lambda d: d.update(security=[{"Token": [], "Other": []}])),
]


@pytest.mark.parametrize(("rule", "edit"), BREAKING, ids=[f"{rule}-{i}" for i, (rule, _) in enumerate(BREAKING)])
def test_each_rule_reports_its_breaking_change(rule: str, edit: Callable[[Doc], None]) -> None:
    found = changed(edit)
    assert any(line.startswith(f"{rule}:") for line in found), found


def test_a_request_body_that_becomes_required_breaks_and_one_that_becomes_optional_does_not() -> None:
    assert changed(lambda d: d["paths"]["/things"]["post"]["requestBody"].update(required=False)) == []
    old, new = base(), base()
    old["paths"]["/things"]["post"]["requestBody"]["required"] = False
    assert [line for line in breaking_changes(old, new) if line.startswith("new-required-request-body")] == [
        "new-required-request-body: POST /things"
    ]


COMPATIBLE: list[tuple[str, Callable[[Doc], None]]] = [
    ("a new path", lambda d: d["paths"].update({"/more": {"get": {"responses": {"200": {}}}}})),
    ("a new response code", lambda d: d["paths"]["/things"]["post"]["responses"].update({"409": {}})),
    (
        "a new optional parameter",
        lambda d: d["paths"]["/things"]["post"]["parameters"].append({"name": "y", "in": "query", "schema": {"type": "string"}}),
    ),
    ("a parameter no longer required", lambda d: d["paths"]["/things"]["post"]["parameters"][1].update(required=False)),
    ("a widened request enum", lambda d: d["paths"]["/things"]["post"]["parameters"][1]["schema"]["enum"].append("c")),
    ("a widened request type", lambda d: d["components"]["schemas"]["New"]["properties"].update(size={"type": "number"})),
    ("a new optional request property", lambda d: d["components"]["schemas"]["New"]["properties"].update(color={"type": "string"})),
    ("a new response property", lambda d: d["components"]["schemas"]["Thing"]["properties"].update(extra={"type": "string"})),
    ("a response property now promised", lambda d: d["components"]["schemas"]["Thing"]["required"].append("note")),
    ("a narrowed response enum", lambda d: d["components"]["schemas"]["Thing"]["properties"]["status"]["enum"].remove("DONE")),
    ("a response no longer nullable", lambda d: d["components"]["schemas"]["Thing"]["properties"].update(note={"type": "string"})),
    ("an anonymous alternative added", lambda d: d.update(security=[{"Token": []}, {}])),
    ("descriptions", lambda d: d["paths"]["/things"]["post"].update(description="now documented")),
]


@pytest.mark.parametrize(("what", "edit"), COMPATIBLE, ids=[what for what, _ in COMPATIBLE])
def test_compatible_changes_pass(what: str, edit: Callable[[Doc], None]) -> None:
    assert changed(edit) == [], what


def test_a_recursive_schema_terminates() -> None:
    def recursive(d: Doc) -> None:
        d["components"]["schemas"]["Thing"]["properties"]["parent"] = {"$ref": "#/components/schemas/Thing"}

    old = base()
    recursive(old)
    new = copy.deepcopy(old)
    new["components"]["schemas"]["Thing"]["properties"].pop("note")
    assert sorted(breaking_changes(old, new)) == [
        "removed-response-property: GET /things/{id} 200 response.note",
        "removed-response-property: POST /things 201 response.note",
    ]


def test_the_command_exits_1_on_a_breaking_change(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    old, new = base(), base()
    new["paths"].pop("/things/{id}")
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    assert "removed-path: /things/{id}" in capsys.readouterr().out
    assert main([str(tmp_path / "old.json"), str(tmp_path / "old.json")]) == 0
