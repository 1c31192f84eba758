"""The release of `tally-counters` (issue 27 item 9): CHANGELOG.md's top entry is the package's
version, and .github/workflows/release.yaml publishes with Trusted Publishing (an OIDC token in
the publish job alone, an environment, the build in a job without it, the files handed over as
an artifact). actionlint (`make lint`) checks the workflow's syntax and scripts."""

from __future__ import annotations

from typing import Any

import yaml

import counters
from devstack.template import ROOT
from scripts import release_check
from tests.tooling.test_pipeline import FIRST_NODE24_MAJOR

WORKFLOW: dict[str, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yaml").read_text())
JOBS: dict[str, Any] = WORKFLOW["jobs"]


def test_the_changelogs_top_entry_is_the_package_version() -> None:
    text = release_check.CHANGELOG.read_text()
    assert release_check.package_version() == counters.__version__
    top, date = release_check.released_versions(text)[0]
    assert top == counters.__version__ and date is not None
    assert release_check.problems(text, counters.__version__) == []
    assert release_check.main([]) == 0


def test_the_check_names_what_disagrees() -> None:
    text = "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n\n## [0.1.0] - 2026-11-27\n"
    assert release_check.released_versions(text) == [("0.2.0", "2026-12-01"), ("0.1.0", "2026-11-27")]
    assert release_check.problems(text, "0.2.0", tag="v0.2.0") == []
    assert release_check.problems(text, "0.3.0") == ["CHANGELOG.md's top entry is 0.2.0, the package is 0.3.0: add the entry for 0.3.0"]
    assert release_check.problems(text, "0.2.0", tag="v0.1.0") == ["the tag is v0.1.0, the package is 0.2.0: tag v0.2.0"]
    assert release_check.problems("## [0.2.0]\n", "0.2.0") == ["CHANGELOG.md's entry 0.2.0 has no date (## [0.2.0] - YYYY-MM-DD)"]
    assert release_check.problems("# Changelog\n", "0.2.0")[0].startswith("CHANGELOG.md has no released entry")


def test_a_tag_publishes_through_trusted_publishing() -> None:
    assert WORKFLOW[True] == {"push": {"tags": ["v*"]}}  # YAML reads the key `on` as True
    assert WORKFLOW["permissions"] == {}  # nothing by default: each job asks for what it needs
    build, publish = JOBS["build"], JOBS["publish"]
    assert build["permissions"] == {"contents": "read"}  # no OIDC token where the build runs
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    uploads = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert len(uploads) == 1
    # attestations are on by default from v1.11.0; nothing here may turn them off, and no token
    assert "attestations" not in uploads[0].get("with", {}) and "password" not in uploads[0].get("with", {})
    assert "secrets." not in (ROOT / ".github" / "workflows" / "release.yaml").read_text()


def test_the_build_checks_the_version_and_hands_the_files_over_as_an_artifact() -> None:
    runs = "\n".join(s.get("run", "") for s in JOBS["build"]["steps"])
    assert 'scripts/release_check.py --tag "$GITHUB_REF_NAME"' in runs
    assert "python -m build --outdir dist layers/counters" in runs and "twine check --strict dist/*" in runs
    upload = next(s for s in JOBS["build"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    download = next(s for s in JOBS["publish"]["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert upload["with"]["name"] == download["with"]["name"] and download["with"]["path"].rstrip("/") == "dist"
    assert not any("run" in s for s in JOBS["publish"]["steps"])  # the job holding the token runs no code of ours


def test_every_action_runs_on_node24() -> None:
    for job in JOBS.values():
        for step in job["steps"]:
            action, _, version = step.get("uses", "@").partition("@")
            if action and action != "pypa/gh-action-pypi-publish":  # a Docker action, no node
                assert int(version.lstrip("v").split(".")[0]) >= FIRST_NODE24_MAJOR[action], step["uses"]
