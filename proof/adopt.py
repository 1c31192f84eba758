"""``refcount-adopt``: a reference count adopted on a table whose children exist already
(docs/migration.md), with links and unlinks flowing before, during and after the backfill.

The table has its own key names (``ownerId``/``itemKey``) and ``size`` children written without
a tally (and a drifted one on the parent). Distinct intents, each request sent twice: ``size``
links of new children and ``size / 2`` unlinks of existing ones, on ``clients`` threads with the
layer's client under the proof's faults; two backfills start once a quarter of the intents have
returned (so the first links and unlinks meet a parent that has not begun) and run until the parent
says ``adopted``. The verdict compares the final tally with the intents (``exact``); the table
itself is read too: a tally other than the children stored is counted as over/under.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable
from typing import Any

from proof.checker import History, Report

PK, SK, TALLY, MARK = "ownerId", "itemKey", "memberCount", "counted"
PARENT = {PK: "WS#proof", SK: "META"}
PREFIX = "MEMBER#"


def own_keys_table(ddb: Any, prefix: str = "proof-adopt") -> str:
    """A new table whose key attributes are the user's own names (``ownerId``/``itemKey``, not ``PK``/``SK``)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": PK, "KeyType": "HASH"}, {"AttributeName": SK, "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": PK, "AttributeType": "S"}, {"AttributeName": SK, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    return name


def partition(ddb: Any, table: str, parent_pk: str) -> list[dict[str, Any]]:
    """Every item under ``parent_pk`` as stored (strongly consistent Query, every page)."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": PK},
        "ExpressionAttributeValues": {":pk": {"S": parent_pk}},
        "ConsistentRead": True,
    }
    items: list[dict[str, Any]] = []
    while True:
        page = ddb.query(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _children(ddb: Any, table: str) -> tuple[int, int, int]:
    """(the parent's tally, the children stored, those without the mark), from the table."""
    items = partition(ddb, table, PARENT[PK])
    tally = next(int(i.get(TALLY, {"N": "0"})["N"]) for i in items if i[SK]["S"] == "META")
    children = [i for i in items if i[SK]["S"].startswith(PREFIX)]
    return tally, len(children), sum(1 for c in children if c.get(MARK) != {"BOOL": True})


def refcount_adopt_scenario(
    ddb: Any,
    seed: int,
    clients: int,
    size: int,
    *,
    with_faults: Callable[[int], Any],
    run_parallel: Callable[[list[Callable[[], None]], int], None],
) -> list[Report]:
    from counters.core.errors import ContentionError
    from counters.core.failures import RetryPolicy
    from counters.core.outcome import Outcome
    from counters.primitives.refcount import RefCount

    name = own_keys_table(ddb)
    ddb.put_item(TableName=name, Item={PK: {"S": PARENT[PK]}, SK: {"S": "META"}, TALLY: {"N": "3"}})  # drifted
    existing = [f"{PREFIX}e{i:04d}" for i in range(size)]
    for key in existing:
        ddb.put_item(TableName=name, Item={PK: {"S": PARENT[PK]}, SK: {"S": key}, "role": {"S": "member"}})
    injector = with_faults(seed)
    counts = RefCount(
        name, tally_attribute=TALLY, pk=PK, sk=SK, mark=MARK, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
    )
    history = History(base=size, floor=0)
    intents = [("link", f"{PREFIX}n{i:04d}") for i in range(size)] + [("unlink", key) for key in existing[::2]]
    random.Random(seed).shuffle(intents)
    returned, lock, quarter = [0], threading.Lock(), threading.Event()

    def intent_task(kind: str, key: str) -> Callable[[], None]:
        def run() -> None:
            op = history.invoke(f"{kind}:{key}", 1 if kind == "link" else -1)
            status = "unknown"  # a refusal after a lost answer may be our own first write: not a "fail"
            for _ in range(2):  # every request sent twice (a client retry / redelivery)
                result = (
                    counts.link(PARENT, {PK: PARENT[PK], SK: key, "role": "member"})
                    if kind == "link"
                    else counts.unlink(PARENT, {PK: PARENT[PK], SK: key})
                )
                if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
                    status = "ok"
            history.complete(op, status)
            with lock:
                returned[0] += 1
                if returned[0] * 4 >= len(intents):
                    quarter.set()

        return run

    errors: list[BaseException] = []

    def backfill() -> None:
        quarter.wait()
        try:
            while True:
                try:
                    if counts.adopt(PARENT, PREFIX, page_size=25).exact:
                        return
                except ContentionError:
                    continue  # resumes from the parent's cursor
        except BaseException as exc:  # noqa: BLE001  # reported below
            errors.append(exc)

    backfills = [threading.Thread(target=backfill) for _ in range(2)]
    for thread in backfills:
        thread.start()
    run_parallel([intent_task(k, key) for k, key in intents], clients)
    quarter.set()
    for thread in backfills:
        thread.join()
    injector.detach()
    tally, stored, unmarked = _children(ddb, name)
    report = history.check(
        "refcount adopted on an existing table (mark + backfill), writes flowing",
        tally,
        documented="exact",
        faults=sum(injector.injected.values()),
    )
    report.over += max(0, tally - stored)  # the tally against the children the table holds
    report.under += max(0, stored - tally)
    report.notes.append(f"{size} children before; {stored} after, {unmarked} without the mark; tally {tally}")
    if errors:
        report.notes.append(f"backfill failed: {errors[0]!r}")
        report.breaches += 1
    ddb.delete_table(TableName=name)
    return [report]
