"""The time a like/unlike is ordered by: API Gateway's, unless the event cannot be a live request."""

from __future__ import annotations

import pytest

from counters.core import commands
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


# ---------------------------------------------------------------------- ties on the API's time
def test_request_ids_sort_in_the_order_the_function_took_the_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A like's stamp is (API time, request id): when the API's time ties (the same ms, or
    `sam local start-api` freezing it), the id must follow the requests, even if the clock
    stands still or steps back between two of them."""
    clock = iter([NOW * 1_000_000, NOW * 1_000_000, NOW * 1_000_000 - 5, NOW * 1_000_000 + 7] + [NOW * 1_000_000 + 7] * 50)
    monkeypatch.setattr(commands.time, "time_ns", lambda: next(clock))
    monkeypatch.setattr(commands, "_last_ns", 0)  # as in a fresh process
    ids = [commands.new_request_id() for _ in range(54)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == 32 and all(c in "0123456789abcdef" for c in i) for i in ids)  # an operation id: 32 hex
    assert int(ids[0][:16], 16) == NOW * 1_000_000  # the receive time (ns) leads
