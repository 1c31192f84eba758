"""Helpers on ``ast`` trees, independent of any program: parsing, walking, what a unit binds and returns.

The same parsed trees serve every function's program, so walks are cached per node.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@cache
def walk(node: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(node))


@cache
def function_assignments(node: FunctionNode) -> tuple[tuple[ast.expr, ast.expr], ...]:
    return tuple(assignments(walk(node)))


def decorator_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at import, descending into if/try/with blocks but not definitions."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(stmt, block, []):
                    yield from top_level(inner.body if isinstance(inner, ast.ExceptHandler) else [inner])


def absolute(stmt: ast.ImportFrom, package: str) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = package.split(".")[: len(package.split(".")) - stmt.level + 1]
    return ".".join([*parts, stmt.module] if stmt.module else parts)


@cache
def parse(path: Path, mtime: float) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def assigned(stmt: ast.stmt) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def assignments(nodes: Iterable[ast.AST]) -> Iterator[tuple[ast.expr, ast.expr]]:
    for sub in nodes:
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                yield target, sub.value
        elif isinstance(sub, ast.AnnAssign | ast.NamedExpr) and sub.value is not None:
            yield sub.target, sub.value
        elif isinstance(sub, ast.withitem) and sub.optional_vars is not None:
            yield sub.optional_vars, sub.context_expr


def is_self_attr(target: ast.expr, self_name: str | None, attr: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attr
        and isinstance(target.value, ast.Name)
        and target.value.id == self_name
        and self_name is not None
    )


@cache
def bound_names(node: FunctionNode) -> tuple[frozenset[str], frozenset[str]]:
    """(local names, names declared global/nonlocal) of a function, nested scopes included."""
    local: set[str] = set()
    declared: set[str] = set()
    for sub in walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            local.add(sub.id)
        elif isinstance(sub, ast.arg):
            local.add(sub.arg)
        elif isinstance(sub, FunctionNode | ast.ClassDef) and sub is not node:
            local.add(sub.name)
        elif isinstance(sub, ast.Global | ast.Nonlocal):
            declared.update(sub.names)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            local.add(sub.name)
    return frozenset(local - declared), frozenset(declared)


@cache
def returns(node: FunctionNode) -> tuple[ast.expr, ...]:
    """The values the function itself returns (not its nested functions')."""
    found: list[ast.expr] = []
    stack: list[ast.AST] = list(node.body)
    while stack:
        sub = stack.pop()
        if isinstance(sub, ast.Return) and sub.value is not None:
            found.append(sub.value)
        if not isinstance(sub, FunctionNode | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(sub))
    return tuple(found)
