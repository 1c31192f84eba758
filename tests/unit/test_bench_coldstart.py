"""The cold-start bench times imports as the layer ships them: with bytecode (bench/coldstart.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import coldstart


def test_the_probes_write_and_use_bytecode_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PYTHONDONTWRITEBYTECODE the warm-up would write no cache: every probe would time the
    layer's compilation (boto3, compiled when it was installed, never pays it)."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/nowhere")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("TALLY_KEPT", "yes")
    env = coldstart.probe_environ()
    assert env["TALLY_KEPT"] == "yes"
    assert not {"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONPATH"} & set(env)
    assert not {"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"} & set(coldstart._env({}, []))


def test_every_probe_runs_on_the_interpreter_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--python PATH``: the functions' runtime (python3.13) can be older or newer than the venv
    that runs the bench; every fresh interpreter the section starts is that one, none is the bench's."""
    started: list[str] = []

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        started.append(argv[0])
        traced = "" if argv[-1] == "pass" else "import time:       100 |        100 | app\n"  # -X importtime; "pass": start-up
        return subprocess.CompletedProcess(argv, 0, stdout="3.13.0\n" if "sys.version" in argv[-1] else "1.0\n", stderr=traced)

    monkeypatch.setattr(coldstart.subprocess, "run", run)
    lines = coldstart.section(1, "/runtime/python3.13")
    assert started and set(started) == {"/runtime/python3.13"}
    assert "Python 3.13.0, `/runtime/python3.13`" in lines[0]
    assert coldstart.main(["--runs", "1", "--python", "/a", "--python", "/b"]) == 0
    assert {"/a", "/b"} <= set(started) and sys.executable not in started
