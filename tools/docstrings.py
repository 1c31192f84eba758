"""The layer's docstrings in the API site's dialect: Markdown with mkdocstrings cross-references.

``python -m tools.docstrings convert [ROOT]`` rewrites, in place, every reST role of the docstrings under
ROOT (default ``layers/counters/counters``) into a Markdown cross-reference that mkdocs-autorefs
resolves::

    :class:`~counters.core.outcome.Result`   ->  [`Result`][counters.core.outcome.Result]
    :meth:`Toggle.set`  (in toggle.py)       ->  [`Toggle.set`][counters.primitives.toggle.Toggle.set]
    :mod:`.posts`       (in likes/__init__)  ->  [`posts`][counters.services.likes.posts]
    :func:`json.loads`                       ->  `json.loads`   (outside the package: no page to link)

A short target is looked up as Python would from the docstring's place: the enclosing class (and its
bases), then the module (its definitions and imports), then as an absolute name; the link points at
the module that defines the object (the page mkdocstrings renders it on). A target that is private
(a part starting with ``_``) or outside the package becomes inline code. A paragraph ending in the
reST literal-block marker ``::`` ends in ``:`` (the indented block below it is Markdown code already).
A target that cannot be found is left as it is and reported (exit 1): the check below then fails on
it. Converting converted text changes nothing.

``python -m tools.docstrings check [ROOT]`` exits 1, naming each, on: a reST role or ``::`` marker left
in a docstring; a public module, class, function, method or property without a docstring (public:
no part of its name starts with ``_``); a module attribute without one that its module's ``__all__``
lists (the attributes the package publishes); and a ``docs/api/counters.md`` whose ``members`` are
not the package root's ``__all__``. Standard library only (``ast``), so it runs in any venv; ``make
docs`` runs it before ``mkdocs build --strict``, which fails on a cross-reference it cannot resolve.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("layers/counters/counters")
ROOT_PAGE = Path("docs/api/counters.md")

ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|mod|data|attr|exc|obj|const|type):`(?P<body>[^`]+)`")
# Any reST role the check refuses, Python's or not (``:ref:``, ``:envvar:``...): only ROLE's are converted.
ANY_ROLE = re.compile(r"(?<![\w`]):(?:[a-z]+:)?[a-z][a-z-]*:`[^`]+`")
EXPLICIT = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
# A reST literal-block marker ends a paragraph: "text::" or a lone "::", then a blank line.
LITERAL = re.compile(r"(?P<lead>\S)?(?P<gap>[ \t]*)::[ \t]*$")


# -- the package's names, read from its source (nothing is imported) ------------------------------------


@dataclass
class Node:
    """One object of the package: a module, class, function or attribute, with its members."""

    path: str
    kind: str  # module | class | function | attribute
    module: str  # the module it is defined in (itself for a module)
    members: dict[str, Node] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # modules only: local name -> dotted target
    bases: list[str] = field(default_factory=list)  # classes only: as written in the module


@dataclass
class Package:
    """Every module of a package by dotted name, and how a dotted name resolves to its definition."""

    name: str
    modules: dict[str, Node]
    files: dict[str, Path]
    trees: dict[str, ast.Module]

    @classmethod
    def load(cls, root: Path) -> Package:
        """Parse every ``.py`` file under ``root`` (a package directory)."""
        name = root.name
        modules: dict[str, Node] = {}
        files: dict[str, Path] = {}
        trees: dict[str, ast.Module] = {}
        for file in sorted(root.rglob("*.py")):
            parts = [name, *file.relative_to(root).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            dotted = ".".join(parts)
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
            module = Node(dotted, "module", dotted)
            package = dotted if is_package else dotted.rpartition(".")[0]
            _collect(module, tree.body, dotted, package)
            modules[dotted], files[dotted], trees[dotted] = module, file, tree
        return cls(name, modules, files, trees)

    def resolve(self, dotted: str, seen: frozenset[str] = frozenset()) -> Node | str | None:
        """The node defining ``dotted``, the name itself if it lies outside the package, or None."""
        if dotted in seen:
            return None
        seen = seen | {dotted}
        parts = dotted.split(".")
        if parts[0] != self.name:
            return dotted
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in self.modules:
                break
        node = self.modules[".".join(parts[:i])]
        rest = parts[i:]
        while rest:
            part, rest = rest[0], rest[1:]
            found = self.member(node, part, seen)
            if isinstance(found, str):  # an import: resolve its target, then what follows it
                return self.resolve(".".join([found, *rest]), seen)
            if found is None:
                return None
            node = found
        return node

    def member(self, node: Node, name: str, seen: frozenset[str]) -> Node | str | None:
        """``node.name``: a member, an import's target (a string), a submodule, or a base's member."""
        if name in node.members:
            return node.members[name]
        if node.kind == "module":
            if name in node.imports:
                return node.imports[name]
            return self.modules.get(f"{node.path}.{name}")
        if node.kind == "class":
            for base in node.bases:
                resolved = self.lookup(base, self.modules[node.module], None, seen)
                if isinstance(resolved, Node) and resolved.kind == "class":
                    inherited = self.member(resolved, name, seen | {node.path})
                    if inherited is not None:
                        return inherited
        return None

    def lookup(self, target: str, module: Node, klass: Node | None, seen: frozenset[str] = frozenset()) -> Node | str | None:
        """``target`` as written in a docstring of ``module`` (inside ``klass``): see the module docstring."""
        if target.startswith("."):
            level = len(target) - len(target.lstrip("."))
            is_package = self.files[module.path].name == "__init__.py"
            base = module.path.split(".")
            base = base[: len(base) - level + (1 if is_package else 0)]
            return self.resolve(".".join([*base, target.lstrip(".")]), seen)
        scopes = ([klass.path] if klass else []) + [module.path]
        for scope in scopes:
            found = self.resolve(f"{scope}.{target}", seen)
            if found is not None and not isinstance(found, str):
                return found
            first = target.split(".")[0]
            if scope == module.path and first in module.imports:
                return found  # imported from outside the package (a string) or unresolvable
        if "." not in target:  # a bare name found nowhere (builtins are not worth a role)
            return None
        return self.resolve(target, seen)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return stmt.targets
    return [stmt.target] if isinstance(stmt, ast.AnnAssign) else []


def _collect(owner: Node, body: list[ast.stmt], module: str, package: str) -> None:
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            bases = [ast.unparse(b.value if isinstance(b, ast.Subscript) else b) for b in stmt.bases]
            node = Node(f"{owner.path}.{stmt.name}", "class", module, bases=bases)
            _collect(node, stmt.body, module, package)
            owner.members[stmt.name] = node
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            owner.members.setdefault(stmt.name, Node(f"{owner.path}.{stmt.name}", "function", module))
            if owner.kind == "class" and stmt.name == "__init__":  # self.name = ... (griffe's instance attributes)
                for sub in ast.walk(stmt):
                    for target in _targets(sub) if isinstance(sub, ast.stmt) else []:
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                            owner.members.setdefault(target.attr, Node(f"{owner.path}.{target.attr}", "attribute", module))
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            for target in _targets(stmt):
                if isinstance(target, ast.Name):
                    owner.members.setdefault(target.id, Node(f"{owner.path}.{target.id}", "attribute", module))
        elif isinstance(stmt, ast.ImportFrom) and owner.kind == "module":
            source = stmt.module or ""
            if stmt.level:
                base = package.split(".")
                base = base[: len(base) - stmt.level + 1]
                source = ".".join([*base, source] if source else base)
            for alias in stmt.names:
                owner.imports[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(stmt, ast.Import) and owner.kind == "module":
            for alias in stmt.names:
                if alias.asname:
                    owner.imports[alias.asname] = alias.name
                else:
                    first = alias.name.split(".")[0]
                    owner.imports[first] = first
        elif isinstance(stmt, ast.If | ast.Try):
            _collect(owner, stmt.body, module, package)
            _collect(owner, stmt.orelse, module, package)
            for handler in getattr(stmt, "handlers", []):
                _collect(owner, handler.body, module, package)


# -- the docstrings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Docstring:
    """A string statement of a module (a docstring, or an attribute's) and where it stands."""

    module: str
    klass: str | None  # the enclosing class's dotted path, if any
    node: ast.Constant


def docstrings(package: Package, module: str) -> Iterator[Docstring]:
    """Every string statement of ``module``, with the class it is written in."""

    def walk(body: list[ast.stmt], klass: str | None, owner: str) -> Iterator[Docstring]:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                yield Docstring(module, klass, stmt.value)
            elif isinstance(stmt, ast.ClassDef):
                yield from walk(stmt.body, f"{owner}.{stmt.name}", f"{owner}.{stmt.name}")
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(stmt.body, klass, f"{owner}.{stmt.name}")
            elif isinstance(stmt, ast.If | ast.Try | ast.With | ast.For | ast.While):
                for part in ("body", "orelse", "finalbody"):
                    yield from walk(getattr(stmt, part, []), klass, owner)
                for handler in getattr(stmt, "handlers", []):
                    yield from walk(handler.body, klass, owner)

    yield from walk(package.trees[module].body, None, module)


def _private(path: str) -> bool:
    return any(part.startswith("_") for part in path.split(".")[1:])


def convert_role(package: Package, doc: Docstring, match: re.Match[str]) -> str | None:
    """The Markdown for one role, or None when its target cannot be found."""
    body = match["body"]
    explicit = EXPLICIT.match(body)
    title, target = (explicit["title"], explicit["target"]) if explicit else (body, body)
    target = re.sub(r"\s+", "", target).lstrip("~")
    if not explicit:
        title = re.sub(r"\s+", "", title).lstrip(".")
        if title.startswith("~"):
            title = title.rpartition(".")[2]
    module = package.modules[doc.module]
    klass = package.resolve(doc.klass) if doc.klass else None
    found = package.lookup(target, module, klass if isinstance(klass, Node) else None)
    if found is None:
        return None
    if isinstance(found, str) or _private(found.path):
        return f"`{title}`"
    return f"[`{title}`][{found.path}]"


def convert_text(package: Package, doc: Docstring, text: str, missing: list[str]) -> str:
    """``text`` (one docstring's source) with its roles and literal-block markers converted."""

    def role(match: re.Match[str]) -> str:
        converted = convert_role(package, doc, match)
        if converted is None:
            missing.append(f"{package.files[doc.module]}:{doc.node.lineno}: {match[0]!r} (no such name)")
            return match[0]
        return converted

    text = ROLE.sub(role, text)
    lines = text.split("\n")
    out: list[str] = []
    skip = False
    for i, line in enumerate(lines):
        if skip:  # the blank line after a lone "::"
            skip = False
            continue
        marker = literal_marker(lines, i)
        if marker is not None:
            if marker["lead"] is None:  # a lone "::": the line goes, and the blank line after it
                skip = True
                continue
            if marker["gap"]:  # "text ::": the marker goes
                line = line[: marker.start() + 1]
            else:  # "text::": one colon stays
                line = line[: marker.end()].rstrip()[:-1]
        out.append(line)
    return "\n".join(out)


def literal_marker(lines: list[str], i: int) -> re.Match[str] | None:
    """The reST literal-block marker ending ``lines[i]`` (a paragraph followed by a blank line), if any."""
    if i + 1 >= len(lines) or lines[i + 1].strip():
        return None
    marker = LITERAL.search(lines[i])
    if marker is None or (marker["lead"] is None and lines[i].strip() != "::"):
        return None
    return marker


def convert_module(package: Package, module: str, missing: list[str]) -> str:
    """The module's source with every docstring converted."""
    source = package.files[module].read_text(encoding="utf-8")
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    edits = []
    for doc in docstrings(package, module):
        node = doc.node
        start = offsets[node.lineno - 1] + len(source[offsets[node.lineno - 1] :].encode()[: node.col_offset].decode())
        end_line = node.end_lineno or node.lineno
        end = offsets[end_line - 1] + len(source[offsets[end_line - 1] :].encode()[: node.end_col_offset or 0].decode())
        old = source[start:end]
        new = convert_text(package, doc, old, missing)
        if new != old:
            edits.append((start, end, new))
    for start, end, new in reversed(edits):
        source = source[:start] + new + source[end:]
    return source


def convert(root: Path) -> tuple[list[Path], list[str]]:
    """Convert every module under ``root`` in place: the files changed and the roles left unresolved."""
    package = Package.load(root)
    changed: list[Path] = []
    missing: list[str] = []
    for module, file in package.files.items():
        new = convert_module(package, module, missing)
        if new != file.read_text(encoding="utf-8"):
            file.write_text(new, encoding="utf-8")
            changed.append(file)
    return changed, missing


# -- the check ------------------------------------------------------------------------------------------


def _has_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and ast.get_docstring(node) is not None


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {ast.unparse(d).rpartition(".")[2] if isinstance(d, ast.Attribute) else ast.unparse(d) for d in node.decorator_list}


def _all_names(tree: ast.Module) -> list[str] | None:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and stmt.value is not None:
                names: list[str] = []
                for element in getattr(stmt.value, "elts", []):
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        names.append(element.value)
                    elif isinstance(element, ast.Starred) and isinstance(element.value, ast.Name):
                        names.extend(_dict_keys(tree, element.value.id))
                return names
    return None


def _dict_keys(tree: ast.Module, name: str) -> list[str]:
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or not isinstance(stmt.value, ast.Dict):
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in _targets(stmt)):
            return [k.value for k in stmt.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _attribute_docstrings(body: list[ast.stmt]) -> set[str]:
    """Names assigned in ``body`` followed by a string statement (griffe's attribute docstrings)."""
    documented = set()
    for stmt, after in zip(body, body[1:], strict=False):
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            documented |= {t.id for t in _targets(stmt) if isinstance(t, ast.Name)}
    return documented


def undocumented(package: Package) -> Iterator[str]:
    """``file:line: kind path`` for each public name without a docstring."""

    def definitions(owner: str, body: list[ast.stmt], file: Path) -> Iterator[str]:
        for stmt in body:
            if isinstance(stmt, ast.If | ast.Try):  # the definitions of both branches are the module's
                yield from definitions(owner, stmt.body + stmt.orelse, file)
            if not isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) or stmt.name.startswith("_"):
                continue
            path = f"{owner}.{stmt.name}"
            if isinstance(stmt, ast.ClassDef):
                if not _has_docstring(stmt):
                    yield f"{file}:{stmt.lineno}: class {path}"
                yield from definitions(path, stmt.body, file)
                continue
            decorators = _decorators(stmt)
            if "overload" in decorators or "setter" in decorators or "deleter" in decorators:
                continue
            if not _has_docstring(stmt):
                kind = "property" if decorators & {"property", "cached_property"} else "function"
                yield f"{file}:{stmt.lineno}: {kind} {path}"

    for module, file in package.files.items():
        if _private(module):
            continue
        tree = package.trees[module]
        if not _has_docstring(tree):
            yield f"{file}:1: module {module}"
        yield from definitions(module, tree.body, file)
        published = _all_names(tree) or []
        documented = _attribute_docstrings(tree.body)
        node = package.modules[module]
        for name in published:
            member = node.members.get(name)
            if member is not None and member.kind == "attribute" and name not in documented:
                yield f"{file}: attribute {module}.{name} (in __all__)"


def leftovers(package: Package) -> Iterator[str]:
    """``file:line: text`` for each reST role or literal-block marker left in a docstring."""
    for module, file in package.files.items():
        for doc in docstrings(package, module):
            text = str(doc.node.value)
            for match in ANY_ROLE.finditer(text):
                line = doc.node.lineno + text[: match.start()].count("\n")
                yield f"{file}:{line}: reST role {match[0]!r}"
            lines = text.split("\n")
            for i in range(len(lines)):
                if literal_marker(lines, i) is not None:
                    yield f"{file}:{doc.node.lineno + i}: reST literal-block marker '::'"


def root_page_members(page: Path) -> list[str]:
    """The ``members:`` list of the package root's page (the names mkdocstrings renders there)."""
    match = re.search(r"members:\s*\[(?P<names>[^\]]*)\]", page.read_text(encoding="utf-8"))
    return re.findall(r"[\"']([^\"']+)[\"']", match["names"]) if match else []


def problems(root: Path = ROOT, page: Path | None = ROOT_PAGE) -> list[str]:
    """Everything ``check`` reports, in order."""
    package = Package.load(root)
    found = [*leftovers(package), *undocumented(package)]
    if page is not None:
        published = _all_names(package.trees[package.name]) or []
        listed = root_page_members(page)
        if listed != published:
            found.append(f"{page}: members {listed} are not {package.name}.__all__ {published}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docstrings", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["convert", "check"])
    parser.add_argument("root", nargs="?", type=Path, default=ROOT, help=f"the package directory (default {ROOT})")
    parser.add_argument("--page", type=Path, default=ROOT_PAGE, help=f"the root page to check (default {ROOT_PAGE})")
    args = parser.parse_args(argv)
    if args.command == "convert":
        changed, missing = convert(args.root)
        for file in changed:
            print(f"converted {file}")
        for line in missing:
            print(f"unresolved {line}", file=sys.stderr)
        return 1 if missing else 0
    found = problems(args.root, args.page)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"{len(found)} docstring problem(s): see tools/docstrings.py", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
