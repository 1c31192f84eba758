"""The cold-start bench times imports as the layer ships them: with bytecode (bench/coldstart.py)."""

from __future__ import annotations

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
