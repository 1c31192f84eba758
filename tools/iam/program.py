"""Each function's DynamoDB/SQS actions, derived from its code, against what template.yaml grants.

What is derived
    For every ``AWS::Serverless::Function``: the boto3 operations its code can reach, from its
    handler module (``CodeUri`` + ``Handler``) through the packages of its layers, mapped to IAM
    (``.get_item`` -> ``dynamodb:GetItem``, ``.send_message_batch`` -> ``sqs:SendMessage``).
    TransactWriteItems is authorised per item (AWS, "Using IAM with DynamoDB transactions":
    Put/Update/Delete/Get are governed by PutItem/UpdateItem/DeleteItem/GetItem, ConditionCheck
    by dynamodb:ConditionCheckItem): the kinds are the ``"Put"``/``"Update"``/``"Delete"``/
    ``"ConditionCheck"`` keys of the dict literals in reachable code. TransactGetItems -> GetItem.

How (``ast`` only; nothing is imported or run)
    * Reachability per definition. The handler module is the root, all of it (routes register
      through decorators). A referenced function becomes reachable; a referenced class becomes
      live (its dunder methods reachable); an imported module runs its top-level code only (so
      ``APPROACH = Atomic`` makes Atomic live, and importing a module for a constant reaches none
      of its functions); ``importlib.import_module(f"pkg.{x}")`` loads every module under ``pkg.``.
    * Methods. On a receiver of known class (``self``/``cls``, ``self.x = C(...)``, ``x = C(...)``,
      ``C.m``, ``C(...).m``) a call reaches that class's method (and its live subclasses'). On an
      unknown receiver it reaches the method of that name on every live class (rapid type
      analysis), except names of builtin container methods (``.get``, ``.update``, ``.append``...),
      which are taken to be the builtin: a dict's ``.update`` is not a table write.
    * Clients. ``<x>.client("dynamodb")`` (boto3, a Session), functions and properties returning a
      client (``counters.dynamo.client``, ``commands.sqs_client``, every ``dynamodb`` property),
      variables and globals assigned one (``ddb = dynamodb or client()``), and parameters that
      receive one at a call site. An attribute of a client that botocore lists as an operation
      is an operation; a bound method passed along (``read(self.dynamodb.get_item, ...)``) counts.
    * SAM event sources. An ``SQS`` event attaches AWSLambdaSQSQueueExecutionRole and a
      ``DynamoDB`` stream event AWSLambdaDynamoDBExecutionRole (samtranslator, eventsources/pull.py),
      both on Resource "*": the poller uses those actions, so they are taken off the derived set
      and must not be in ``Policies``. A stream's ``DestinationConfig.OnFailure`` of Type SQS makes
      SAM add sqs:SendMessage on that destination (for the poller); the code never sends there, so
      it is neither derived nor expected in ``Policies``.

What is compared
    The ``Allow`` statements of ``Policies`` (dynamodb:/sqs: actions and ``*``) must equal the
    derived set: a broader grant fails, a missing grant fails; dynamodb:ConditionCheckItem only
    where a ConditionCheck item is built. The comparison is per action, not per resource or
    ``dynamodb:LeadingKeys``. Over-approximations (all towards "needed"): every branch of a
    reachable function counts; a live class's method is reachable by name from an unknown
    receiver; transaction kinds are per function, not per call.
    ``test_every_operation_is_on_a_recognised_client`` guards the other direction: an
    operation-named attribute the analysis cannot tie to a client fails it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import botocore.session
from botocore import xform_name

from devstack.template import ROOT, load

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

# --------------------------------------------------------------------------------------------
# IAM vocabulary
# --------------------------------------------------------------------------------------------
SERVICES = ("dynamodb", "sqs")
TX_WRITE_KINDS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
TX_KINDS = frozenset({*TX_WRITE_KINDS, "Get"})
# IAM actions that are not named like the operation (the batch APIs share the single-item action).
ACTION_ALIASES = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
# What SAM attaches for pull event sources (managed policies on Resource "*").
SAM_EVENT_ACTIONS = {
    "SQS": frozenset({"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}),  # AWSLambdaSQSQueueExecutionRole
    "DynamoDB": frozenset(  # AWSLambdaDynamoDBExecutionRole
        {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
    ),
}
BUILTIN_METHODS = frozenset(n for t in (dict, list, set, frozenset, str, bytes, tuple) for n in dir(t) if not n.startswith("_"))


class AnalysisError(Exception):
    """The code does something the analysis cannot read (it would otherwise under-derive)."""


@cache
def known_services() -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_available_services())


@cache
def operations(service: str) -> dict[str, str]:
    """boto3 method name -> API operation name, from botocore's bundled service model."""
    model = botocore.session.get_session().get_service_model(service)
    return {xform_name(op): op for op in model.operation_names}


def iam_action(service: str, method: str) -> str:
    operation = operations(service)[method]
    return f"{service}:{ACTION_ALIASES.get(operation, operation)}"


# --------------------------------------------------------------------------------------------
# The program: parsed modules of one function (its code directory, then its layers)
# --------------------------------------------------------------------------------------------
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
        return _walk(self.node)

    @property
    def assignments(self) -> tuple[tuple[ast.expr, ast.expr], ...]:
        return _function_assignments(self.node)

    @property
    def is_property(self) -> bool:
        return any(_decorator_name(d) in ("property", "cached_property") for d in self.node.decorator_list)

    @property
    def self_name(self) -> str | None:
        positional = [*self.node.args.posonlyargs, *self.node.args.args]
        static = any(_decorator_name(d) == "staticmethod" for d in self.node.decorator_list)
        return positional[0].arg if self.klass and positional and not static else None


@dataclass
class Klass:
    key: str
    module: str
    node: ast.ClassDef
    methods: dict[str, Func] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)


# The same parsed trees serve every function's program: walks are cached per node.
@cache
def _walk(node: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(node))


@cache
def _function_assignments(node: FunctionNode) -> tuple[tuple[ast.expr, ast.expr], ...]:
    return tuple(_assignments(_walk(node)))


def _decorator_name(node: ast.expr) -> str:
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


def imports_of(stmts: Iterable[ast.AST], package: str) -> dict[str, Ref]:
    """Local name -> what an import statement binds it to (members resolved later)."""
    bound: dict[str, Ref] = {}
    for stmt in stmts:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                bound[name] = Ref("module", alias.name if alias.asname else name)
        elif isinstance(stmt, ast.ImportFrom):
            base = _absolute(stmt, package)
            for alias in stmt.names:
                bound[alias.asname or alias.name] = Ref("member", f"{base}:{alias.name}")
    return bound


def _absolute(stmt: ast.ImportFrom, package: str) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = package.split(".")[: len(package.split(".")) - stmt.level + 1]
    return ".".join([*parts, stmt.module] if stmt.module else parts)


@cache
def _parse(path: Path, mtime: float) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


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
                    self.modules.setdefault(".".join(parts), _parse(path, path.stat().st_mtime))
        self.funcs: dict[str, Func] = {}
        self.classes: dict[str, Klass] = {}
        self.names: dict[str, dict[str, Ref]] = {m: self._index(m, tree) for m, tree in self.modules.items()}
        self._scopes: dict[str, Scope] = {}
        self._mro: dict[str, list[Klass]] = {}
        self._effects: dict[str, Effects] = {}
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
                for target in _assigned(stmt):
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

    def effects(self, key: str) -> Effects:
        """What a function (or a module's top level) references and calls, walked once."""
        if key not in self._effects:
            scope = self.scope(key)
            self._effects[key] = Walker(scope).walk(scope.func.node if scope.func else self.modules[key])
        return self._effects[key]

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
                if _is_self_attr(target, m.self_name, attr)
            ]
            for scope, value in assignments:
                types |= scope.instance_of(value) or {""}
            self._attr_types[(klass, attr)] = frozenset() if "" in types else frozenset(types)
        return self._attr_types[(klass, attr)]


def _assigned(stmt: ast.stmt) -> list[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _assignments(nodes: Iterable[ast.AST]) -> Iterator[tuple[ast.expr, ast.expr]]:
    for sub in nodes:
        if isinstance(sub, ast.Assign):
            for target in sub.targets:
                yield target, sub.value
        elif isinstance(sub, ast.AnnAssign | ast.NamedExpr) and sub.value is not None:
            yield sub.target, sub.value
        elif isinstance(sub, ast.withitem) and sub.optional_vars is not None:
            yield sub.optional_vars, sub.context_expr


def _is_self_attr(target: ast.expr, self_name: str | None, attr: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attr
        and isinstance(target.value, ast.Name)
        and target.value.id == self_name
        and self_name is not None
    )


@cache
def _bound_names(node: FunctionNode) -> tuple[frozenset[str], frozenset[str]]:
    """(local names, names declared global/nonlocal) of a function, nested scopes included."""
    local: set[str] = set()
    declared: set[str] = set()
    for sub in _walk(node):
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


class Scope:
    """Name resolution, instance types and client detection inside one function (or a module's top level)."""

    def __init__(self, program: Program, module: str, func: Func | None) -> None:
        self.program = program
        self.module = module
        self.func = func
        self.locals, self.declared = _bound_names(func.node) if func else (frozenset(), frozenset())
        self.package = module if module in program.packages else module.rpartition(".")[0]
        self.imports = imports_of(func.nodes, self.package) if func else {}
        self._types: dict[str, frozenset[str]] | None = None
        self._clients: tuple[int, dict[str, str]] | None = None

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
        return tuple(_assignments(s for s in statements if isinstance(s, ast.Assign | ast.AnnAssign)))

    # -- clients ------------------------------------------------------------------------------
    def client(self, expr: ast.expr | None) -> str | None:
        """The AWS service of the boto3 client ``expr`` evaluates to, if it is one."""
        clients = self.program.clients
        match expr:
            case ast.Call(func=ast.Attribute(attr="client"), args=[ast.Constant(value=str() as service), *_]):
                return service if service in known_services() else None
            case ast.Call(func=func):
                ref = self.resolve_expr(func)
                if ref is not None and ref.kind == "func":
                    return clients.functions.get(ref.target)
                return clients.methods.get(func.attr) if isinstance(func, ast.Attribute) and ref is None else None
            case ast.BoolOp(values=values):
                return next((s for s in map(self.client, values) if s), None)
            case ast.IfExp(body=body, orelse=orelse):
                return self.client(body) or self.client(orelse)
            case ast.Name(id=name) if name in self.locals:
                return self.local_clients().get(name)
        ref = self.resolve_expr(expr) if isinstance(expr, ast.Name | ast.Attribute) else None
        if ref is not None and ref.kind == "global":
            return clients.globals.get(ref.target)
        if isinstance(expr, ast.Attribute) and ref is None:
            return clients.properties.get(expr.attr)
        return None

    def local_clients(self) -> dict[str, str]:
        """Parameters that receive a client and variables assigned one (to a fixed point)."""
        version = self.program.clients.version
        if self._clients is not None and self._clients[0] == version:
            return self._clients[1]
        found = dict(self.program.clients.params.get(self.func.key, {})) if self.func else {}
        self._clients = (version, found)
        for _ in range(5):
            before = dict(found)
            for target, value in self.assignments:
                if isinstance(target, ast.Name) and target.id in self.locals and (service := self.client(value)):
                    found[target.id] = service
            if found == before:
                break
        return found


@dataclass
class Clients:
    """Where boto3 clients come from in a program: factories, globals, parameters."""

    functions: dict[str, str] = field(default_factory=dict)  # function key -> service it returns
    methods: dict[str, str] = field(default_factory=dict)  # method name -> service it returns
    properties: dict[str, str] = field(default_factory=dict)  # property name -> service
    globals: dict[str, str] = field(default_factory=dict)  # "module:name" -> service
    params: dict[str, dict[str, str]] = field(default_factory=dict)  # function key -> {parameter: service}
    version: int = 0

    @classmethod
    def of(cls, program: Program) -> Clients:
        """To a fixed point: each source is a (table, key, scope, expression) that is a client if the expression is."""
        clients = program.clients = cls()
        sources = [source for key in [*program.funcs, *program.modules] for source in clients._sources(program, key)]
        changed = True
        while changed:
            changed = False
            for table, key, scope, expr in sources:
                service = scope.client(expr)
                if service and table.get(key) != service:
                    table[key], changed = service, True
            clients.version += 1
        return clients

    def _sources(self, program: Program, key: str) -> Iterator[tuple[dict[str, str], str, Scope, ast.expr]]:
        scope = program.scope(key)
        func = scope.func
        if func is not None:
            table = self.functions if not func.klass else self.properties if func.is_property else self.methods
            for value in _returns(func.node):
                yield table, func.key if not func.klass else func.node.name, scope, value
        module_level = func is None
        for target, value in scope.assignments:
            if isinstance(target, ast.Name) and (module_level or target.id in scope.declared):
                yield self.globals, f"{scope.module}:{target.id}", scope, value
        nodes = (
            func.nodes
            if func
            else (n for s in top_level(program.modules[key].body) if not isinstance(s, FunctionNode | ast.ClassDef) for n in ast.walk(s))
        )
        for call in (n for n in nodes if isinstance(n, ast.Call)):
            yield from self._bindings(program, scope, call)

    def _bindings(self, program: Program, scope: Scope, call: ast.Call) -> Iterator[tuple[dict[str, str], str, Scope, ast.expr]]:
        """A module-level function's parameter is a client when a call site passes one."""
        ref = scope.resolve_expr(call.func)
        callee = program.funcs.get(ref.target) if ref is not None and ref.kind == "func" else None
        if callee is None:
            return
        args = callee.node.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        bound = [(p, a) for p, a in zip(params, call.args, strict=False) if not isinstance(a, ast.Starred)]
        for param, arg in [*bound, *((k.arg, k.value) for k in call.keywords if k.arg in params)]:
            yield self.params.setdefault(callee.key, {}), param, scope, arg


@cache
def _returns(node: FunctionNode) -> tuple[ast.expr, ...]:
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


# --------------------------------------------------------------------------------------------
# Reachability and the actions it implies
# --------------------------------------------------------------------------------------------
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
        base = _absolute(node, self.scope.package)
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


def derive(program: Program, handler_module: str) -> Derivation:
    """Everything reachable from the handler module, to a fixed point."""
    found = Derivation(program)
    found.load(handler_module)
    found.units.update(f.key for f in program.funcs.values() if f.module == handler_module and f.klass is None)
    while True:
        size = found.size()
        for key in [*sorted(found.modules), *sorted(found.units)]:
            found.apply(program.effects(key))
        found.expand()
        if found.size() == size:
            return found


# --------------------------------------------------------------------------------------------
# The template side
# --------------------------------------------------------------------------------------------
TEMPLATE = load()


def functions(template: dict[str, Any]) -> list[str]:
    return sorted(k for k, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function")


def code_roots(template: dict[str, Any], name: str) -> list[Path]:
    """The function's code directory, then the content of its layers (they share sys.path)."""
    resources = template["Resources"]
    props = resources[name]["Properties"]
    layers = props.get("Layers", template.get("Globals", {}).get("Function", {}).get("Layers", []))
    roots = [ROOT / props["CodeUri"]]
    for layer in layers:
        resource = resources.get(layer.get("Ref", "")) if isinstance(layer, dict) else None
        if resource is not None and resource["Type"] == "AWS::Serverless::LayerVersion":
            roots.append(ROOT / resource["Properties"]["ContentUri"])
    return roots


@cache
def program(roots: tuple[Path, ...]) -> Program:
    return Program(list(roots))


@cache
def _derivation(roots: tuple[Path, ...], handler: str) -> tuple[frozenset[str], frozenset[str]]:
    found = derive(program(roots), handler.rpartition(".")[0])
    return frozenset(found.actions()), frozenset(found.kinds)


def derivation(template: dict[str, Any], name: str) -> tuple[frozenset[str], frozenset[str]]:
    """(the actions the function's code can perform, the transaction item kinds it builds)."""
    props = template["Resources"][name]["Properties"]
    return _derivation(tuple(code_roots(template, name)), props["Handler"])


def derived(template: dict[str, Any], name: str) -> frozenset[str]:
    return derivation(template, name)[0]


def sam_event_actions(template: dict[str, Any], name: str) -> set[str]:
    """Actions SAM's managed policies give the function for its pull event sources."""
    events = (template["Resources"][name]["Properties"].get("Events") or {}).values()
    return set().union(*(SAM_EVENT_ACTIONS.get(event["Type"], frozenset()) for event in events))


def in_scope(action: str) -> bool:
    return action == "*" or action.split(":")[0] in SERVICES


def granted(template: dict[str, Any], name: str) -> set[str]:
    """The DynamoDB/SQS actions the function's ``Policies`` allow."""
    actions: set[str] = set()
    for policy in template["Resources"][name]["Properties"].get("Policies", []):
        if not isinstance(policy, dict) or "Statement" not in policy:
            raise AnalysisError(f"{name}: cannot read the actions of {policy!r}; list them in a statement")
        for statement in policy["Statement"]:
            if "NotAction" in statement:
                raise AnalysisError(f"{name}: NotAction grants everything else")
            if statement.get("Effect") == "Allow":
                action = statement["Action"]
                actions.update(a for a in ([action] if isinstance(action, str) else action) if in_scope(a))
    return actions


def needed(template: dict[str, Any], name: str) -> set[str]:
    return set(derived(template, name)) - sam_event_actions(template, name)


class GrantMismatch(AssertionError):
    pass


class BroaderGrant(GrantMismatch):
    pass


class MissingGrant(GrantMismatch):
    pass


def check(template: dict[str, Any], name: str) -> None:
    """Raise when the function's Policies grant more, or less, than its code needs."""
    grant, need = granted(template, name), needed(template, name)
    if grant - need:
        raise BroaderGrant(f"{name} is granted {sorted(grant - need)} that its code never performs (needs {sorted(need)})")
    if need - grant:
        raise MissingGrant(f"{name} performs {sorted(need - grant)} that its Policies do not grant (grants {sorted(grant)})")
