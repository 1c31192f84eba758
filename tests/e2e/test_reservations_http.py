"""The curl flow of docs/reservations.md, over real HTTP through the local stack."""

from __future__ import annotations

import uuid

import requests

from tests.conftest import HTTP_TIMEOUT, RunningApi


def test_reservations_curl_flow_from_the_readme(local_api: RunningApi) -> None:
    url, rid = local_api.url, f"tickets-{uuid.uuid4().hex[:8]}"
    r = requests.post(
        f"{url}/resources", json={"resourceId": rid, "capacity": 100, "strategy": "marker", "shards": 4}, timeout=HTTP_TIMEOUT
    )
    assert r.status_code == 201 and r.headers["Location"] == f"/resources/{rid}"
    headers = {"Idempotency-Key": "order-1001"}
    first = requests.post(f"{url}/resources/{rid}/reservations", json={"quantity": 2}, headers=headers, timeout=HTTP_TIMEOUT)
    again = requests.post(f"{url}/resources/{rid}/reservations", json={"quantity": 2}, headers=headers, timeout=HTTP_TIMEOUT)
    assert (first.status_code, again.status_code) == (201, 200) and first.json() == again.json()
    other = requests.post(f"{url}/resources/{rid}/reservations", json={"quantity": 5}, headers=headers, timeout=HTTP_TIMEOUT)
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused")
    assert requests.post(f"{url}/resources/{rid}/reservations", json={"quantity": 2}, timeout=HTTP_TIMEOUT).status_code == 400
    assert requests.get(f"{url}/resources/{rid}", timeout=HTTP_TIMEOUT).json()["reserved"] == 2
    too_many = requests.post(
        f"{url}/resources/{rid}/reservations", json={"quantity": 99}, headers={"Idempotency-Key": "big"}, timeout=HTTP_TIMEOUT
    )
    assert (too_many.status_code, too_many.json()["error"]) == (409, "insufficient_capacity")
    reservation = first.json()["reservationId"]
    assert requests.get(f"{url}/resources/{rid}/reservations/{reservation}", timeout=HTTP_TIMEOUT).json()["status"] == "CONFIRMED"
    assert requests.delete(f"{url}/resources/{rid}/reservations/{reservation}", timeout=HTTP_TIMEOUT).json()["changed"] is True
    assert requests.delete(f"{url}/resources/{rid}/reservations/{reservation}", timeout=HTTP_TIMEOUT).json()["changed"] is False
    assert requests.get(f"{url}/resources/{rid}", timeout=HTTP_TIMEOUT).json()["available"] == 100
