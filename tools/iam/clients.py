"""Which expressions are boto3 clients, found by analysis (no helper, module or attribute name is known in advance).

A client is ``<x>.client("<service>")`` (boto3 or a Session) or ``<x>.create_client("<service>")``
(a botocore session), or flows from one: a function or
method returning a client, a property returning one, a global or a variable assigned one
(``ddb = dynamodb or client()``), a parameter a call site passes one to. The sources are
resolved together to a fixed point, so a factory calling a factory is found too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.iam.aws import known_services, operation_names
from tools.iam.syntax import FunctionNode, returns, top_level

if TYPE_CHECKING:
    from tools.iam.program import Program, Scope

Source = tuple[dict[str, str], str, "Scope", ast.expr]  # (table, key, scope, expression): key is a client if expression is


@dataclass
class Clients:
    """Where boto3 clients come from in a program: factories, properties, globals, parameters."""

    functions: dict[str, str] = field(default_factory=dict)  # function key -> service it returns
    methods: dict[str, str] = field(default_factory=dict)  # method name -> service it returns
    properties: dict[str, str] = field(default_factory=dict)  # property name -> service
    globals: dict[str, str] = field(default_factory=dict)  # "module:name" -> service
    params: dict[str, dict[str, str]] = field(default_factory=dict)  # function key -> {parameter: service}
    version: int = 0
    _locals: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)  # scope key -> (version, {name: service})

    @classmethod
    def of(cls, program: Program) -> Clients:
        """To a fixed point over every (table, key, scope, expression) source of the program."""
        clients = program.clients = cls()
        sources = [source for key in [*program.funcs, *program.modules] for source in clients._sources(program, key)]
        changed = True
        while changed:
            changed = False
            for table, key, scope, expr in sources:
                service = clients.service(scope, expr)
                if service and table.get(key) != service:
                    table[key], changed = service, True
            clients.version += 1
        return clients

    # -- what an expression is ----------------------------------------------------------------
    def service(self, scope: Scope, expr: ast.expr | None) -> str | None:
        """The AWS service of the boto3 client ``expr`` evaluates to in ``scope``, if it is one."""
        match expr:
            case ast.Call(func=ast.Attribute(attr="client" | "create_client"), args=[ast.Constant(value=str() as service), *_]):
                return service if service in known_services() else None
            case ast.Call(func=func):
                ref = scope.resolve_expr(func)
                if ref is not None and ref.kind == "func":
                    return self.functions.get(ref.target)
                return self.methods.get(func.attr) if isinstance(func, ast.Attribute) and ref is None else None
            case ast.BoolOp(values=values):
                return next((s for s in (self.service(scope, v) for v in values) if s), None)
            case ast.IfExp(body=body, orelse=orelse):
                return self.service(scope, body) or self.service(scope, orelse)
            case ast.Name(id=name) if name in scope.locals:
                return self.local(scope).get(name)
        ref = scope.resolve_expr(expr) if isinstance(expr, ast.Name | ast.Attribute) else None
        if ref is not None and ref.kind == "global":
            return self.globals.get(ref.target)
        if isinstance(expr, ast.Attribute) and ref is None:
            return self.properties.get(expr.attr)
        return None

    def local(self, scope: Scope) -> dict[str, str]:
        """Parameters of the scope that receive a client and variables assigned one (to a fixed point)."""
        cached = self._locals.get(scope.key)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        found = dict(self.params.get(scope.func.key, {})) if scope.func else {}
        self._locals[scope.key] = (self.version, found)
        for _ in range(5):
            before = dict(found)
            for target, value in scope.assignments:
                if isinstance(target, ast.Name) and target.id in scope.locals and (service := self.service(scope, value)):
                    found[target.id] = service
            if found == before:
                break
        return found

    # -- the sources --------------------------------------------------------------------------
    def _sources(self, program: Program, key: str) -> Iterator[Source]:
        scope = program.scope(key)
        func = scope.func
        if func is not None:
            table = self.functions if not func.klass else self.properties if func.is_property else self.methods
            for value in returns(func.node):
                yield table, func.key if not func.klass else func.node.name, scope, value
        module_level = func is None
        for target, value in scope.assignments:
            if isinstance(target, ast.Name) and (module_level or target.id in scope.declared):
                yield self.globals, f"{scope.module}:{target.id}", scope, value
        nodes = func.nodes if func else (n for s in module_statements(program.modules[key]) for n in ast.walk(s))
        for call in (n for n in nodes if isinstance(n, ast.Call)):
            yield from self._bindings(program, scope, call)

    def _bindings(self, program: Program, scope: Scope, call: ast.Call) -> Iterator[Source]:
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


def module_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """A module's top-level statements other than function and class definitions."""
    return (s for s in top_level(tree.body) if not isinstance(s, FunctionNode | ast.ClassDef))


def unrecognised(program: Program) -> list[str]:
    """Attributes named like a DynamoDB/SQS operation on something the analysis cannot tie to a client.

    The guard against under-deriving: a new kind of client source (a boto3 resource, a client
    handed over in a way not followed) shows up here instead of as a silently missing action.
    """
    units: list[tuple[Scope, ast.AST]] = [(program.scope(f.key), f.node) for f in program.funcs.values()]
    units += [(program.scope(module), stmt) for module, tree in program.modules.items() for stmt in module_statements(tree)]
    names = operation_names()
    return [
        f"{scope.key}: {ast.unparse(node)}"
        for scope, unit in units
        for node in ast.walk(unit)
        if isinstance(node, ast.Attribute) and node.attr in names and program.clients.service(scope, node.value) is None
    ]
