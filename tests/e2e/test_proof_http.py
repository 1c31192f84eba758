"""The HTTP proof in CI: one small scenario per area through the same code as ``make proof``
(proof/http.py), with every fault on: the function's DynamoDB and SQS calls, duplicate and late
queue deliveries, duplicated stream batches. No undocumented 5xx, every 202 resolved to the
right status, nothing stranded, duplicated or lost."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import requests

from proof import http
from tests.conftest import HTTP_TIMEOUT, settled


# No whole-test time limit (pyproject's 300 s is off here): a scenario's hang guards are its own,
# per request (proof.http.Client.send: 60 s for an answer, at most 20 sends) and per wait
# (proof.http.HANG_SECONDS for a queue to drain or a 202 to settle, reported as a finding), so a
# loaded machine makes it slower, never red. A whole-scenario limit failed likes-grow at load 16.
#
# crt with shards is left to `make proof` here: it strands a split re-driven after an unknown
# outcome now and then (test_proof_findings.py reproduces it deterministically, xfail).
@pytest.mark.parametrize(
    ("scenario", "cases"),
    [
        ("likes", None),
        ("likes-hot", None),
        ("likes-grow", None),  # spreads grown mid-storm, settled by the retry worker, audited on 32 lanes
        (
            "reservations",
            [("marker x4 shards", "marker", 4, "exact"), ("marker", "marker", 1, "exact"), ("atomic (under)", "atomic", 1, "under")],
        ),
        ("ledgers", None),
    ],
)
@pytest.mark.timeout(0)
def test_http_scenario_under_faults_holds(
    scenario: str, cases: list[tuple[str, str, int, str]] | None, dynamodb_endpoint: str, sqs_endpoint: str, tmp_path: Path
) -> None:
    params, run = http.SCENARIOS[scenario]
    with (
        http.output_to(tmp_path / "functions.log"),
        http.faulty_stack(dynamodb_endpoint, sqs_endpoint, seed=11, scale=0.25, clients=12, params=params) as env,
    ):
        reports = http.reservations(env, cases) if cases else run(env)
    summary = http.table(reports) + "\n" + http.details(reports)
    print("\n" + summary)
    for report in reports:
        assert report.requests > 0, summary
        assert report.undocumented_5xx == 0, summary
        assert report.unresolved == 0 and not report.wrong, summary
        assert report.duplicates == 0 and report.lost == 0, summary
        assert report.stranded_violation == 0, summary
        if report.documented == "exact":
            assert report.stranded == 0, summary
        if report.linearizable is not None:  # the recorded history, reads interleaved, against the row's model
            assert report.linearizable.result == "linearizable", summary
        assert report.verdict == "holds", summary
    assert reports[0].faults_ddb > 0, summary  # the faults did fire


def test_sqs_faults_reach_the_functions_queue_client(
    monkeypatch: pytest.MonkeyPatch, dynamodb_endpoint: str, sqs_endpoint: str, tmp_path: Path
) -> None:
    """DEVSTACK_FAULTS with ``services: ["sqs"]`` faults counters.core.client.sqs_client() in the
    worker: a send whose answer is lost (the engine re-sends: the command is queued twice) still
    resolves once, APPLIED, and the like counts once."""
    from devstack.stack import LocalStack

    spec = {
        "LikesFunction": [
            ["conflict", {"operations": ["TransactWriteItems"], "limit": 2}],  # InlineRetryAttempts 2: deferred
            ["after_commit", {"operations": ["SendMessage"], "limit": 1, "services": ["sqs"]}],
        ]
    }
    monkeypatch.setenv("DEVSTACK_FAULTS", json.dumps(spec))
    monkeypatch.setenv("DEVSTACK_FAULTS_REPORT", str(tmp_path))
    table = f"tally-sqsfaults-{random.randrange(10**6)}"
    stack = LocalStack(
        dynamodb_endpoint,
        table,
        port=0,
        concurrency=1,
        sqs_endpoint=sqs_endpoint,
        visibility_override=1,
        params={"InlineRetryAttempts": "2"},
    )
    with http.output_to(tmp_path / "functions.log"):
        stack.start()
    try:
        url = stack.api.url
        assert requests.post(f"{url}/posts", json={"postId": "p1", "authorId": "a", "body": "b"}, timeout=30).status_code == 201
        r = requests.put(f"{url}/posts/p1/likes/u1", timeout=30)
        assert r.status_code == 202, r.text
        record = settled(
            lambda: requests.get(f"{url}{r.headers['Location']}", timeout=HTTP_TIMEOUT).json(), lambda: stack.queue_depth("RetryQueue")
        )
        assert record["status"] == "APPLIED"
        assert requests.get(f"{url}/posts/p1", timeout=HTTP_TIMEOUT).json()["likeTally"] == 1
        reports = [json.loads(p.read_text()) for p in tmp_path.glob("LikesFunction-*.json")]
        sqs = [r["by_service"]["sqs"] for r in reports if "sqs" in r["by_service"]]
        assert sum(s["injected"].get("after_commit", 0) for s in sqs) == 1
        assert sum(s["calls"].get("SendMessage", 0) for s in sqs) == 2  # re-sent after the lost answer: queued twice
    finally:
        stack.stop()
