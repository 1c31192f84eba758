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
