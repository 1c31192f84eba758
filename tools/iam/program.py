"""The program of one function: the parsed modules of its code directory and its layers.

Indexed by function, class and module-level name; names resolve through imports and
re-exports; an expression's class is known when every assignment instantiates one
(``self.x = C(...)``, ``x = C(...)``, ``C.m``, ``C(...).m``). Nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from tools.iam.clients import Clients
from tools.iam.syntax import (
    FunctionNode,
    absolute,
    assigned,
    assignments,
    bound_names,
    decorator_name,
    function_assignments,
    is_self_attr,
    parse,
    top_level,
    walk,
)


@dataclass(frozen=True)
class Ref:
    """What a name denotes: a module, a function, a class, a module-level variable, or outside code."""

    kind: str  # module | func | class | global | external (and "member": an import, before it is followed)
    target: str  # module name, "module:qualname", or a dotted external name


@dataclass
class Func:
    key: str  # "module:qualname"
    module: str
    node: FunctionNode
    klass: str | None  # class key for methods

    @property
    def nodes(self) -> tuple[ast.AST, ...]:
        """Every node of the function, nested functions and lambdas included (they share its analysis)."""
        return walk(self.node)

    @property
    def assignments(self) -> tuple[tuple[ast.expr, ast.expr], ...]:
        return function_assignments(self.node)

    @property
    def is_property(self) -> bool:
        return any(decorator_name(d) in ("property", "cached_property") for d in self.node.decorator_list)

    @property
    def self_name(self) -> str | None:
        positional = [*self.node.args.posonlyargs, *self.node.args.args]
        static = any(decorator_name(d) == "staticmethod" for d in self.node.decorator_list)
        return positional[0].arg if self.klass and positional and not static else None


@dataclass
class Klass:
    key: str
    module: str
    node: ast.ClassDef
    methods: dict[str, Func] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)


def imports_of(stmts: Iterable[ast.AST], package: str) -> dict[str, Ref]:
    """Local name -> what an import statement binds it to (members resolved later)."""
    bound: dict[str, Ref] = {}
    for stmt in stmts:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = Ref("module", alias.name if alias.asname else name)
        elif isinstance(stmt, ast.ImportFrom):
            base = absolute(stmt, package)
            for alias in stmt.names:
                bound[alias.asname or alias.name] = Ref("member", f"{base}:{alias.name}")
    return bound


class Program:
    """The modules one function can import, indexed by function, class and module-level name."""

    def __init__(self, roots: list[Path]) -> None:
        self.modules: dict[str, ast.Module] = {}
        self.packages: set[str] = set()
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                parts = list(path.relative_to(root).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                    self.packages.add(".".join(parts))
                if parts and all(p.isidentifier() for p in parts):
                    self.modules.setdefault(".".join(parts), parse(path, path.stat().st_mtime))
        self.funcs: dict[str, Func] = {}
        self.classes: dict[str, Klass] = {}
        self.names: dict[str, dict[str, Ref]] = {m: self._index(m, tree) for m, tree in self.modules.items()}
        self._scopes: dict[str, Scope] = {}
        self._mro: dict[str, list[Klass]] = {}
        self._subclasses: dict[str, list[Klass]] = {}
        self._attr_types: dict[tuple[str, str], frozenset[str]] = {}
        for klass in self.classes.values():
            scope = self.scope(klass.module)
            klass.bases = [r.target for r in map(scope.resolve_expr, klass.node.bases) if r is not None and r.kind == "class"]
        self.clients = Clients.of(self)

    def _index(self, module: str, tree: ast.Module) -> dict[str, Ref]:
        package = module if module in self.packages else module.rpartition(".")[0]
        names = imports_of(top_level(tree.body), package)
        for stmt in top_level(tree.body):
            if isinstance(stmt, FunctionNode):
                names[stmt.name] = Ref("func", f"{module}:{stmt.name}")
                self.funcs[f"{module}:{stmt.name}"] = Func(f"{module}:{stmt.name}", module, stmt, None)
            elif isinstance(stmt, ast.ClassDef):
                names[stmt.name] = Ref("class", self._index_class(module, stmt).key)
            else:
                for target in assigned(stmt):
                    names.setdefault(target, Ref("global", f"{module}:{target}"))
        return names

    def _index_class(self, module: str, node: ast.ClassDef) -> Klass:
        klass = Klass(f"{module}:{node.name}", module, node)
        for stmt in node.body:
            if isinstance(stmt, FunctionNode):
                func = Func(f"{klass.key}.{stmt.name}", module, stmt, klass.key)
                klass.methods[stmt.name] = self.funcs[func.key] = func
        self.classes[klass.key] = klass
        return klass

    # -- resolution ---------------------------------------------------------------------------
    def member(self, module: str, name: str, depth: int = 0) -> Ref | None:
        """What ``module.name`` denotes (following re-exports)."""
        if f"{module}.{name}" in self.modules:
            return Ref("module", f"{module}.{name}")
        if module not in self.modules:
            return Ref("external", f"{module}.{name}")
        ref = self.names[module].get(name)
        return self.follow(ref, depth)

    def follow(self, ref: Ref | None, depth: int = 0) -> Ref | None:
        if ref is None or depth > 20:
            return None
        if ref.kind == "module":
            return ref if ref.target in self.modules else Ref("external", ref.target)
        if ref.kind == "member":
            module, name = ref.target.split(":")
            return self.member(module, name, depth + 1)
        return ref

    def scope(self, key: str) -> Scope:
        """The scope of a function key, or of a module's top level (key = module name)."""
        if key not in self._scopes:
            func = self.funcs.get(key)
            self._scopes[key] = Scope(self, func.module if func else key, func)
        return self._scopes[key]

    def mro(self, key: str) -> list[Klass]:
        """The class and its bases within the program (order does not matter here)."""
        if key not in self._mro:
            seen: list[Klass] = []
            stack = [key]
            while stack:
                klass = self.classes[stack.pop()]
                if klass not in seen:
                    seen.append(klass)
                    stack += klass.bases
            self._mro[key] = seen
        return self._mro[key]

    def subclasses(self, key: str) -> list[Klass]:
        if key not in self._subclasses:
            self._subclasses[key] = [k for k in self.classes.values() if k.key != key and any(c.key == key for c in self.mro(k.key))]
        return self._subclasses[key]

    def attr_type(self, klass: str, attr: str) -> frozenset[str]:
        """The class of ``self.<attr>`` when every assignment to it instantiates a known class."""
        if (klass, attr) not in self._attr_types:
            types: set[str] = set()
            assignments = [
                (self.scope(m.key), value)
                for cls in self.mro(klass)
                for m in cls.methods.values()
                for target, value in m.assignments
                if is_self_attr(target, m.self_name, attr)
            ]
            for scope, value in assignments:
                types |= scope.instance_of(value) or {""}
            self._attr_types[(klass, attr)] = frozenset() if "" in types else frozenset(types)
        return self._attr_types[(klass, attr)]


class Scope:
    """Name resolution and instance types inside one function (or a module's top level)."""

    def __init__(self, program: Program, module: str, func: Func | None) -> None:
        self.program = program
        self.module = module
        self.func = func
        self.locals, self.declared = bound_names(func.node) if func else (frozenset(), frozenset())
        self.package = module if module in program.packages else module.rpartition(".")[0]
        self.imports = imports_of(func.nodes, self.package) if func else {}
        self._types: dict[str, frozenset[str]] | None = None

    @property
    def key(self) -> str:
        """The function key, or the module name for a module's top level."""
        return self.func.key if self.func else self.module

    @property
    def self_name(self) -> str | None:
        return self.func.self_name if self.func else None

    @property
    def klass(self) -> str | None:
        return self.func.klass if self.func else None

    # -- names --------------------------------------------------------------------------------
    def resolve_name(self, name: str) -> Ref | None:
        if name in self.imports:
            return self.program.follow(self.imports[name])
        if name in self.locals:
            return None
        return self.program.follow(self.program.names[self.module].get(name))

    def resolve_expr(self, expr: ast.expr) -> Ref | None:
        """A name or a dotted chain through modules; None for anything else (``self.x``, calls)."""
        if isinstance(expr, ast.Name):
            return self.resolve_name(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(expr.value)
            if base is not None and base.kind == "module":
                return self.program.member(base.target, expr.attr)
            if base is not None and base.kind == "external":
                return Ref("external", f"{base.target}.{expr.attr}")
        return None

    # -- instance types -----------------------------------------------------------------------
    def instance_of(self, expr: ast.expr) -> frozenset[str]:
        """The class a constructor call instantiates (``C(...)``, ``cls(...)``), else empty."""
        if not isinstance(expr, ast.Call):
            return frozenset()
        if isinstance(expr.func, ast.Name) and expr.func.id == self.self_name and self.klass:
            return frozenset({self.klass})
        ref = self.resolve_expr(expr.func)
        return frozenset({ref.target}) if ref is not None and ref.kind == "class" else frozenset()

    def type_of(self, expr: ast.expr) -> frozenset[str]:
        """Classes the value of ``expr`` is known to be an instance (or the class object) of."""
        if isinstance(expr, ast.Call):
            return self.instance_of(expr)
        if isinstance(expr, ast.Name) and expr.id == self.self_name and self.klass:
            return frozenset({self.klass})
        if isinstance(expr, ast.Name) and expr.id in self.locals:
            return self.local_types().get(expr.id, frozenset())
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self.self_name and self.klass:
            return self.program.attr_type(self.klass, expr.attr)
        ref = self.resolve_expr(expr)
        if ref is not None and ref.kind == "class":
            return frozenset({ref.target})
        if ref is not None and ref.kind == "global":
            module, name = ref.target.split(":")
            return self.program.scope(module).local_types().get(name, frozenset())
        return frozenset()

    def local_types(self) -> dict[str, frozenset[str]]:
        """Variables every assignment of which instantiates a known class."""
        if self._types is None:
            found: dict[str, frozenset[str] | None] = {}
            for target, value in self.assignments:
                if isinstance(target, ast.Name):
                    types = self.instance_of(value)
                    previous = found.get(target.id, frozenset())
                    found[target.id] = (previous | types) if types and previous is not None else None
            self._types = {k: v for k, v in found.items() if v}
        return self._types

    @cached_property
    def assignments(self) -> tuple[tuple[ast.expr, ast.expr], ...]:
        if self.func is not None:
            return self.func.assignments
        statements = top_level(self.program.modules[self.module].body)
        return tuple(assignments(s for s in statements if isinstance(s, ast.Assign | ast.AnnAssign)))

    def client(self, expr: ast.expr | None) -> str | None:
        """The AWS service of the boto3 client ``expr`` evaluates to here, if it is one (see clients.py)."""
        return self.program.clients.service(self, expr)
