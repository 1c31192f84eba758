"""`make build` / `make invoke-events` find a python of the functions' runtime
(scripts/lambda-python-dir.sh reads it from template.yaml) or fail in one line with a fix that
works on Debian 12 (no apt package: pyenv or uv). And every place that names the runtime's
version agrees with template.yaml's Runtime."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import yaml
from cfnlint.decode import cfn_yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lambda-python-dir.sh"
TEMPLATE = cfn_yaml.load(str(ROOT / "template.yaml"))
RUNTIME = TEMPLATE["Globals"]["Function"]["Runtime"]
VERSION = RUNTIME.removeprefix("python")


def run(tmp_path: Path, *args: str, script: Path = SCRIPT, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}  # no pyenv, no uv, no python3.1x on PATH
    return subprocess.run(["bash", str(script), *args], env={**base, **env}, capture_output=True, text=True, timeout=30)


def fake_python(path: Path, works: bool = True) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(f"#!/bin/sh\nexit {0 if works else 1}\n")
    path.chmod(0o755)


def test_the_newest_working_pyenv_python_of_the_templates_runtime_is_found(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"  # a template whose runtime is python3.13: the script follows it
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "scripts" / SCRIPT.name)
    (checkout / "template.yaml").write_text("Globals:\n  Function:\n    Runtime: python3.13\n    Architectures: [arm64]\n")
    root = tmp_path / "pyenv"
    fake_python(root / "versions" / "3.13.1" / "bin" / "python3.13")
    fake_python(root / "versions" / "3.13.10" / "bin" / "python3.13", works=False)  # broken: skipped
    fake_python(root / "versions" / "3.13.9" / "bin" / "python3.13")
    fake_python(root / "versions" / "3.12.9" / "bin" / "python3.12")
    fake_python(root / "versions" / "3.14.0" / "bin" / "python3.14")
    out = run(tmp_path, script=checkout / "scripts" / SCRIPT.name, PYENV_ROOT=str(root))
    assert (out.returncode, out.stdout.strip()) == (0, str(root / "versions" / "3.13.9" / "bin"))
    asked = run(tmp_path, "3.12", script=checkout / "scripts" / SCRIPT.name, PYENV_ROOT=str(root))
    assert asked.stdout.strip() == str(root / "versions" / "3.12.9" / "bin")  # an argument overrides the template


def test_none_fails_at_once_with_a_fix_that_works_on_debian_12(tmp_path: Path) -> None:
    out = run(tmp_path, PYENV_ROOT=str(tmp_path / "empty"))
    assert out.returncode == 1 and out.stdout == ""
    message = out.stderr.strip()
    assert len(message.splitlines()) == 1 and f"python{VERSION} not found" in message
    assert f"pyenv install {VERSION}" in message and f"uv python install {VERSION}" in message
    assert "apt-get" not in message  # Debian 12 has no python3.12+ package (issue 27)


def test_the_runtime_is_the_newest_that_snapstart_and_powertools_support() -> None:
    """docs/deploy.md "The functions' runtime" cites the sources: Lambda's runtimes page (python3.14
    the newest, python3.13 before it), SnapStart's (Python 3.12 and later), Powertools' (3.37.0
    declares up to 3.14), and why 3.14 waits: the layer's bytecode is compiled by the runtime's own
    Python, and none of 3.14 can be had on this project's machines. Re-check before moving on."""
    assert RUNTIME == "python3.13"
    text = (ROOT / "docs" / "deploy.md").read_text()
    assert "python3.13" in text and "Why not python3.14 yet" in text


def test_every_place_that_names_the_runtime_agrees_with_the_template() -> None:
    layer = TEMPLATE["Resources"]["CountersLayer"]
    assert layer["Properties"]["CompatibleRuntimes"] == [RUNTIME]
    makefile = (ROOT / "layers" / "counters" / "Makefile").read_text()
    assert re.search(rf"^LAMBDA_PYTHON \?= {re.escape(VERSION)}$", makefile, re.MULTILINE)  # the layer's compiled wheels
    pipeline = yaml.safe_load((ROOT / ".github" / "workflows" / "pipeline.yaml").read_text())
    setup = next(s for s in pipeline["jobs"]["build"]["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert VERSION in str(setup["with"]["python-version"]).split()  # CI's sam build finds python3.X
    classifiers = tomllib.loads((ROOT / "layers" / "counters" / "pyproject.toml").read_text())["project"]["classifiers"]
    assert f"Programming Language :: Python :: {VERSION}" in classifiers
    from scripts import sam_local

    assert sam_local.runtime_image("x86_64") == f"public.ecr.aws/lambda/python:{VERSION}-x86_64"
