"""The GitHub Actions pipeline: checks before build, build before deploys, dev before prod,
AWS access only through OIDC role assumption (no stored keys)."""

from __future__ import annotations

from typing import Any

import yaml

from devstack.template import ROOT

WORKFLOW: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "pipeline.yaml").read_text())
JOBS: dict[str, Any] = WORKFLOW["jobs"]


def _runs(job: str) -> str:
    return "\n".join(step.get("run", "") for step in JOBS[job]["steps"])


def test_jobs_run_in_order() -> None:
    assert JOBS["build"]["needs"] == "check"
    assert JOBS["deploy-dev"]["needs"] == "build" and JOBS["deploy-prod"]["needs"] == "deploy-dev"
    for target in ("make lint", "make validate", "make test"):
        assert target in _runs("check")
    assert "make build" in _runs("build")


def test_deploys_assume_a_role_through_oidc_and_hold_no_keys() -> None:
    text = (ROOT / ".github" / "workflows" / "pipeline.yaml").read_text()
    assert "aws-access-key-id" not in text and "AWS_SECRET_ACCESS_KEY" not in text
    assert WORKFLOW["permissions"] == {"contents": "read"}
    for job, config_env in (("deploy-dev", ""), ("deploy-prod", "--config-env prod")):
        assert JOBS[job]["permissions"]["id-token"] == "write"
        assert JOBS[job]["environment"] == job.removeprefix("deploy-")
        creds = next(s for s in JOBS[job]["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-credentials@"))
        assert creds["with"]["role-to-assume"].startswith("${{ secrets.")
        assert "sam deploy" in _runs(job) and config_env in _runs(job) and "--no-confirm-changeset" in _runs(job)


# The first major of each action that runs on node24: GitHub removes node20 from its runners
# (scheduled for 23 Sep 2026; actionlint flags the node20 majors). From each action's release notes.
FIRST_NODE24_MAJOR = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/setup-node": 5,
    "actions/setup-java": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "aws-actions/configure-aws-credentials": 6,
}


def test_every_action_runs_on_node24() -> None:
    used = [step["uses"] for job in JOBS.values() for step in job["steps"] if "uses" in step]
    assert used
    for ref in used:
        action, _, version = ref.partition("@")
        assert action in FIRST_NODE24_MAJOR, f"{action}: which major runs on node24? add it here"
        assert int(version.lstrip("v").split(".")[0]) >= FIRST_NODE24_MAJOR[action], ref
