"""The layer's shape (issue 25): files small enough to read, Region rules decided in one place.

* No module of the layer is over 450 lines.
* ``primitives/`` never asks which mode it runs in: its code names no topology, mode or mode test
  (its docstrings may describe behaviour across Regions).
* ``services/`` names the topology only where a feature's policy is built (a constructor or
  ``from_settings``).
* Every refusal is a cell of an item family's table (``TABLE``, counters.store.tables): only the
  table's check builds an ``UnsupportedInMode`` or a ``WrongRegion``, only a family module declares a
  refused cell, and no refusal's reason or wording is written anywhere else.
* The policy hands out behaviour, not flags standing in for the mode: it has no ``transactions``,
  ``replica_local`` or ``multi_region``; nothing outside ``core/`` reads such a flag, and nobody
  compares a ``Writes`` (``TOGETHER``/``IN_ORDER``): a caller names both cases to ``writes.choose``.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from counters.core.policy import RegionPolicy

LAYER = Path(__file__).resolve().parents[2] / "layers" / "counters" / "counters"
MAX_LINES = 450
MODE_NAMES = {"topology", "Topology", "GlobalTableMode", "eventual", "MREC", "MRSC", "ONE_REGION", "RegionSettings"}
"""Names (variables, attributes, imports) that ask about the table's mode rather than a capability."""
MODE_FLAGS = {"transactions", "replica_local", "multi_region", "is_home", "eventual"}
"""Flags that stand in for the mode: the policy offers behaviour instead (``writes``, ``escrowed``, ``others``, ``require``)."""
WRITES = {"TOGETHER", "IN_ORDER"}
POLICY_BUILDERS = {"__init__", "from_settings"}
"""Where a service may read its settings' topology; so may a function named ``*_policy`` or ``*_options``
that builds a feature's policy for its primitives (e.g. ``order_policy``, ``ledger_options``)."""


def builds_policy(function: str) -> bool:
    return function in POLICY_BUILDERS or function.endswith(("_policy", "_options"))


def modules(under: str = "") -> list[Path]:
    return sorted(p for p in (LAYER / under).rglob("*.py") if "__pycache__" not in p.parts)


def mode_names(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, name, enclosing function) of every mention of the topology in code (not in strings)."""

    def walk(node: ast.AST, function: str) -> Iterator[tuple[int, str, str]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Name) and child.id in MODE_NAMES:
                yield child.lineno, child.id, function
            elif isinstance(child, ast.Attribute) and child.attr in MODE_NAMES:
                yield child.lineno, child.attr, function
            elif isinstance(child, ast.ImportFrom) and child.module == "counters.core.regions":
                yield child.lineno, "import counters.core.regions", function
            elif isinstance(child, ast.arg) and child.arg in MODE_NAMES:
                yield child.lineno, child.arg, function
            yield from walk(child, inner)

    yield from walk(tree, "<module>")


def rel(path: Path) -> str:
    return str(path.relative_to(LAYER.parent))


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_module_of_the_layer_is_over_450_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{rel(path)} has {lines} lines (at most {MAX_LINES}): split it by job"


def test_primitives_never_ask_which_mode_they_run_in() -> None:
    found = [f"{rel(p)}:{line} {name}" for p in modules("primitives") for line, name, _ in mode_names(ast.parse(p.read_text()))]
    assert not found, "primitives take a RegionPolicy (counters.core.policy) and read its capabilities:\n" + "\n".join(found)


def test_services_name_the_topology_only_where_a_policy_is_built() -> None:
    found = [
        f"{rel(p)}:{line} {name} in {function}()"
        for p in modules("services")
        for line, name, function in mode_names(ast.parse(p.read_text()))
        if not builds_policy(function) and function != "<module>"
    ]
    assert not found, "build the feature's RegionPolicy in its constructor or from_settings and read capabilities:\n" + "\n".join(found)


REFUSING = {"UnsupportedInMode", "WrongRegion", "refuse"}
"""What builds a refusal: only the tables' check (``counters/store/tables.py``) may call them."""


def strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every string constant in code, f-string parts included (docstrings too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_every_refusal_comes_from_a_family_table() -> None:
    from counters.store.layout import FAMILIES
    from counters.store.tables import tables

    check, defaults = LAYER / "store" / "tables.py", LAYER / "core" / "errors.py"  # the error classes' default messages
    families = {LAYER / "store" / f"{family}.py" for family in FAMILIES}
    reasons = {op.rule(mode).reason for table in tables() for op in table.ops.values() for mode in op.refusing()}
    built, declared, restated = [], [], []
    for path in modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if called in REFUSING and path != check:
                    built.append(f"{rel(path)}:{node.lineno} {called}(...)")
                if called == "refused" and isinstance(node.func, ast.Name) and path not in families:
                    declared.append(f"{rel(path)}:{node.lineno} refused(...)")
        for line, text in strings(tree):
            worded = "is not available on" in text or "is created only in its home Region" in text
            if (worded and path not in (check, defaults)) or (path not in families and any(reason in text for reason in reasons)):
                restated.append(f"{rel(path)}:{line} {text[:60]!r}")
    assert not built, "refuse with a cell of the family's TABLE, applied by its store's admit(op):\n" + "\n".join(built)
    assert not declared, "a refused cell belongs in its family module's TABLE:\n" + "\n".join(declared)
    assert not restated, "a refusal's reason and wording live in the tables only:\n" + "\n".join(restated)


def mode_flags(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of every read of a flag standing in for the mode, and every comparison with a ``Writes``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in MODE_FLAGS:
            yield node.lineno, f".{node.attr}"
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Name) and side.id in WRITES:
                    yield node.lineno, f"compares {side.id}"


def test_the_policy_hands_out_behaviour_not_flags_standing_in_for_the_mode() -> None:
    fields = {f.name for f in dataclasses.fields(RegionPolicy)} | {n for n in vars(RegionPolicy) if not n.startswith("_")}
    assert not fields & MODE_FLAGS, f"RegionPolicy offers {sorted(fields & MODE_FLAGS)}: hand out behaviour instead"
    found = [
        f"{rel(p)}:{line} {what}"
        for p in modules()
        if p.parent.name != "core"  # the topology and the policy decide; the rest is told
        for line, what in mode_flags(ast.parse(p.read_text()))
    ]
    assert not found, "ask the policy for behaviour (writes.choose, escrowed, others, require), not the mode:\n" + "\n".join(found)
