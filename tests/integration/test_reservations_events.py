"""Every reservations sample event in events/ runs through its handler, in order (as `sam local invoke -e` would)."""

from __future__ import annotations

from typing import Any

from tests.conftest import invoke, load_event

SEQUENCE = [
    ("reservations/create_resource.json", 201),
    ("reservations/get_resource.json", 200),
    ("reservations/reserve.json", 201),
    ("reservations/reserve.json", 200),  # the same Idempotency-Key again: the same reservation
    ("reservations/get_reservation.json", 200),
    ("reservations/release.json", 200),
    ("reservations/release.json", 200),  # releasing twice is a no-op
]


def test_reservations_events_run_in_order(load_function: Any, table: str, layer_client: Any) -> None:
    app = load_function("ReservationsFunction", table)
    answers = []
    for name, expected in SEQUENCE:
        status, body = invoke(app, load_event(name))
        assert status == expected, (name, body)
        answers.append(body)
    assert answers[1] == {"resourceId": "tickets", "capacity": 100, "reserved": 0, "available": 100, "strategy": "marker", "shards": 1}
    assert answers[2] == answers[3] == {"reservationId": answers[2]["reservationId"], "quantity": 2, "status": "CONFIRMED"}
    assert answers[4]["reservationId"] == answers[2]["reservationId"]  # the event's path id is uuid5(resource, key)
    assert answers[5]["changed"] is True and answers[6]["changed"] is False
    assert invoke(app, load_event("reservations/get_resource.json"))[1]["reserved"] == 0
