"""Property-based API tests: schemathesis generates requests from docs/openapi.json and runs
them against the docker-free local API. No 5xx, and every answer conforms to the document.

``positive_data_acceptance`` is left out: schema-valid input may still be rejected on purpose
(an opaque cursor that was never issued, a 4xx for a post that does not exist).

The document describes the deployed API (AuthMode=COGNITO: a token on every operation); the local
stack runs AuthMode=NONE, where no operation needs one (the document's ``info`` says so). So the
document is checked here as that mode reads it: without its security requirements.
tests/e2e/test_auth.py holds the COGNITO side (every operation 401 without a token)."""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from testkit.openapi import OUTPUT


def as_auth_mode_none(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as AuthMode=NONE serves it: no operation requires a token."""
    doc.pop("security", None)
    for operations in doc["paths"].values():
        for operation in operations.values():
            operation.pop("security", None)
    return doc


schema = schemathesis.openapi.from_dict(as_auth_mode_none(json.loads(OUTPUT.read_text())))


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case: Any, local_api: Any) -> None:
    case.call_and_validate(base_url=local_api.url, timeout=30, excluded_checks=[positive_data_acceptance])
