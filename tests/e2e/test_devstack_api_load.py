"""The local API under a burst: 64 clients connecting at once are all answered, none reset."""

from __future__ import annotations

import http.client
import threading
import time
from urllib.parse import urlsplit

from devstack.api import LISTEN_BACKLOG
from tests.conftest import RunningApi

CLIENTS = 64
ROUNDS = 3
CLIENT_TIMEOUT = 20  # seconds; a SYN dropped by a full backlog costs 1+3+7+15 s of retransmits


def _burst(host: str, port: int) -> tuple[list[int], list[str], float]:
    barrier = threading.Barrier(CLIENTS)
    statuses: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        try:
            conn = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT)  # a new connection per client
            conn.request("GET", "/posts/no-such-post")
            status = conn.getresponse().status
            conn.close()
            with lock:
                statuses.append(status)
        except Exception as exc:  # resets, timeouts, refused: every kind counts
            with lock:
                errors.append(repr(exc))

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses, errors, time.monotonic() - began


def test_64_concurrent_clients_get_answers_without_a_reset(local_api: RunningApi) -> None:
    split = urlsplit(local_api.url)
    assert LISTEN_BACKLOG >= 128
    for round_ in range(ROUNDS):
        statuses, errors, took = _burst(split.hostname or "127.0.0.1", split.port or 80)
        assert errors == [], f"round {round_}: {len(errors)} of {CLIENTS} clients failed in {took:.1f}s: {errors[:3]}"
        assert statuses == [404] * CLIENTS, f"round {round_}: {sorted(set(statuses))}"
