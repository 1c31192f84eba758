"""Reachability from a handler module, and the IAM actions the reachable code needs.

* Reachability per definition. The handler module is the root, all of it (routes register
  through decorators). A referenced function becomes reachable; a referenced class becomes
  live (its dunder methods reachable); an imported module runs its top-level code only (so
  ``APPROACH = Atomic`` makes Atomic live, and importing a module for a constant reaches none
  of its functions); ``importlib.import_module(f"pkg.{x}")`` loads every module under ``pkg.``.
* Methods. On a receiver of known class a call reaches that class's method (and its live
  subclasses'). On an unknown receiver it reaches the method of that name on every live class
  (rapid type analysis), except names of builtin container methods (``.get``, ``.update``,
  ``.append``...), which are taken to be the builtin: a dict's ``.update`` is not a table write.
* Operations. An attribute of a client (clients.py) that botocore lists as an operation is an
  operation; a bound method passed along (``read(self.dynamodb.get_item, ...)``) counts, and so
  does ``get_paginator("<operation>")``. TransactWriteItems needs the actions of the item kinds
  built in reachable code (the ``"Put"``/``"Update"``/``"Delete"``/``"ConditionCheck"`` keys of
  dict literals); TransactGetItems needs GetItem.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from botocore import xform_name

from tools.iam.aws import TX_KINDS, TX_WRITE_KINDS, AnalysisError, iam_action, operations
from tools.iam.program import Program, Ref, Scope
from tools.iam.syntax import FunctionNode, absolute

BUILTIN_METHODS = frozenset(n for t in (dict, list, set, frozenset, str, bytes, tuple) for n in dir(t) if not n.startswith("_"))


@dataclass
class Effects:
    """What walking one unit (a function, or a module's top level) found: it does not depend on the rest."""

    refs: set[Ref] = field(default_factory=set)
    loads: set[str] = field(default_factory=set)  # modules imported
    calls: set[tuple[str, str]] = field(default_factory=set)  # (service, boto3 method)
    kinds: set[str] = field(default_factory=set)  # transaction item kinds built
    names: set[str] = field(default_factory=set)  # attributes read on receivers of unknown type
    typed: set[tuple[frozenset[str], str]] = field(default_factory=set)  # (receiver classes, attribute)


@dataclass
class Derivation:
    """What one function's code can reach, and the IAM actions that needs."""

    program: Program
    modules: set[str] = field(default_factory=set)
    units: set[str] = field(default_factory=set)  # reachable function keys
    live: set[str] = field(default_factory=set)  # referenced classes
    names: set[str] = field(default_factory=set)
    calls: set[tuple[str, str]] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)

    def size(self) -> int:
        return sum(map(len, (self.modules, self.units, self.live, self.names, self.calls, self.kinds)))

    def load(self, module: str) -> None:
        parts = module.split(".")
        self.modules.update(m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in self.program.modules)

    def apply(self, effects: Effects) -> None:
        for module in effects.loads:
            self.load(module)
        for ref in effects.refs:
            if ref.kind == "func":
                self.units.add(ref.target)
            elif ref.kind == "class":
                self.live.add(ref.target)
            self.load(ref.target.split(":")[0])  # a module, or the module defining the function/class/global
        self.calls |= effects.calls
        self.kinds |= effects.kinds
        self.names |= effects.names
        for classes, name in effects.typed:
            for key in classes:
                candidates = [*self.program.mro(key), *(k for k in self.program.subclasses(key) if k.key in self.live)]
                self.units.update(k.methods[name].key for k in candidates if name in k.methods)

    def expand(self) -> None:
        """Live classes: their dunders, and every method named like an attribute read on an unknown receiver."""
        for key in list(self.live):
            for klass in self.program.mro(key):
                for name, method in klass.methods.items():
                    if name in self.names or (name.startswith("__") and name.endswith("__")):
                        self.units.add(method.key)

    def actions(self) -> set[str]:
        found: set[str] = set()
        for service, method in self.calls:
            if method == "transact_write_items":
                kinds = self.kinds & set(TX_WRITE_KINDS)
                if not kinds:
                    raise AnalysisError("TransactWriteItems is reachable but no Put/Update/Delete/ConditionCheck item is built")
                found |= {TX_WRITE_KINDS[k] for k in kinds}
            elif method == "transact_get_items":
                found.add("dynamodb:GetItem")
            else:
                found.add(iam_action(service, method))
        return found


THIRD_PARTY_LOADERS = frozenset({"counters.runtime.light"})
"""Modules whose dynamic imports load only another package's submodules (counters.runtime.light:
Powertools' packages registered without their ``__init__``), never the program's modules: their
computed names add no DynamoDB or SQS call. Anything else the tool cannot name stays an error."""


class Walker(ast.NodeVisitor):
    """Walks one unit and records what it references and calls (annotations are not evaluated: skipped)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.found = Effects()

    def walk(self, unit: ast.Module | FunctionNode) -> Effects:
        for stmt in unit.body:
            self.at_import(stmt) if isinstance(unit, ast.Module) else self.visit(stmt)
        return self.found

    def at_import(self, stmt: ast.stmt) -> None:
        """Module top level: a definition runs its decorators, defaults and class body, not function bodies."""
        if isinstance(stmt, FunctionNode):
            for node in [*stmt.decorator_list, *stmt.args.defaults, *filter(None, stmt.args.kw_defaults)]:
                self.visit(node)
        elif isinstance(stmt, ast.ClassDef):
            for node in [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]:
                self.visit(node)
            for inner in stmt.body:
                self.at_import(inner)
        else:
            self.visit(stmt)

    def visit_FunctionDef(self, node: FunctionNode) -> None:  # nested: part of the enclosing unit
        for child in [*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults), *node.body]:
            self.visit(child)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arg(self, node: ast.arg) -> None:
        return

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.target)
            self.visit(node.value)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.loads.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = absolute(node, self.scope.package)
        self.found.loads.update([base, *(f"{base}.{alias.name}" for alias in node.names)])

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and (ref := self.scope.resolve_name(node.id)) is not None:
            self.found.refs.add(ref)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self.attribute(node)
        self.visit(node.value)

    def attribute(self, node: ast.Attribute) -> None:
        ref = self.scope.resolve_expr(node)
        if ref is not None:  # a module's member (or outside code)
            self.found.refs.add(ref)
            return
        service = self.scope.client(node.value)
        if service is not None:
            if node.attr in operations(service):
                self.found.calls.add((service, node.attr))
            return
        types = self.scope.type_of(node.value)
        if types:
            self.found.typed.add((types, node.attr))
        elif node.attr not in BUILTIN_METHODS:
            self.found.names.add(node.attr)

    def visit_Call(self, node: ast.Call) -> None:
        self.dynamic_import(node)
        self.paginator(node)
        self.generic_visit(node)

    def dynamic_import(self, node: ast.Call) -> None:
        ref = self.scope.resolve_expr(node.func)
        if ref is None or ref.target != "importlib.import_module":
            return
        match node.args:
            case [ast.Constant(value=str() as name), *_]:
                self.found.loads.add(name)
            case [ast.JoinedStr(values=[ast.Constant(value=str() as prefix), *_]), *_]:
                self.found.loads.update(m for m in self.scope.program.modules if m.startswith(prefix))
            case _ if self.scope.module in THIRD_PARTY_LOADERS:
                return  # loads another package's submodules only: none of the program's calls
            case _:
                raise AnalysisError(f"cannot tell which module {ast.unparse(node)} imports")

    def paginator(self, node: ast.Call) -> None:
        match node:
            case ast.Call(func=ast.Attribute(attr="get_paginator", value=value), args=[ast.Constant(value=str() as op), *_]):
                if service := self.scope.client(value):
                    self.found.calls.add((service, xform_name(op)))

    def visit_Dict(self, node: ast.Dict) -> None:
        self.found.kinds.update(k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in TX_KINDS)
        self.generic_visit(node)


_EFFECTS: WeakKeyDictionary[Program, dict[str, Effects]] = WeakKeyDictionary()  # the same program serves several functions


def effects(program: Program, key: str) -> Effects:
    """What a function (or a module's top level) references and calls, walked once per program."""
    walked = _EFFECTS.setdefault(program, {})
    if key not in walked:
        scope = program.scope(key)
        walked[key] = Walker(scope).walk(scope.func.node if scope.func else program.modules[key])
    return walked[key]


def derive(program: Program, handler_module: str) -> Derivation:
    """Everything reachable from the handler module, to a fixed point."""
    found = Derivation(program)
    found.load(handler_module)
    found.units.update(f.key for f in program.funcs.values() if f.module == handler_module and f.klass is None)
    while True:
        size = found.size()
        for key in [*sorted(found.modules), *sorted(found.units)]:
            found.apply(effects(program, key))
        found.expand()
        if found.size() == size:
            return found
