"""Defects the HTTP proof (proof/http.py) found in the layer, reduced to deterministic reproductions.

Each failed before its fix (the crt split: the split now Puts the reservation record in its own
transaction, so a re-drive is answered from the record).
"""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.errors import ContentionError, InsufficientCapacity
from counters.core.failures import RetryPolicy
from counters.services.reservations import Reservations

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.002)


def reserved_and_confirmed(ddb: Any, table: str, resource: str) -> tuple[int, int]:
    items = [i for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True) for i in page["Items"]]
    reserved = sum(int(i["reserved"]["N"]) for i in items if i["PK"]["S"].startswith(f"RES#{resource}#"))
    confirmed = sum(
        int(i["quantity"]["N"])
        for i in items
        if i["PK"]["S"].startswith("RSV#") and i["resourceId"]["S"] == resource and i["status"]["S"] == "CONFIRMED"
    )
    return reserved, confirmed


def test_crt_sharded_split_committed_then_redriven_is_not_sold_out(table: str, layer_client: Any, faults: Any, ddb: Any) -> None:
    service = Reservations(table, retry=FAST)
    service.create_resource("r", capacity=4, strategy="crt", shards=2)  # shards of 2 and 2: a take of 3 must split
    # every successful TransactWriteItems answers 500 after committing: the single-shard tries fail their condition
    # (no answer to lose), the split commits on its first attempt and its same-token re-sends are replays
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    with pytest.raises(ContentionError):  # 503 / 202: "safe to re-send with the same key"
        service.reserve("r", 3, "key-1")
    faults.clear()
    assert reserved_and_confirmed(ddb, table, "r")[0] == 3  # the split is in the table
    try:  # the client's re-send, or the retry worker's replay of the deferred command: same key
        answer = service.reserve("r", 3, "key-1")
    except InsufficientCapacity:
        answer = None
    reserved, confirmed = reserved_and_confirmed(ddb, table, "r")
    assert answer is not None and answer.body["status"] == "CONFIRMED", "the re-drive answered 409 insufficient_capacity"
    assert reserved == confirmed == 3
