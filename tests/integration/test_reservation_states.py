"""`GET /resources/{resourceId}/reservations/{reservationId}` answers every state a record can be
in, as docs/openapi.json describes it: a claim still completing (`PENDING`), one whose outcome is
not known (`UNKNOWN`: ambiguous, or `PENDING` past `CLAIM_SECONDS` because its caller died),
as well as `CONFIRMED` and `RELEASED`. Before, the first two answered an undocumented 500 (the
answer's status was outside its enum)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.services.reservations import Reservations
from counters.services.reservations import service as service_module
from counters.services.reservations.model import CLAIM_SECONDS, reservation_id
from tests.conftest import api_event, invoke

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)


@pytest.fixture
def res_app(load_function: Any, table: str, layer_client: Any) -> Any:
    return load_function("ReservationsFunction", table, build=lambda s: Reservations(table, retry=FAST))


def get(app: Any, resource_id: str, rid: str) -> tuple[int, Any]:
    return invoke(app, api_event("GET", f"/resources/{resource_id}/reservations/{rid}"))


class Died(Exception):
    """The caller's process ended between its take and the settling of its claim."""


def test_a_claim_left_by_a_caller_that_died_reads_pending_then_unknown(res_app: Any, table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    service = Reservations(table, retry=FAST)
    service.create_resource("a1", capacity=5, strategy="atomic")

    def die(*_: Any, **__: Any) -> None:
        raise Died

    with monkeypatch.context() as patched:
        patched.setattr(Reservations, "_settle_claim", die)
        with pytest.raises(Died):
            service.reserve("a1", 2, "k1")
    rid = reservation_id("a1", "k1")
    status, body = get(res_app, "a1", rid)
    assert (status, body["status"], body["quantity"]) == (200, "PENDING", 2), body

    later = time.time() + CLAIM_SECONDS + 1
    monkeypatch.setattr(service_module.time, "time", lambda: later)
    status, body = get(res_app, "a1", rid)
    assert (status, body["status"]) == (200, "UNKNOWN"), body


def test_an_ambiguous_take_reads_unknown(res_app: Any, faults: Any, table: str) -> None:
    Reservations(table, retry=FAST).create_resource("a2", capacity=5, strategy="atomic")
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    status, body = invoke(res_app, api_event("POST", "/resources/a2/reservations", {"quantity": 2}, headers={"Idempotency-Key": "k2"}))
    assert (status, body["error"]) == (500, "outcome_unknown")
    status, body = get(res_app, "a2", reservation_id("a2", "k2"))
    assert (status, body["status"]) == (200, "UNKNOWN"), body
