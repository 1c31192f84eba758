"""The layer's client: endpoint variables honoured, SDK retries off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from counters.core import client as dynamo


@pytest.fixture(autouse=True)
def fresh_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    dynamo.reset_client()
    yield
    dynamo.reset_client()


def test_service_specific_endpoint_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:2222")
    assert dynamo.client().meta.endpoint_url == "http://127.0.0.1:2222"


def test_global_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1111")
    assert dynamo.client().meta.endpoint_url == "http://127.0.0.1:1111"


def test_region_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert dynamo.client().meta.region_name == "eu-west-1"


def test_sdk_retries_are_off() -> None:
    # One attempt in total: the primitives decide what is safe to resend.
    assert dynamo.client().meta.config.retries["total_max_attempts"] == 1
