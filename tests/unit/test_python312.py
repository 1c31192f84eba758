"""`make build` / `make invoke-events` find a python3.12 (scripts/python312-dir.sh) or fail in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "python312-dir.sh"


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}  # no pyenv, no python3.12 on PATH
    return subprocess.run(["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=30)


def fake_python(path: Path, works: bool = True) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(f"#!/bin/sh\nexit {0 if works else 1}\n")
    path.chmod(0o755)


def test_the_newest_working_pyenv_312_is_found(tmp_path: Path) -> None:
    root = tmp_path / "pyenv"
    fake_python(root / "versions" / "3.12.1" / "bin" / "python3.12")
    fake_python(root / "versions" / "3.12.10" / "bin" / "python3.12", works=False)  # broken: skipped
    fake_python(root / "versions" / "3.12.9" / "bin" / "python3.12")
    fake_python(root / "versions" / "3.13.0" / "bin" / "python3.13")
    out = run(tmp_path, PYENV_ROOT=str(root))
    assert (out.returncode, out.stdout.strip()) == (0, str(root / "versions" / "3.12.9" / "bin"))


def test_none_fails_at_once_with_the_fix_in_one_line(tmp_path: Path) -> None:
    out = run(tmp_path, PYENV_ROOT=str(tmp_path / "empty"))
    assert out.returncode == 1 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "pyenv install 3.12" in out.stderr
