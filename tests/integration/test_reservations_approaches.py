"""Each approach's docstring, sentence by sentence, against DynamoDB Local with injected faults.

The faults fixture attaches to the layer's client: ``after_commit`` (committed, caller gets a
500), ``resend`` (botocore re-sends a committed request: an SDK retry), ``unavailable`` (a 500
before sending), ``conflict``/``throttle``. ``on_call`` runs a competing write in the middle of
a call (another writer between our write and our re-read).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.config import Config

from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.primitives.approaches import create
from counters.primitives.approaches.crt import client_request_token
from counters.store.items import from_item, to_item

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)
KEY = {"PK": "RES#c1", "SK": "META"}


def make(name: str, table: str, capacity: int = 10, **options: Any) -> Any:
    approach = create(name, table, retry=FAST, **options)
    # arranged with a plain client: the layer's own refuses calls made outside its retry engine
    boto3.client("dynamodb").put_item(TableName=table, Item=to_item({**KEY, **approach.initial_attributes(capacity)}))
    return approach


def state(ddb: Any, table: str, key: dict[str, str] = KEY) -> dict[str, Any]:
    return from_item(ddb.get_item(TableName=table, Key=to_item(key), ConsistentRead=True).get("Item")) or {}


def on_call(client: Any, operation: str, fn: Callable[[], Any], *, when: str = "after", times: int = 1) -> None:
    """Run ``fn`` (a competing writer) around the next ``times`` calls of ``operation``."""
    left = [times]

    def hook(**_: Any) -> None:
        if left[0] > 0:
            left[0] -= 1
            fn()

    client.meta.events.register(f"{when}-call.dynamodb.{operation}", hook, unique_id=f"on-call-{uuid.uuid4()}")


# ------------------------------------------------------------------------------------ atomic
def test_atomic_refuses_a_client_with_sdk_retries(layer_client: Any, table: str, dynamodb_endpoint: str) -> None:
    retrying = boto3.client(
        "dynamodb", endpoint_url=dynamodb_endpoint, config=Config(retries={"mode": "standard", "total_max_attempts": 3})
    )
    with pytest.raises(ValueError, match="SDK retries off"):
        create("atomic", table, dynamodb=retrying)
    create("atomic", table, dynamodb=layer_client)  # the layer's client: total_max_attempts=1


def test_atomic_sdk_resend_applies_twice_which_is_why_retries_are_off(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    atomic = make("atomic", table)
    faults.add("resend", operations={"UpdateItem"}, limit=1)
    assert atomic.apply(KEY, 2).outcome is Outcome.APPLIED
    assert state(ddb, table)["reserved"] == 4  # one call, counted twice, and nobody knows


def test_atomic_under_never_resends_an_unknown_outcome(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    atomic = make("atomic", table, policy="under")
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    result = atomic.apply(KEY, 2)
    assert (result.outcome, result.reason, result.attempts) == (Outcome.AMBIGUOUS, "not_retried", 1)
    assert state(ddb, table)["reserved"] == 2  # committed once, reported ambiguous: never twice
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    assert atomic.apply(KEY, 3).outcome is Outcome.AMBIGUOUS
    assert state(ddb, table)["reserved"] == 2  # not sent, also ambiguous: this one is lost (under-count)


def test_atomic_over_resends_and_may_apply_twice(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    atomic = make("atomic", table, policy="over")
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    result = atomic.apply(KEY, 2)
    assert (result.outcome, result.reason, result.attempts) == (Outcome.APPLIED, "retried_after_unknown", 2)
    assert state(ddb, table)["reserved"] == 4  # over-applied: never under
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    assert atomic.apply(KEY, 1).outcome is Outcome.APPLIED
    assert state(ddb, table)["reserved"] == 5  # not sent the first time: the re-send is the only one
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    result = atomic.apply(KEY, 4)  # commits (9 of 10), the re-send hits the threshold
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, "unknown_then_rejected")
    assert state(ddb, table)["reserved"] == 9


def test_atomic_thresholds_and_redelivery(layer_client: Any, ddb: Any, table: str) -> None:
    atomic = make("atomic", table, capacity=3)
    assert atomic.apply(KEY, 2, token="t").outcome is Outcome.APPLIED
    assert atomic.apply(KEY, 2, token="t").outcome is Outcome.REJECTED  # the ceiling, not the token
    result = atomic.apply(KEY, 1, token="t")
    assert result.outcome is Outcome.APPLIED  # a redelivery is not recognised
    assert state(ddb, table)["reserved"] == 3
    result = atomic.apply(KEY, -4)
    assert (result.outcome, result.reason, result.value.reserved) == (Outcome.REJECTED, "threshold", 3)  # the floor
    assert atomic.apply({"PK": "RES#none", "SK": "META"}, 1).reason == "missing"


# ------------------------------------------------------------------------------------ occ
def test_occ_unknown_outcome_with_our_tag_is_applied(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    result = occ.apply(KEY, 2)
    assert (result.outcome, result.reason) == (Outcome.APPLIED, "confirmed_after_unknown")
    assert faults.calls["UpdateItem"] == 1 and state(ddb, table)["reserved"] == 2


def test_occ_unknown_outcome_with_tag_unchanged_is_retried_safely(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    assert occ.apply(KEY, 2).outcome is Outcome.APPLIED
    assert faults.calls["UpdateItem"] == 2 and state(ddb, table)["reserved"] == 2


def test_occ_third_tag_is_ambiguous(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    other = create("occ", table, dynamodb=ddb, retry=FAST)
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    on_call(layer_client, "UpdateItem", lambda: other.apply(KEY, 1))  # another writer before our re-read
    result = occ.apply(KEY, 2)
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, "third_tag")
    assert state(ddb, table)["reserved"] == 3  # ours did apply, once; the approach cannot know


def test_occ_sdk_resend_is_recognised_but_redelivery_is_not(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("resend", operations={"UpdateItem"}, limit=1)
    result = occ.apply(KEY, 2, token="t")
    assert (result.outcome, result.reason) == (Outcome.APPLIED, "confirmed_after_resend")
    assert state(ddb, table)["reserved"] == 2
    assert occ.apply(KEY, 2, token="t").outcome is Outcome.APPLIED  # the token is ignored
    assert state(ddb, table)["reserved"] == 4
    assert occ.apply(KEY, 7).reason == "threshold" and state(ddb, table)["reserved"] == 4


def late_landing(client: Any, ddb: Any, operation: str, other: Callable[[], Any]) -> None:
    """A send of ``operation`` whose outcome is unknown and which lands late, as a timed-out request
    still in flight does: the first send is answered with a 500 and not applied (``unavailable``,
    added by the caller); right after the caller's re-read of the item (its second GetItem), that
    identical request lands (sent with the plain client ``ddb``), then ``other`` writes."""
    sent: list[dict[str, Any]] = []
    reads = [0]

    def capture(params: dict[str, Any], **_: Any) -> None:
        if not sent:
            sent.append(dict(params))

    def land(**_: Any) -> None:
        reads[0] += 1
        if reads[0] == 2:  # the re-read after the unknown outcome saw the old tag
            getattr(ddb, xform_name(operation))(**sent[0])  # the first send commits now
            other()  # and another writer commits after it

    client.meta.events.register(f"provide-client-params.dynamodb.{operation}", capture, unique_id=f"late-{uuid.uuid4()}")
    client.meta.events.register("after-call.dynamodb.GetItem", land, unique_id=f"late-read-{uuid.uuid4()}")


def test_occ_a_late_landing_send_then_another_writer_is_ambiguous_not_a_second_round(
    layer_client: Any, faults: Any, ddb: Any, table: str
) -> None:
    """Our write's outcome is unknown; the re-read sees the old tag, so the same write is re-sent;
    meanwhile the first send commits and another writer commits after it; the re-send fails its
    condition and ALL_OLD shows the other writer's tag. A next round would apply the call twice."""
    occ = make("occ", table)
    other = create("occ", table, dynamodb=ddb, retry=FAST)
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    late_landing(layer_client, ddb, "UpdateItem", lambda: other.apply(KEY, 1))
    result = occ.apply(KEY, 2)
    assert state(ddb, table)["reserved"] == 3, "the call applied twice (a next round after a send that landed late)"
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, "third_tag")


@pytest.mark.parametrize("guard", ["on", "off"])
def test_occ_history_of_the_late_landing_interleaving_is_linearizable_only_with_the_guard(
    guard: str, layer_client: Any, faults: Any, ddb: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving above, recorded as a history (our take, the other writer's, reads) and checked
    against occ's model (a bounded counter, each call applied at most once): with the ambiguity
    rule off, the call applies twice and the history is NOT LINEARIZABLE."""
    from counters.primitives.approaches import occ as occ_module
    from proof.linearizability import OK, BoundedCounter, Recorder, check

    if guard == "off":
        monkeypatch.setattr(occ_module, "may_have_landed", lambda _report: False)
    occ = make("occ", table)
    other = create("occ", table, dynamodb=ddb, retry=FAST)
    calls = Recorder()

    def read() -> None:
        handle = calls.invoke("r", "read")
        calls.complete(handle, state(ddb, table)["reserved"])

    def other_take() -> None:
        handle = calls.invoke("r", "reserve", 1)
        calls.complete(handle, OK if other.apply(KEY, 1).succeeded else None)
        read()

    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    late_landing(layer_client, ddb, "UpdateItem", other_take)
    ours = calls.invoke("r", "reserve", 2)
    result = occ.apply(KEY, 2)
    calls.complete(ours, OK if result.succeeded else None)
    read()
    verdict = check(BoundedCounter(10), calls.history())
    assert verdict.result == ("linearizable" if guard == "on" else "NOT LINEARIZABLE"), (result, calls.history())


def test_occ_a_late_landing_send_alone_is_recognised(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    late_landing(layer_client, ddb, "UpdateItem", lambda: None)
    result = occ.apply(KEY, 2)
    assert (result.outcome, result.reason) == (Outcome.APPLIED, "confirmed_after_resend")
    assert state(ddb, table)["reserved"] == 2


def test_occ_budget_out_after_an_unknown_outcome_is_ambiguous(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    faults.add("throttle", operations={"UpdateItem"})
    assert occ.apply(KEY, 2).outcome is Outcome.AMBIGUOUS  # the first send may still land: not "nothing applied"


def test_occ_sdk_resend_past_another_writer_applies_twice_which_is_why_retries_are_off(
    layer_client: Any, faults: Any, ddb: Any, table: str
) -> None:
    """An SDK re-send is invisible to occ: with another writer between the two sends it is a lost race."""
    occ = make("occ", table)
    other = create("occ", table, dynamodb=ddb, retry=FAST)
    faults.add("resend", operations={"UpdateItem"}, limit=1)
    between = [True]

    def interleave(**_: Any) -> None:
        if between and faults.injected["resend"]:
            between.clear()
            other.apply(KEY, 1)

    layer_client.meta.events.register("before-send.dynamodb.UpdateItem", interleave, unique_id=f"between-{uuid.uuid4()}")
    assert occ.apply(KEY, 2).outcome is Outcome.APPLIED
    assert state(ddb, table)["reserved"] == 5  # one call, applied twice, and nobody knows


# ------------------------------------------------------------------------------------ occ_history
def test_occ_history_resolves_unknown_outcomes_and_duplicates(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ_history", table)
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    assert occ.apply(KEY, 2, token="a").outcome is Outcome.APPLIED
    faults.add("resend", operations={"UpdateItem"}, limit=1)
    assert occ.apply(KEY, 1, token="b").succeeded  # committed, the re-send found our tag
    assert occ.apply(KEY, 2, token="a").outcome is Outcome.DUPLICATE
    assert occ.apply(KEY, 1, token="b").outcome is Outcome.DUPLICATE
    item = state(ddb, table)
    assert item["reserved"] == 3 and item["version"] == 2 and len(item["tags"]) == 2


def test_occ_history_a_third_tag_within_the_chain_is_not_ambiguous(layer_client: Any, ddb: Any, table: str) -> None:
    """A 500 before sending while another writer takes the next version: the chain shows the
    slot our write would have taken belongs to someone else -> definitely not applied: retry."""
    from botocore.exceptions import ClientError

    occ = make("occ_history", table)
    other = create("occ_history", table, dynamodb=ddb, retry=FAST)

    def compete_then_fail() -> None:
        other.apply(KEY, 1, token="other")
        raise ClientError({"Error": {"Code": "InternalServerError"}, "ResponseMetadata": {"HTTPStatusCode": 500}}, "UpdateItem")

    on_call(layer_client, "UpdateItem", compete_then_fail, when="before")
    result = occ.apply(KEY, 2, token="mine")
    assert result.outcome is Outcome.APPLIED and result.attempts == 2
    assert state(ddb, table)["reserved"] == 3


def test_occ_history_is_ambiguous_only_when_its_slot_fell_off_the_chain(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ_history", table, history=3)
    other = create("occ_history", table, dynamodb=ddb, retry=FAST, history=3)
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    on_call(layer_client, "UpdateItem", lambda: [other.apply(KEY, 1, token=f"o{i}") for i in range(3)])
    result = occ.apply(KEY, 2, token="mine")
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, "fell_off_chain")
    assert state(ddb, table)["reserved"] == 5


def test_occ_history_a_late_landing_send_whose_slot_left_the_chain_is_ambiguous(
    layer_client: Any, faults: Any, ddb: Any, table: str
) -> None:
    occ = make("occ_history", table, history=3)
    other = create("occ_history", table, dynamodb=ddb, retry=FAST, history=3)
    faults.add("unavailable", operations={"UpdateItem"}, limit=1)
    late_landing(layer_client, ddb, "UpdateItem", lambda: [other.apply(KEY, 1, token=f"o{i}") for i in range(3)])
    result = occ.apply(KEY, 2, token="mine")
    assert state(ddb, table)["reserved"] == 5, "the call applied twice (a next round after a send that landed late)"
    assert (result.outcome, result.reason) == (Outcome.AMBIGUOUS, "fell_off_chain")


def test_occ_history_bound_a_duplicate_older_than_the_chain_applies_again(layer_client: Any, ddb: Any, table: str) -> None:
    occ = make("occ_history", table, history=3)
    assert occ.apply(KEY, 1, token="old").outcome is Outcome.APPLIED
    for i in range(2):
        occ.apply(KEY, 1, token=f"n{i}")
    assert occ.apply(KEY, 1, token="old").outcome is Outcome.DUPLICATE  # still among the last 3
    occ.apply(KEY, 1, token="n2")
    assert occ.apply(KEY, 1, token="old").outcome is Outcome.APPLIED  # fell off: counted twice
    assert state(ddb, table)["reserved"] == 5


# ------------------------------------------------------------------------------------ crt
def test_crt_token_is_deterministic_and_fits_the_api() -> None:
    token = client_request_token("resource-1|order-42", "RES#r1")
    assert token == client_request_token("resource-1|order-42", "RES#r1") and len(token) == 36
    assert token != client_request_token("resource-1|order-43", "RES#r1")


@pytest.mark.parametrize("kind", ["after_commit", "resend", "conflict", "throttle", "unavailable"])
def test_crt_faults_never_apply_twice(kind: str, layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    crt = make("crt", table)
    faults.add(kind, operations={"TransactWriteItems"}, limit=1)
    assert crt.apply(KEY, 2, token=table).outcome is Outcome.APPLIED
    assert faults.injected[kind] == 1 and state(ddb, table)["reserved"] == 2


def test_crt_redelivery_replays_within_the_window_and_mismatch_is_rejected(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    crt = make("crt", table)
    assert crt.apply(KEY, 2, token="t").outcome is Outcome.APPLIED
    assert crt.apply(KEY, 2, token="t").succeeded  # replayed by DynamoDB: nothing changes
    assert state(ddb, table)["reserved"] == 2
    result = crt.apply(KEY, 3, token="t")
    assert (result.outcome, result.reason) == (Outcome.REJECTED, "token_mismatch")
    assert crt.apply(KEY, 9, token="u").reason == "threshold"
    assert state(ddb, table)["reserved"] == 2


# ------------------------------------------------------------------------------------ marker
def test_marker_tells_duplicate_from_threshold(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    marker = make("marker", table, capacity=5)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=1)
    assert marker.apply(KEY, 3, token="t", record={"resourceId": "c1"}).outcome is Outcome.APPLIED
    faults.add("resend", operations={"TransactWriteItems"}, limit=1)
    assert marker.apply(KEY, 1, token="u").outcome is Outcome.APPLIED
    stored = state(ddb, table, {"PK": "RSV#t", "SK": "RSV"})
    assert stored["quantity"] == 3 and stored["status"] == "CONFIRMED" and stored["resourceId"] == "c1"
    assert "expiresAt" not in stored and stored["allocation"] == {"RES#c1": 3}  # a hold never expires (the release starts the TTL)
    result = marker.apply(KEY, 3, token="t")  # a redelivery: the marker's condition cancels it
    assert (result.outcome, result.reason) == (Outcome.DUPLICATE, "marker_exists")
    assert marker.apply(KEY, 2, token="t").reason == "token_mismatch"
    result = marker.apply(KEY, 2, token="v")
    assert (result.outcome, result.reason, result.value.available) == (Outcome.REJECTED, "threshold", 1)
    assert state(ddb, table, {"PK": "RSV#v", "SK": "RSV"}) == {}  # no marker for a rejected take
    assert state(ddb, table)["reserved"] == 4


# ------------------------------------------------------------------------------------ set
def test_set_unknown_outcomes_and_redelivery_count_once(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    tokens = make("set", table)
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)
    result = tokens.apply(KEY, 2, token="t")
    assert (result.outcome, result.reason) == (Outcome.APPLIED, "token_in_set")  # the re-send found our token
    faults.add("resend", operations={"UpdateItem"}, limit=1)
    assert tokens.apply(KEY, 1, token="u").succeeded
    assert tokens.apply(KEY, 2, token="t").outcome is Outcome.DUPLICATE
    item = state(ddb, table)
    assert item["reserved"] == 3 and item["tokens"] == {"t", "u"}


def test_set_full_is_a_clear_rejection_and_release_removes_the_token_once(layer_client: Any, ddb: Any, table: str) -> None:
    tokens = make("set", table, max_tokens=3)
    for t in "abc":
        assert tokens.apply(KEY, 1, token=t).outcome is Outcome.APPLIED
    result = tokens.apply(KEY, 1, token="d")
    assert (result.outcome, result.reason) == (Outcome.REJECTED, "set_full")
    assert tokens.apply(KEY, -1, token="a").outcome is Outcome.APPLIED
    assert tokens.apply(KEY, -1, token="a").outcome is Outcome.DUPLICATE  # released once only
    assert tokens.apply(KEY, 1, token="d").outcome is Outcome.APPLIED
    item = state(ddb, table)
    assert item["reserved"] == 3 and item["available"] == 7 and item["tokens"] == {"b", "c", "d"}


def test_set_cap_keeps_an_update_under_10_wcu(layer_client: Any, table: str) -> None:
    """WCU per take as the set grows (DynamoDB Local reports real single-item capacity)."""
    tokens = make("set", table, capacity=1000)
    wcu = [tokens.apply(KEY, 1, token=str(uuid.uuid4())).capacity.write_units for _ in range(tokens.max_tokens)]
    print(f"\nMEASURE set WCU by set size: 1->{wcu[0]} 27->{wcu[26]} 28->{wcu[27]} 100->{wcu[99]} 250->{wcu[249]}")
    assert wcu[0] == 1.0 and wcu[26] == 1.0 and wcu[27] == 2.0
    assert max(wcu) <= 10.0
    assert tokens.apply(KEY, 1, token="one-more").reason == "set_full"


# ------------------------------------------------------------------------------------ sharding
def test_sharding_falls_to_another_shard_before_splitting(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    import random

    from counters.primitives import sharding

    atomic = create("atomic", table, retry=FAST)
    keys = [sharding.shard_key("s", n) for n in range(2)]
    for key in keys:
        ddb.put_item(TableName=table, Item=to_item({**key, **atomic.initial_attributes(2)}))
    for _ in range(2):  # the same first shard both times: the second take must fall to the other
        result = sharding.take(atomic, keys, 2, token=None, rng=random.Random(0))
        assert result.outcome is Outcome.APPLIED and sum((result.value.allocation or {}).values()) == 2
    assert faults.calls["TransactGetItems"] == 0 and faults.calls["TransactWriteItems"] == 0  # no snapshot, no split
    result = sharding.take(atomic, keys, 1, token=None)
    assert (result.outcome, result.reason, result.value.available) == (Outcome.REJECTED, "sold_out", 0)
    assert [state(ddb, table, k)["available"] for k in keys] == [0, 0]


def test_shard_snapshot_retries_a_conflicting_read(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    from counters.core.outcome import Capacity
    from counters.primitives import sharding
    from counters.store.resources import ResourceStore

    keys = [sharding.shard_key("s", n) for n in range(2)]
    for key in keys:
        ddb.put_item(TableName=table, Item=to_item({**key, "reserved": 1, "available": 2}))
    faults.add("conflict", operations={"TransactGetItems"}, limit=2)
    items = ResourceStore(table, dynamodb=layer_client, retry=FAST).snapshot(keys, Capacity())
    assert [i.available for i in items] == [2, 2] and faults.calls["TransactGetItems"] == 3


# ------------------------------------------------------------------------------------ remaining docstring sentences
@pytest.mark.parametrize("kind", ["conflict", "throttle"])
def test_atomic_definite_failures_are_retried_and_apply_once(kind: str, layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    atomic = make("atomic", table, policy="under")
    faults.add(kind, operations={"UpdateItem"}, limit=2)
    result = atomic.apply(KEY, 2)
    assert (result.outcome, result.attempts) == (Outcome.APPLIED, 3)
    assert state(ddb, table)["reserved"] == 2


def test_occ_contention_past_the_budget_applies_nothing(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    occ = make("occ", table)
    faults.add("conflict", operations={"UpdateItem"})
    result = occ.apply(KEY, 2)
    assert (result.outcome, result.attempts) == (Outcome.CONTENTION, FAST.max_attempts)
    assert state(ddb, table)["reserved"] == 0


def test_occ_history_chain_stays_bounded_and_one_wcu(layer_client: Any, ddb: Any, table: str) -> None:
    occ = make("occ_history", table, capacity=100)
    results = [occ.apply(KEY, 1, token=f"t{i}") for i in range(40)]
    item = state(ddb, table)
    assert len(item["tags"]) == 32 and item["version"] == 40 and item["reserved"] == 40
    assert {r.capacity.write_units for r in results} == {1.0}  # ~0.7 KB item: one WCU per write


def test_crt_contention_after_unknown_outcomes_is_safe_to_redrive(layer_client: Any, faults: Any, ddb: Any, table: str) -> None:
    crt = make("crt", table)
    faults.add("after_commit", operations={"TransactWriteItems"}, limit=FAST.max_attempts)
    assert crt.apply(KEY, 2, token="t").outcome is Outcome.CONTENTION  # it committed; every reply was lost
    assert crt.apply(KEY, 2, token="t").succeeded  # the re-drive replays
    assert state(ddb, table)["reserved"] == 2
