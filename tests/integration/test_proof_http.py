"""The HTTP proof in CI: one small scenario per area through the same code as ``make proof``
(proof/http.py), with every fault on: the function's DynamoDB and SQS calls, duplicate and late
queue deliveries, duplicated stream batches. No undocumented 5xx, every 202 resolved to the
right status, nothing stranded, duplicated or lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from proof import http


@pytest.mark.parametrize(
    ("scenario", "cases"),
    [
        ("likes", None),
        (
            "reservations",
            [("crt x4 shards", "crt", 4, "exact"), ("marker", "marker", 1, "exact"), ("atomic (under)", "atomic", 1, "under")],
        ),
    ],
)
def test_http_scenario_under_faults_holds(
    scenario: str, cases: list[tuple[str, str, int, str]] | None, dynamodb_endpoint: str, sqs_endpoint: str, tmp_path: Path
) -> None:
    params, run = http.SCENARIOS[scenario]
    with (
        http.output_to(tmp_path / "functions.log"),
        http.faulty_stack(dynamodb_endpoint, sqs_endpoint, seed=11, scale=0.4, clients=12, params=params) as env,
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
        assert report.verdict == "holds", summary
    assert reports[0].faults_ddb > 0, summary  # the faults did fire
