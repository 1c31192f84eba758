"""The ledger routes over real HTTP (devstack): headers, status codes, the curl flow of docs/ledgers.md."""

from __future__ import annotations

import uuid

import requests

from counters.primitives.ledger import new_key
from tests.conftest import HTTP_TIMEOUT, RunningApi


def test_ledger_over_http(local_api: RunningApi) -> None:
    url, ledger_id, key = local_api.url, f"acct-{uuid.uuid4().hex[:8]}", new_key()
    first = requests.post(f"{url}/ledgers/{ledger_id}/entries", json={"amount": 5}, headers={"idempotency-key": key}, timeout=HTTP_TIMEOUT)
    assert first.status_code == 201, first.text
    replay = requests.post(f"{url}/ledgers/{ledger_id}/entries", json={"amount": 5}, headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT)
    assert (replay.status_code, replay.json()) == (200, first.json())
    reused = requests.post(f"{url}/ledgers/{ledger_id}/entries", json={"amount": 6}, headers={"Idempotency-Key": key}, timeout=HTTP_TIMEOUT)
    assert (reused.status_code, reused.json()["error"]) == (422, "idempotency_key_reused")
    missing = requests.post(f"{url}/ledgers/{ledger_id}/entries", json={"amount": 5}, timeout=HTTP_TIMEOUT)
    assert missing.status_code == 400
    body = requests.get(f"{url}/ledgers/{ledger_id}", timeout=HTTP_TIMEOUT).json()
    assert (body["balance"], body["pendingEntries"], body["checkpoint"]) == (5, 1, None)
    compact = requests.post(f"{url}/ledgers/{ledger_id}/compact", timeout=HTTP_TIMEOUT)
    assert compact.status_code == 200 and compact.json()["merged"] == 0  # inside the retry window
