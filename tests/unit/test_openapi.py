"""docs/openapi.json is what the handlers generate (regenerate: python -m testkit.openapi)."""

from __future__ import annotations

import json

from devstack.template import read_stack
from testkit.openapi import OUTPUT, generate


def test_openapi_document_is_current() -> None:
    assert json.loads(OUTPUT.read_text()) == generate(), "docs/openapi.json is stale: run `.venv/bin/python -m testkit.openapi`"


def test_every_template_route_is_documented() -> None:
    doc = json.loads(OUTPUT.read_text())
    for route in read_stack("unused").routes:
        assert route.method.lower() in doc["paths"][route.path], (route.method, route.path)
