"""What a record of a Region's stream changes that Region's like tally by (a global table)."""

from __future__ import annotations

from typing import Any

from counters.streams import regional_change

A, B = "eu-west-1", "us-east-1"
KEYS = {"PK": {"S": "POST#p#S3"}, "SK": {"S": "LIKE#USER#u1"}}


def version(liked: bool, writer: str, delta: int) -> dict[str, Any]:
    return {**KEYS, "liked": {"BOOL": liked}, "writerRegion": {"S": writer}, "delta": {"N": str(delta)}}


def record(new: dict[str, Any] | None, old: dict[str, Any] | None, event: str = "MODIFY") -> dict[str, Any]:
    ddb: dict[str, Any] = {"Keys": KEYS, "SequenceNumber": "100", "ApproximateCreationDateTime": 1.5}
    if new is not None:
        ddb["NewImage"] = new
    if old is not None:
        ddb["OldImage"] = old
    return {"eventName": event, "dynamodb": ddb}


def delta(rec: dict[str, Any], region: str) -> int:
    change = regional_change(rec, region)
    return 0 if change is None else change.delta


def test_a_local_write_counts_its_own_delta() -> None:
    assert delta(record(version(True, A, 1), None, "INSERT"), A) == 1
    assert delta(record(version(False, A, -1), version(True, A, 1)), A) == -1
    assert delta(record(version(False, A, 0), version(True, B, 0)), A) == 0  # standard: counted in its transaction


def test_a_replicated_record_never_counts_its_delta() -> None:
    """The guard: B's like (delta +1) replicated into A's stream counts nothing in A."""
    assert delta(record(version(True, B, 1), None, "INSERT"), A) == 0
    assert delta(record(version(True, B, 1), version(False, A, -1)), A) == 0


def test_a_replicated_record_that_replaced_this_regions_liked_version_takes_it_off() -> None:
    assert delta(record(version(False, B, 0), version(True, A, 1)), A) == -1
    assert delta(record(version(True, B, 1), version(True, A, 0)), A) == -1  # B re-liked later: B's now
    assert delta(record(None, version(True, A, 1), "REMOVE"), A) == -1
    assert delta(record(version(False, B, 0), version(True, B, 1)), A) == 0  # it was not A's


def test_other_items_are_not_changes() -> None:
    probe = {"eventName": "MODIFY", "dynamodb": {"Keys": {"PK": {"S": "POST#p#S3"}, "SK": {"S": "PROBE"}}, "SequenceNumber": "1"}}
    assert regional_change(probe, A) is None
    assert regional_change({"eventName": "MODIFY", "dynamodb": {"Keys": {"PK": {"S": "ORDER#1"}, "SK": {"S": "X"}}}}, A) is None


def test_likes_and_their_replays_take_the_global_table_from_the_environment(monkeypatch: Any) -> None:
    """A deferred like replayed by the retry worker must be written as the Region it runs in."""
    from counters.services.likes import Likes
    from testkit.functions import handler_module, template_function

    env = {"GLOBAL_TABLE_MODE": "mrec", "TABLE_REGIONS": f"{A},{B}", "AWS_REGION": B}
    for function in ("LikesFunction", "RetryWorkerFunction"):
        fn = template_function(function, "t", refs={"RetryDLQ": "q"})
        for name, value in fn.environment.items():
            monkeypatch.setenv(name, value)  # imported (once per process) in its own environment, as load_function does
        module = handler_module(fn)
        likes = Likes.from_settings(module.function.settings_type.from_env({**fn.environment, **env}))
        assert likes.policy.others == (A,) and likes.policy.writer == B, function
