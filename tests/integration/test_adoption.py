"""Adopting a reference count on a table whose children exist already (docs/migration.md).

A parent with children and a drifted tally: writers link and unlink on several threads, before and
while the backfill runs, under injected throttles, conflicts, errors after commit and SDK re-sends;
at the end the tally equals the children stored (read from the table, not from the answers), every
child carries the mark, and the parent says ``adopted``. The table uses its own key names.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.core.failures import RetryPolicy
from counters.core.outcome import Capacity, Outcome
from counters.primitives.refcount import Reason, RefCount
from counters.store.refcounts import Round
from proof.adopt import own_keys_table, partition
from testkit.faults import FaultInjector

PK, SK, TALLY, MARK = "ownerId", "itemKey", "memberCount", "counted"
PARENT = {PK: "WS#acme", SK: "META"}
PREFIX = "MEMBER#"
PATIENT = RetryPolicy(max_attempts=12, base_delay=0.001, max_delay=0.01)
JOIN_S = 600.0
"""A hang guard for the writer threads, not a speed bound."""


@pytest.fixture
def own_table(ddb: Any) -> Iterator[str]:
    """A table whose key attributes are the user's own names (not ``PK``/``SK``)."""
    name = own_keys_table(ddb, "tally-adopt")
    yield name
    ddb.delete_table(TableName=name)


def existing(ddb: Any, table: str, n: int, tally: int | None = 7) -> None:
    """The table before adoption: the parent (a drifted tally, or none) and ``n`` children written without one."""
    parent = {PK: {"S": PARENT[PK]}, SK: {"S": "META"}, "name": {"S": "Acme"}}
    if tally is not None:
        parent[TALLY] = {"N": str(tally)}
    ddb.put_item(TableName=table, Item=parent)
    for i in range(n):
        ddb.put_item(TableName=table, Item={PK: {"S": PARENT[PK]}, SK: {"S": f"{PREFIX}u{i:03d}"}, "role": {"S": "member"}})


def stored(ddb: Any, table: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """(the parent's tally, the children as stored, the parent), read from the table."""
    items = partition(ddb, table, PARENT[PK])
    parent = next(i for i in items if i[SK]["S"] == "META")
    children = [i for i in items if i[SK]["S"].startswith(PREFIX)]
    return int(parent.get(TALLY, {"N": "0"})["N"]), children, parent


def refcount(table: str, client: Any) -> RefCount:
    """The user's RefCount: their key names, their tally's name, the mark that says "counted"."""
    return RefCount(table, tally_attribute=TALLY, pk=PK, sk=SK, mark=MARK, dynamodb=client, retry=PATIENT)


def child(user: int) -> dict[str, Any]:
    return {PK: PARENT[PK], SK: f"{PREFIX}u{user:03d}", "role": "member"}


def assert_exact(ddb: Any, table: str) -> int:
    tally, children, parent = stored(ddb, table)
    assert tally == len(children), f"tally {tally}, children stored {len(children)}"
    assert all(c.get(MARK) == {"BOOL": True} for c in children), "a child the tally counts carries the mark"
    assert parent[f"{TALLY}Adoption"] == {"S": "adopted"}
    return tally


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_backfill_is_exact_with_writes_flowing_and_faults_on(seed: int, own_table: str, ddb: Any, layer_client: Any) -> None:
    existing(ddb, own_table, 120)
    faults = FaultInjector(layer_client, seed=seed)
    for kind in ("throttle", "conflict", "after_commit", "unavailable"):
        faults.add(kind, rate=0.04)
    faults.add("resend", rate=0.04)
    counts = refcount(own_table, layer_client)
    started, adopted = threading.Event(), threading.Event()
    done_ops = [0]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        try:
            after = 0
            while after < 40:  # until 40 operations after the adoption is done: writes before, during and after
                user = rng.randrange(200)  # the 120 existing children and new ones
                if rng.random() < 0.5:
                    counts.link(PARENT, child(user))
                else:
                    counts.unlink(PARENT, {PK: PARENT[PK], SK: child(user)[SK]})
                with lock:
                    done_ops[0] += 1
                    if done_ops[0] >= 30:
                        started.set()
                if adopted.is_set():
                    after += 1
        except BaseException as exc:  # noqa: BLE001  # surfaced by the test
            errors.append(exc)
            started.set()

    def backfill() -> None:
        try:
            while True:
                try:
                    if counts.adopt(PARENT, PREFIX, page_size=16).exact:
                        return
                except ContentionError:
                    continue  # resumes from the parent's cursor
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in writers:
        thread.start()
    assert started.wait(JOIN_S)  # some links and unlinks ran before the adoption began (the legacy rule)
    backfills = [threading.Thread(target=backfill) for _ in range(2)]  # two at once: a re-run operator, a retried job
    for thread in backfills:
        thread.start()
    for thread in backfills:
        thread.join(JOIN_S)
    adopted.set()
    for thread in writers:
        thread.join(JOIN_S)
    faults.detach()
    assert not errors, errors
    assert sum(faults.injected.values()) > 0
    assert_exact(ddb, own_table)
    # and it stays exact: the answers of maintained counts agree with the table
    after = refcount(own_table, layer_client)
    assert after.link(PARENT, child(999)).outcome is Outcome.APPLIED
    assert_exact(ddb, own_table)


class Crash(Exception):
    """The backfill's process dies."""


def test_a_backfill_that_crashed_mid_way_resumes_and_is_exact(own_table: str, ddb: Any, layer_client: Any) -> None:
    existing(ddb, own_table, 60, tally=None)
    counts = refcount(own_table, layer_client)
    steps = [0]
    real = counts.store.count_child

    def dies_after_the_25th(*args: Any, **kwargs: Any) -> Any:
        report = real(*args, **kwargs)  # committed, then the process dies before the page's cursor is written
        steps[0] += 1
        if steps[0] == 25:
            raise Crash
        return report

    counts.store.count_child = dies_after_the_25th  # type: ignore[method-assign]
    with pytest.raises(Crash):
        counts.adopt(PARENT, PREFIX, page_size=10)
    state = counts.adoption(PARENT)
    assert state is not None and state.state == "adopting" and state.cursor == f"{PREFIX}u019"  # two pages recorded
    # writes while it is down: a new child, an unlink of a counted one and of an uncounted one
    assert counts.link(PARENT, child(500)).outcome is Outcome.APPLIED
    assert counts.unlink(PARENT, {PK: PARENT[PK], SK: f"{PREFIX}u003"}).outcome is Outcome.APPLIED
    assert counts.unlink(PARENT, {PK: PARENT[PK], SK: f"{PREFIX}u050"}).outcome is Outcome.APPLIED
    resumed = refcount(own_table, layer_client)
    result = resumed.adopt(PARENT, PREFIX, page_size=10)
    assert result.exact
    assert result.counted == 60 - 25 - 1  # resumed after the cursor: the page that crashed again (its 5 skipped), not the start
    assert assert_exact(ddb, own_table) == 60 - 2 + 1
    assert resumed.adopt(PARENT, PREFIX).counted == 0  # adopted: nothing more to do


def test_the_backfill_costs_one_transaction_a_child_and_one_query_and_cursor_write_a_page(
    own_table: str, ddb: Any, layer_client: Any
) -> None:
    """The cost docs/migration.md states: per existing child one transaction of two items; per page
    one strongly consistent Query (item bytes / 4 KB) and one cursor write."""
    existing(ddb, own_table, 250, tally=None)  # children of about 42 bytes
    counts = refcount(own_table, layer_client)
    result = counts.adopt(PARENT, PREFIX, page_size=100)
    assert (result.exact, result.counted, result.pages) == (True, 250, 3)
    # begin, 3 Query pages, 250 steps, 3 cursor writes, the last read of the parent
    assert result.capacity.calls == 1 + 3 + 250 + 3 + 1
    # strongly consistent, item bytes rounded up to 4 KB: 100 children of ~42 bytes 2 RCU, the last 50 1 RCU; the parent 1
    assert result.capacity.read_units == 2 + 2 + 1 + 1


def test_each_guard_holds_in_the_order_that_would_break_it(own_table: str, ddb: Any, layer_client: Any) -> None:
    """The interleavings a timing can produce, made one at a time: a refused write is the guard."""
    existing(ddb, own_table, 4, tally=2)  # u000..u003; a drifted tally
    counts = refcount(own_table, layer_client)
    store, key = counts.store, {PK: PARENT[PK], SK: f"{PREFIX}u000"}
    # an unlink before it begins: the old rule, found in two transactions (the counted one's refusal shows the parent has not begun)
    early = counts.unlink(PARENT, {PK: PARENT[PK], SK: f"{PREFIX}u003"})
    assert (early.outcome, early.attempts, stored(ddb, own_table)[0]) == (Outcome.APPLIED, 2, 1)
    # before it begins: a counted link (decided on a stale read) would be wiped by begin's reset
    assert store.link_round(PARENT, child(7), None, PATIENT, Round.COUNTED).report.outcome is Outcome.REJECTED
    assert store.count_child(PARENT, key, PATIENT, Capacity()).outcome is Outcome.REJECTED  # nothing counts before begin
    assert counts.begin(PARENT).tally == 0
    counts.link(PARENT, child(8))
    assert counts.begin(PARENT).tally == 1  # a second begin resets nothing
    # after it began: a legacy link (decided before) would be counted again by the backfill
    assert store.link_round(PARENT, child(9), None, PATIENT, Round.LEGACY).report.outcome is Outcome.REJECTED
    assert store.unlink_round(PARENT, key, None, PATIENT, Round.LEGACY).report.outcome is Outcome.REJECTED
    # the backfill's step, sent twice (a re-send after its token expired): counted once
    assert store.count_child(PARENT, key, PATIENT, Capacity()).outcome is Outcome.APPLIED
    assert store.count_child(PARENT, key, PATIENT, Capacity()).outcome is Outcome.REJECTED
    # an uncounted unlink decided before the backfill marked the child: it would delete a counted child
    assert store.unlink_round(PARENT, key, None, PATIENT, Round.UNCOUNTED).report.outcome is Outcome.REJECTED
    # a counted unlink of a child the backfill has not reached: it would take off what was never counted
    other = {PK: PARENT[PK], SK: f"{PREFIX}u001"}
    assert store.unlink_round(PARENT, other, None, PATIENT, Round.COUNTED).report.outcome is Outcome.REJECTED
    assert counts.unlink(PARENT, other).outcome is Outcome.APPLIED  # deleted, the tally untouched
    # a child the walk read, unlinked before its step: the step must not bring it back
    gone = {PK: PARENT[PK], SK: f"{PREFIX}u002"}
    counts.unlink(PARENT, gone)
    assert store.count_child(PARENT, gone, PATIENT, Capacity()).outcome is Outcome.REJECTED
    assert "Item" not in ddb.get_item(TableName=own_table, Key={PK: {"S": PARENT[PK]}, SK: {"S": f"{PREFIX}u002"}})
    assert counts.adopt(PARENT, PREFIX).exact
    assert assert_exact(ddb, own_table) == 2  # u000 (backfilled), u008 (linked)
    assert counts.unlink(PARENT, {PK: PARENT[PK], SK: f"{PREFIX}u404"}).reason == Reason.NOT_LINKED


# --------------------------------------------------------------------------- Tally's posts
def seed01_post(ddb: Any, table: str, post_id: str, likes: int, tally: int | None) -> None:
    """A post as seed 01 lays it out, written by another program: ``META`` (a drifted ``likeTally``,
    or none) and ``LIKE#USER#`` children with ``likedAt`` only."""
    meta = {"PK": {"S": f"POST#{post_id}"}, "SK": {"S": "META"}, "body": {"S": "hello"}, "authorId": {"S": "a1"}}
    if tally is not None:
        meta["likeTally"] = {"N": str(tally)}
    ddb.put_item(TableName=table, Item=meta)
    for i in range(likes):
        item = {"PK": {"S": f"POST#{post_id}"}, "SK": {"S": f"LIKE#USER#u{i:03d}"}, "likedAt": {"N": "1750636800"}}
        ddb.put_item(TableName=table, Item=item)


def post_stored(ddb: Any, table: str, post_id: str) -> tuple[int, int]:
    """(META's likeTally, the like items that count: ``liked`` absent or true), read from the table."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"POST#{post_id}"}},
        "ConsistentRead": True,
    }
    while True:
        page = ddb.query(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    meta = next(i for i in items if i["SK"]["S"] == "META")
    liked = [i for i in items if i["SK"]["S"].startswith("LIKE#USER#") and i.get("liked") != {"BOOL": False}]
    return int(meta.get("likeTally", {"N": "0"})["N"]), len(liked)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_seed01_post_is_adopted_by_a_settled_repair_with_likes_flowing_and_faults_on(
    seed: int, table: str, ddb: Any, layer_client: Any
) -> None:
    """Tally's likes on a post another program wrote: the likes go through Tally from the switch on,
    and an audit at a settled point repairs the tally; it never lands while a like is counted
    during its count, and once it lands the tally is exact and stays so."""
    from counters.core.errors import IntegrityError
    from counters.services.likes import Likes

    seed01_post(ddb, table, "p1", 80, tally=5)
    faults = FaultInjector(layer_client, seed=seed)
    for kind in ("throttle", "conflict", "after_commit", "unavailable"):
        faults.add(kind, rate=0.04)
    faults.add("resend", rate=0.04)
    likes = Likes(table, dynamodb=layer_client, retry=PATIENT)
    writing = threading.Event()
    refused: list[str] = []
    errors: list[BaseException] = []

    def writer(n: int, requests: int, phase: int) -> None:
        rng = random.Random(seed * 100 + n * 10 + phase)
        try:
            for _ in range(requests):
                user = f"u{rng.randrange(120):03d}"
                try:
                    (likes.toggling.like if rng.random() < 0.5 else likes.toggling.unlike)("p1", user)
                except IntegrityError:
                    refused.append(f"{phase}:{user}")  # an unlike below a tally that trails the likes: refused, nothing written
                except ContentionError:
                    pass  # nothing known applied: a client retries (with faults, not a failure of the count)
        except BaseException as exc:  # noqa: BLE001  # surfaced by the test
            errors.append(exc)

    def audit_until_settled() -> bool:
        """Audits at settled points, with repair, while the writers run (each repair that lands
        lands on a count nothing moved during), then until one settles after they stopped."""
        while True:
            try:
                [result] = likes.audits.audit_posts(["p1"], repair=True)
            except ContentionError:
                continue
            if result.settled and (result.repaired or result.drift == 0) and not writing.is_set():
                return True

    def phase(requests: int, number: int) -> None:
        threads = [threading.Thread(target=writer, args=(n, requests, number)) for n in range(3)]
        writing.set()
        for thread in threads:
            thread.start()
        auditing = threading.Thread(target=audit_until_settled)
        auditing.start()
        for thread in threads:
            thread.join(JOIN_S)
        writing.clear()  # the auditor's next settled point has nothing moving: it lands or finds no drift
        auditing.join(JOIN_S)
        assert not auditing.is_alive() and not errors, errors

    phase(40, 1)  # likes flowing while the audits try to repair
    assert post_stored(ddb, table, "p1")[0] == post_stored(ddb, table, "p1")[1]
    phase(20, 2)  # and it stays exact: maintained counts from here
    faults.detach()
    assert not [r for r in refused if r.startswith("2:")]  # an exact tally refuses no unlike
    tally, liked = post_stored(ddb, table, "p1")
    assert tally == liked
    [again] = Likes(table).audits.audit_posts(["p1"])
    assert again.settled and again.drift == 0


# --------------------------------------------------------------------------- docs/migration.md as written
MARKER = "<!-- docs: run-by tests/integration/test_adoption.py -->"


def page_blocks() -> list[tuple[str, str | None]]:
    """Each Python block of docs/migration.md marked as run here, with the ``text`` block that
    shows its output (the next one before the next Python block), if any."""
    from devstack.template import ROOT

    lines = (ROOT / "docs" / "migration.md").read_text().splitlines()
    blocks: list[tuple[str, str | None]] = []
    i = 0
    while i < len(lines):
        if lines[i] == MARKER:
            assert lines[i + 1] == "```python", f"line {i + 2}: a marked block is a Python block"
            end = lines.index("```", i + 2)
            code = "\n".join(lines[i + 2 : end])
            output = None
            j = end + 1
            while j < len(lines) and lines[j] != MARKER and lines[j] != "```python":
                if lines[j] == "```text":
                    close = lines.index("```", j + 1)
                    output = "\n".join(lines[j + 1 : close]) + "\n"
                    break
                j += 1
            blocks.append((code, output))
            i = end
        i += 1
    return blocks


def test_the_migration_page_runs_as_written(ddb: Any, layer_client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from devstack.dynamodb_local import create_table
    from devstack.template import read_stack

    blocks = page_blocks()
    assert len(blocks) == 4
    ddb.create_table(
        TableName="workspaces",
        KeySchema=[{"AttributeName": PK, "KeyType": "HASH"}, {"AttributeName": SK, "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": PK, "AttributeType": "S"}, {"AttributeName": SK, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    create_table(ddb, read_stack("social"))
    try:
        ddb.get_waiter("table_exists").wait(TableName="workspaces", WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
        existing(ddb, "workspaces", 120)  # 120 members and a drifted memberCount, written by another program
        seed01_post(ddb, "social", "a91f", 3, tally=1)
        namespace: dict[str, Any] = {}
        for number, (code, output) in enumerate(blocks, 1):
            capsys.readouterr()
            exec(compile(code, f"docs/migration.md block {number}", "exec"), namespace)  # noqa: S102  # the page's own code
            if output is not None:
                assert capsys.readouterr().out == output, f"block {number}"
        assert assert_exact(ddb, "workspaces") == 120
        assert post_stored(ddb, "social", "a91f") == (3, 3)
    finally:
        ddb.delete_table(TableName="workspaces")
        ddb.delete_table(TableName="social")


@pytest.mark.parametrize("seed", [1, 2])
def test_the_proof_row_holds(seed: int, ddb: Any, layer_client: Any) -> None:
    """``make proof``'s ``refcount-adopt`` row, small: links and unlinks sent twice on 4 threads,
    two backfills, the proof's faults; exact against the intents and against the table."""
    from proof.scenarios import SCENARIOS

    [report] = SCENARIOS["refcount-adopt"](ddb, seed, 4, 60)
    assert report.faults > 0
    assert report.verdict == "holds", (report, report.notes)
