"""The time a like/unlike is ordered by: API Gateway's, unless the event cannot be a live request."""

from __future__ import annotations

from counters.http.resolver import MAX_CLOCK_SKEW_MS, request_time

NOW = 1_795_000_000_000


def event(epoch: object) -> dict[str, object]:
    return {"requestContext": {"requestTimeEpoch": epoch}}


def test_api_gateways_time_when_it_is_a_live_requests() -> None:
    assert request_time(event(NOW - 1234), now=NOW) == NOW - 1234
    assert request_time(event(NOW + MAX_CLOCK_SKEW_MS), now=NOW) == NOW + MAX_CLOCK_SKEW_MS


def test_the_functions_clock_otherwise() -> None:
    assert request_time({}, now=NOW) == NOW  # no requestContext (a direct invocation)
    assert request_time(event(None), now=NOW) == NOW
    assert request_time(event("1795000000000"), now=NOW) == NOW  # not a number
    assert request_time(event(1428582896000), now=NOW) == NOW  # a stored sample event (2015)
    assert request_time(event(NOW - MAX_CLOCK_SKEW_MS - 1), now=NOW) == NOW
