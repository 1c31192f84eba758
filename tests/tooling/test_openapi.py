"""docs/openapi.json is what the handlers generate (regenerate: python -m testkit.openapi), it breaks
nothing of the last release's contract (docs/openapi-release.json), and it tells the truth about
what the server requires."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.template import read_stack
from testkit.openapi import ADMIN_ROLE, OUTPUT, RELEASE, SCHEMAS, SCHEME, generate, render_both
from testkit.openapi_diff import breaking_changes
from tests.conftest import api_event, invoke, item_count, moto_table


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    return generate()


def test_openapi_document_is_current(generated: dict[str, Any]) -> None:
    assert json.loads(OUTPUT.read_text()) == generated, "docs/openapi.json is stale: run `.venv/bin/python -m testkit.openapi`"


def test_the_route_contracts_the_functions_validate_against_are_current() -> None:
    """counters.http.schemas (what the API functions validate with at run time, without pydantic)
    is generated with docs/openapi.json from the same models: a model changed without running the
    generator would validate by the old contract."""
    document, module = render_both()
    assert json.loads(document) == json.loads(OUTPUT.read_text())
    assert SCHEMAS.read_text() == module, f"{SCHEMAS.name} is stale: run `.venv/bin/python -m testkit.openapi`"


def test_no_breaking_change_since_the_last_release(generated: dict[str, Any]) -> None:
    """The gate against the release baseline (docs/deploy.md, "Releasing the API contract"): a
    breaking change is either undone or shipped deliberately with a new baseline."""
    changes = breaking_changes(json.loads(RELEASE.read_text()), generated)
    assert changes == [], "breaking changes against docs/openapi-release.json:\n" + "\n".join(changes)


def test_every_template_route_is_documented() -> None:
    doc = json.loads(OUTPUT.read_text())
    for route in read_stack("unused").routes:
        assert route.method.lower() in doc["paths"][route.path], (route.method, route.path)


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in doc["paths"].items():
        for method, operation in ops.items():
            yield method, path, operation


def test_every_operation_declares_the_token_the_deployed_api_requires() -> None:
    """AuthMode=COGNITO puts the user-pool authorizer on every route (template.yaml's
    DefaultAuthorizer, no route opting out): no operation may look anonymous."""
    template = (OUTPUT.parent.parent / "template.yaml").read_text()
    assert "DefaultAuthorizer: CognitoAuthorizer" in template and "Authorizer: NONE" not in template
    doc = json.loads(OUTPUT.read_text())
    assert doc["security"] == [{SCHEME: []}]
    for method, path, operation in operations(doc):
        assert operation["security"] in ([{SCHEME: []}], [{SCHEME: [ADMIN_ROLE]}]), (method, path)
        assert "401" in operation["responses"], (method, path)


def test_the_transfer_contract_is_what_the_server_answers() -> None:
    doc = json.loads(OUTPUT.read_text())
    transfer = doc["paths"]["/resources/{resourceId}/transfers"]["post"]
    [key] = [p for p in transfer["parameters"] if p["in"] == "header"]
    assert key["required"] is True and "reservation" not in key["description"]
    transferred = doc["components"]["schemas"]["Transferred"]
    assert {"from", "to"} <= set(transferred["required"])


# ------------------------------------------------------------------- the admin role, checked against the handlers
TABLE = "tally-openapi-admin"
# every operation the document gives the admin role: a request the schema accepts, sent by a signed-in non-admin
ADMIN_CALLS: dict[tuple[str, str], tuple[str, str, Any, dict[str, str]]] = {
    ("post", "/audits"): ("LikesFunction", "/audits", {"postIds": ["p1"]}, {}),
    ("get", "/posts/{postId}/audit"): ("LikesFunction", "/posts/p1/audit", None, {}),
    ("put", "/posts/{postId}/mode"): ("LikesFunction", "/posts/p1/mode", {"mode": "hot"}, {}),
    ("post", "/ledgers/{ledgerId}/compact"): ("LedgerCompactionFunction", "/ledgers/alice/compact", None, {}),
    ("post", "/resources"): ("ReservationsFunction", "/resources", {"resourceId": "r1", "capacity": 1, "strategy": "set"}, {}),
    ("post", "/resources/{resourceId}/transfers"): (
        "ReservationsFunction",
        "/resources/r1/transfers",
        {"to": "eu-west-1", "quantity": 1},
        {"Idempotency-Key": "k1"},
    ),
    ("post", "/resources/{resourceId}/transfers/receive"): ("ReservationsFunction", "/resources/r1/transfers/receive", None, {}),
}


@pytest.fixture
def cognito_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AUTH_MODE", "COGNITO")
    with moto_table(monkeypatch, TABLE) as client:
        yield client


def test_the_admin_role_is_exactly_what_the_handlers_refuse_to_others(cognito_table: Any, load_function: Any) -> None:
    doc = json.loads(OUTPUT.read_text())
    declared = {(m, p) for m, p, operation in operations(doc) if operation["security"] == [{SCHEME: [ADMIN_ROLE]}]}
    assert declared == set(ADMIN_CALLS)
    for (method, _), (function, path, body, headers) in ADMIN_CALLS.items():
        module = load_function(function, TABLE, params={"AuthMode": "COGNITO"})
        event = api_event(method.upper(), path, body, headers=headers)
        event["requestContext"]["authorizer"] = {"claims": {"sub": "alice", "cognito:groups": "users"}}
        status, answer = invoke(module, event)
        assert (status, answer["error"]) == (403, "forbidden"), (method, path, answer)
    assert item_count(cognito_table, TABLE) == 0
