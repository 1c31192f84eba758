"""One shape per answer: every answer docs/openapi.json documents is a service's result type, derived
(counters.http.models.answer), never a response model a contract writes beside it; every GET says
how consistent its answer is; and the answer checker the tests run (testkit.answers) refuses a drift."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from counters.http.models import ANSWERS, Read, answer
from counters.services.reservations.model import PublicResource, public_resource
from counters.store.resources_counters import Resource
from devstack.template import read_stack
from testkit.answers import closed, drifts
from testkit.functions import contract_module
from testkit.openapi import CONSISTENCY, OUTPUT, RELEASE, _generate, consistency_page

SOURCES = ("counters.services.", "counters.store.", "counters.primitives.")
"""Where a result type lives: the layer below the HTTP glue (which imports no pydantic)."""


@pytest.fixture(scope="module")
def generated() -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    return _generate()


def test_every_route_answers_a_service_result_type(generated: tuple[dict[str, Any], list[tuple[str, Any]]]) -> None:
    _, routes = generated
    for function, route in routes:
        model = route.dependant.return_param.type_
        source = ANSWERS.get(model)
        assert source is not None, (
            f"{function} {route.method} {route.openapi_path}: its answer {model.__name__} ({model.__module__}) is not derived "
            "from a service's result type: declare the TypedDict in the service and use counters.http.models.answer"
        )
        assert source.__module__.startswith(SOURCES), (route.openapi_path, source)


def _models(annotation: Any) -> set[type[BaseModel]]:
    """The pydantic models a request type holds (itself and the models of its fields)."""
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return set()
    found = {annotation}
    for field in annotation.model_fields.values():
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            found |= _models(arg)
    return found


def test_a_contract_writes_requests_only(generated: tuple[dict[str, Any], list[tuple[str, Any]]]) -> None:
    """A model a contract defines by hand is a request body (or part of one); an answer written
    there would be a second shape of a service type."""
    _, routes = generated
    requests = {m for _, route in routes for body in route.dependant.body_params for m in _models(body.type_)}
    stack = read_stack("unused")
    for name in sorted({r.function for r in stack.routes}):
        contract = contract_module(stack.functions[name])
        assert contract is not None
        written = {
            v for v in vars(contract).values() if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == contract.__name__
        }
        assert written <= requests, (
            f"{name}'s contract writes models that no request takes: {sorted(m.__name__ for m in written - requests)}"
        )


def test_every_answer_schema_in_the_document_is_a_derived_one() -> None:
    doc = json.loads(OUTPUT.read_text())
    derived = {model.__name__ for model in ANSWERS}
    fixed = {"Error", "Pending", "Unauthorized"}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                ref = response.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
                name = ref.rsplit("/", 1)[-1]
                assert name in derived | fixed, (method, path, status, name)


def test_an_answer_keeps_the_service_types_keys_and_docstrings() -> None:
    model = answer(PublicResource)
    schema = model.model_json_schema()
    assert model.__name__ == "Resource" and ANSWERS[model] is PublicResource
    assert set(schema["properties"]) == set(PublicResource.__annotations__)
    assert set(schema["required"]) == {"resourceId", "capacity", "reserved", "available", "strategy", "shards"}
    assert schema["properties"]["inFlight"]["description"] == "Units sent between Regions and not received yet."
    assert "default" not in schema["properties"]["regions"]  # an optional key is left out, never filled in


def test_a_typed_dict_is_the_only_thing_an_answer_is_made_from() -> None:
    class Handwritten(BaseModel):
        resourceId: str

    with pytest.raises(TypeError, match="not a TypedDict"):
        answer(Handwritten)


# ------------------------------------------------------------------------ the checker the tests run
ESCROWED = {
    **public_resource(Resource("r1", 10, "crt", 1, None, {"us-east-1": 6, "eu-west-1": 4}, "us-east-1"), 3, 7),
    "regions": {"us-east-1": {"capacity": 6, "reserved": 3, "available": 3}, "eu-west-1": {"capacity": 4, "reserved": 0, "available": 4}},
    "inFlight": 0,
}


def test_the_escrowed_resource_is_an_answer_the_document_names() -> None:
    assert drifts("GET", "/resources/r1", 200, ESCROWED) == []
    assert drifts("GET", "/resources/r1", 200, {**ESCROWED, "shares": {}}) == [
        "GET /resources/{resourceId} 200: (body): Additional properties are not allowed ('shares' was unexpected)"
    ]
    assert drifts("GET", "/resources/r1", 200, {**ESCROWED, "inFlight": "0"})  # a wrong type, as ever


OLD_RESOURCE_STATE = {
    "properties": {
        name: {"type": kind}
        for name, kind in [
            ("resourceId", "string"),
            ("capacity", "integer"),
            ("reserved", "integer"),
            ("available", "integer"),
            ("strategy", "string"),
            ("shards", "integer"),
        ]
    },
    "additionalProperties": True,
    "type": "object",
    "required": ["resourceId", "capacity", "reserved", "available", "strategy", "shards"],
}
"""`ResourceState` as the release document of 074498f and 43b606f described it (written from a
hand-made model, kept here as it was): it had no `regions` nor `inFlight`."""


def test_the_old_release_document_drifted_from_what_the_service_answers_and_the_current_one_does_not() -> None:
    """Closed, the old hand-made `ResourceState` refuses an escrowed resource's answer; the current
    release document (derived from the service's type) names every field the answer carries."""
    old = closed(OLD_RESOURCE_STATE, {})
    assert old["additionalProperties"] is False
    assert {"regions", "inFlight"} <= set(ESCROWED) and {"regions", "inFlight"} - set(old["properties"]) == {"regions", "inFlight"}
    release = json.loads(RELEASE.read_text())
    current = closed(
        release["paths"]["/resources/{resourceId}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
        release["components"]["schemas"],
    )
    assert set(ESCROWED) <= set(current["properties"])


def test_an_undocumented_status_or_a_missing_body_is_a_drift() -> None:
    assert drifts("GET", "/resources/r1", 201, ESCROWED) == [
        "GET /resources/{resourceId} 201: the document has no such answer for this operation"
    ]
    assert drifts("GET", "/resources/r1", 200, None) == ["GET /resources/{resourceId} 200: no JSON body"]
    assert drifts("GET", "/nowhere", 200, None) == []  # not the API's route (API Gateway answers it)


# ------------------------------------------------------------------------ every read's consistency
def test_every_get_states_its_consistency() -> None:
    doc = json.loads(OUTPUT.read_text())
    gets = {f"GET {path}": ops["get"] for path, ops in doc["paths"].items() if "get" in ops}
    assert gets
    for route, operation in gets.items():
        description = operation.get("description", "")
        assert "Consistency: strong: " in description or "Consistency: As of a watermark: " in description, route
    assert set(gets) == set(json.loads(json.dumps(list(_reads()))))  # no statement for a route that is not a GET


def _reads() -> dict[str, Read]:
    from testkit.openapi import reads

    return reads()


def test_the_consistency_page_is_current() -> None:
    assert CONSISTENCY.read_text() == consistency_page(), "docs/consistency.md is stale: run `.venv/bin/python -m testkit.openapi`"


def test_a_read_says_strong_or_as_of_a_watermark() -> None:
    with pytest.raises(ValueError, match="strong, or as of a watermark"):
        Read()
    assert Read(strong="one read").text() == "Consistency: strong: one read."
