"""The ledger's sample events run through their handlers in order (as `sam local invoke -e`)."""

from __future__ import annotations

from typing import Any

from counters.core.failures import RetryPolicy
from counters.primitives.ledger import parse_key
from counters.services.ledgers import Ledgers
from tests.conftest import invoke, load_event

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)


def test_ledger_events_run_in_order(load_function: Any, table: str, layer_client: Any) -> None:
    append = load_event("ledger/append.json")
    key_time = parse_key(append["headers"]["Idempotency-Key"]).at_ms / 1000
    now = {"t": key_time + 1}  # the events were minted at a fixed time: pin the clock to it
    api = load_function("LedgerFunction", table, build=lambda s: Ledgers(s.table_name, retry=FAST, clock=lambda: now["t"]))
    compaction = load_function("LedgerCompactionFunction", table, build=lambda s: Ledgers(s.table_name, retry=FAST, clock=lambda: now["t"]))

    status, created = invoke(api, append)
    assert status == 201 and created["entryId"].endswith(append["headers"]["Idempotency-Key"])
    assert invoke(api, append) == (200, created)  # the replay
    status, body = invoke(api, load_event("ledger/get.json"))
    assert (status, body["balance"], body["pendingEntries"], body["checkpoint"]) == (200, 5, 1, None)

    ledger = api.function.service.ledger
    now["t"] += ledger.retry_window + ledger.margin + ledger.marker_bucket_ms / 1000 + 1
    summary = invoke_schedule(compaction)
    assert summary["ledgers"] == 1 and summary["merged"] == 1 and summary["markersCleared"] == 1
    status, body = invoke(compaction, load_event("ledger/compact.json"))
    assert (status, body["merged"], body["complete"]) == (200, 0, True)
    status, body = invoke(api, load_event("ledger/get.json"))
    assert (body["balance"], body["pendingEntries"], body["checkpoint"]["mergedEntries"]) == (5, 0, 1)
    status, body = invoke(api, append)  # retried after the window: refused, not recounted
    assert (status, body["error"]) == (422, "idempotency_key_expired")


def invoke_schedule(module: Any) -> dict[str, Any]:
    from devstack.runtime import LambdaContext

    return module.lambda_handler(load_event("ledger/schedule.json"), LambdaContext.for_function("compaction", 512, 60))
