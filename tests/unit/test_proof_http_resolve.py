"""The HTTP proof judges a 202 by the work left, not by a clock: still PENDING once the retry queue
is empty is unresolved at once, and a command still queued is waited for however slow the machine
is (the 240 s bound it replaced could fail a slow but correct run)."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from proof import http


def answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = http.json.dumps(body).encode()
    response.headers.update(headers or {})
    return response


class Scripted(http.Client):
    """A client whose GETs answer from a script, and a queue that empties when the script says so."""

    def __init__(self, statuses: list[str], depths: list[int]) -> None:
        super().__init__("http://unused", queue_depth=lambda: depths.pop(0) if len(depths) > 1 else depths[0])
        self.statuses = statuses
        self.gets = 0

    def send(self, report: http.HttpReport, method: str, path: str, **_: Any) -> requests.Response | None:
        self.gets += 1
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return answer(200, {"status": status})


ACCEPTED = answer(202, {"status": "PENDING", "operationId": "op1"}, {"Location": "/operations/op1"})


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http.time, "sleep", lambda _: None)


def test_a_command_still_queued_is_waited_for_however_long_it_takes() -> None:
    client = Scripted(["PENDING"] * 5000 + ["APPLIED"], depths=[1])
    report = http.HttpReport("r")
    done = client.resolve(report, ACCEPTED)
    assert done.final == {"status": "APPLIED"} and report.unresolved == 0 and client.gets == 5001


def test_pending_with_the_retry_queue_empty_is_unresolved_at_once() -> None:
    client = Scripted(["PENDING"], depths=[1, 1, 0])
    report = http.HttpReport("r")
    done = client.resolve(report, ACCEPTED)
    assert done.final is None and report.unresolved == 1 and client.gets == 4  # 3 polls, then the last read
    assert report.wrong == ["operation op1 still PENDING with the retry queue empty"]


def test_a_record_that_turns_final_as_the_queue_empties_is_resolved() -> None:
    client = Scripted(["PENDING", "APPLIED"], depths=[0])  # the worker finished between the poll and the depth
    report = http.HttpReport("r")
    assert client.resolve(report, ACCEPTED).final == {"status": "APPLIED"} and report.unresolved == 0
