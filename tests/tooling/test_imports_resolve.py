"""Every ``from counters... import name`` in the repository resolves, including the ones inside
functions (the benches and the proof import lazily, and some of them report an exception as a
measurement's failure instead of raising it).

Seen when services/reservations.py became a package: three benches still imported
``resource_key`` from it; the Regions bench caught the ImportError as "refused" and its write-unit
test read ``None``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", "node_modules", "site"}


def python_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not any(part in SKIP or part.startswith(".venv") for part in p.relative_to(ROOT).parts)]


def test_every_import_of_the_layer_resolves() -> None:
    unresolved = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "counters"):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name == "*" or hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ModuleNotFoundError:
                    unresolved.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} import {alias.name}")
    assert not unresolved, "\n".join(unresolved)
