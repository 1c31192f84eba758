"""Property-based API tests: schemathesis generates requests from docs/openapi.json and runs
them against the docker-free local API. No 5xx, and every answer conforms to the document.

``positive_data_acceptance`` is left out: schema-valid input may still be rejected on purpose
(an opaque cursor that was never issued, a 4xx for a post that does not exist)."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from testkit.openapi import OUTPUT

schema = schemathesis.openapi.from_path(str(OUTPUT))


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case: Any, local_api: Any) -> None:
    case.call_and_validate(base_url=local_api.url, timeout=30, excluded_checks=[positive_data_acceptance])
