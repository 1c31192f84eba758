"""The proof's balance poller: a busy read answers nothing and the poller keeps reading.

Seen in a loaded ``make proof`` run: a ``ReadTimeoutError`` became a ``ContentionError`` in the
poller's thread, which died; the row's history then checked only the reads before it."""

from __future__ import annotations

import threading

from counters.core.errors import ContentionError
from proof.checker import History
from proof.scenarios import _poll


def test_a_busy_read_does_not_stop_the_poller() -> None:
    stop, history = threading.Event(), History()
    calls = iter(range(10_000))

    def read() -> int:
        n = next(calls)
        if n % 2 == 0:
            raise ContentionError("DynamoDB is busy (ReadTimeoutError); retry the request")
        if n >= 7:
            stop.set()
        return n

    thread = _poll(stop, history, read)
    thread.join(timeout=60)  # a hang guard, not a speed bound
    assert not thread.is_alive()
    assert [r.value for r in history.reads] == [1, 3, 5, 7]
