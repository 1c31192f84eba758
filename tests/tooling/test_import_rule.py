"""The layer's import rule (pyproject.toml, import-linter; `make lint` runs it) holds, and it
would catch a lower package importing a higher one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.template import ROOT

LINT = Path(sys.executable).with_name("lint-imports")


def lint(layer: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(layer)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed next to this interpreter")


def test_the_layer_keeps_the_rule() -> None:
    out = lint(ROOT / "layers" / "counters")
    assert out.returncode == 0, out.stdout[-2000:]


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("core/ids.py", "import counters.services.likes", "by role"),
        ("primitives/pointer.py", "from counters.deferral import queue", "by role"),
        ("services/orders.py", "import pydantic", "pydantic"),
    ],
)
def test_a_lower_package_importing_a_higher_one_fails(tmp_path: Path, module: str, line: str, contract: str) -> None:
    layer = tmp_path / "layer"
    shutil.copytree(ROOT / "layers" / "counters" / "counters", layer / "counters", ignore=shutil.ignore_patterns("__pycache__"))
    with (layer / "counters" / module).open("a") as f:
        f.write(f"\n{line}  # noqa\n")
    out = lint(layer)
    assert out.returncode != 0
    assert "BROKEN" in out.stdout and contract in out.stdout
