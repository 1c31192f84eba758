"""Expressions: attribute paths, values, operands and conditions, rendered with placeholders.

A condition is a tree of [`Cond`][counters.store.conditions.Cond] (``&``, ``|``, ``~``) over [`Path`][counters.store.conditions.Path] s and values; an
operand of SET is a value, a [`Path`][counters.store.conditions.Path], or [`if_not_exists`][counters.store.conditions.if_not_exists] / [`plus`][counters.store.conditions.plus] / [`minus`][counters.store.conditions.minus] /
[`list_append`][counters.store.conditions.list_append]. Rendering allocates ``#name`` placeholders (readable: ``#mode``) and ``:v<n>``
values through one [`Placeholders`][counters.store.conditions.Placeholders] per request, and only the ones the request uses. The
requests that use them are [`counters.store.expr`][counters.store.expr].
"""

from __future__ import annotations

import re

from counters.core.client import Params
from counters.core.items import AttributeValue
from counters.store.items import serialize

_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class Placeholders:
    """The names and values one request uses, each allocated once."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, AttributeValue] = {}
        self._by_name: dict[str, str] = {}

    def name(self, part: str) -> str:
        """The ``#name`` placeholder of one path part (made on first use)."""
        found = self._by_name.get(part)
        if found is None:
            base = f"#{part}" if _PLAIN.match(part) else f"#n{len(self._by_name)}"
            found = base if base not in self.names else f"#n{len(self._by_name)}_"
            self._by_name[part] = found
            self.names[found] = part
        return found

    def value(self, value: object) -> str:
        """A new ``:v<n>`` placeholder for ``value``."""
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = serialize(value)
        return placeholder

    def apply(self, params: Params) -> Params:
        """Add the placeholders used to ``params`` (none: no key)."""
        if self.names:
            params["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            params["ExpressionAttributeValues"] = dict(self.values)
        return params


# -- operands --------------------------------------------------------------------------------------
class _Node:
    """An expression node: its ``__slots__`` are its parts, shown by ``repr``. The nodes are plain
    classes, not dataclasses: an API handler imports them at cold start, where each dataclass costs
    generating and compiling its methods, and a node needs only its ``__init__``."""

    __slots__ = ()

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__name__}({parts})"


class Operand(_Node):
    """Something an expression can compare or assign: a path, a value, a function of them."""

    __slots__ = ()

    def render(self, ph: Placeholders) -> str:
        """The operand in expression syntax, its placeholders allocated in ``ph``."""
        raise NotImplementedError

    # comparisons make conditions
    def __eq__(self, other: object) -> Cond:  # type: ignore[override]  # builds a condition, as SQLAlchemy/PynamoDB do
        return _Compare(self, "=", operand(other))

    def __ne__(self, other: object) -> Cond:  # type: ignore[override]  # builds a condition, as above
        return _Compare(self, "<>", operand(other))

    def __lt__(self, other: object) -> Cond:
        return _Compare(self, "<", operand(other))

    def __le__(self, other: object) -> Cond:
        return _Compare(self, "<=", operand(other))

    def __gt__(self, other: object) -> Cond:
        return _Compare(self, ">", operand(other))

    def __ge__(self, other: object) -> Cond:
        return _Compare(self, ">=", operand(other))

    __hash__ = object.__hash__


class Value(Operand):
    """A value operand (a ``:v<n>`` placeholder)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def render(self, ph: Placeholders) -> str:
        """The value's placeholder."""
        return ph.value(self.value)


class Path(Operand):
    """An attribute path: ``Path("aggSeq", "S3")`` is ``#aggSeq.#S3``; an int part is a list index."""

    __slots__ = ("parts",)

    def __init__(self, *parts: str | int) -> None:
        if not parts or not isinstance(parts[0], str):
            raise ValueError("a path starts with an attribute name")
        self.parts = parts

    def render(self, ph: Placeholders) -> str:
        """The path's placeholders, joined (``#a.#b[0]``)."""
        out = ""
        for part in self.parts:
            out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + ph.name(part))
        return out

    def __repr__(self) -> str:
        return f"Path{self.parts!r}"

    def exists(self) -> Cond:
        """``attribute_exists(path)``."""
        return _Function("attribute_exists", (self,))

    def missing(self) -> Cond:
        """``attribute_not_exists(path)``."""
        return _Function("attribute_not_exists", (self,))

    def begins_with(self, prefix: str) -> Cond:
        """``begins_with(path, prefix)``."""
        return _Function("begins_with", (self, Value(prefix)))

    def contains(self, member: object) -> Cond:
        """``contains(path, member)``."""
        return _Function("contains", (self, operand(member)))

    def between(self, low: object, high: object) -> Cond:
        """``path BETWEEN low AND high``."""
        return _Between(self, operand(low), operand(high))

    def size(self) -> Operand:
        """``size(path)``, an operand."""
        return _Call("size", (self,))


def operand(value: object) -> Operand:
    """``value`` as an operand: a [`Path`][counters.store.conditions.Path] or [`Operand`][counters.store.conditions.Operand] as it is, anything else a value."""
    return value if isinstance(value, Operand) else Value(value)


def path(name: str | Path) -> Path:
    """``name`` as a [`Path`][counters.store.conditions.Path]."""
    return name if isinstance(name, Path) else Path(name)


class _Call(Operand):
    __slots__ = ("function", "args")

    def __init__(self, function: str, args: tuple[Operand, ...]) -> None:
        self.function, self.args = function, args

    def render(self, ph: Placeholders) -> str:
        return f"{self.function}({', '.join(a.render(ph) for a in self.args)})"


class _Arithmetic(Operand):
    __slots__ = ("left", "op", "right")

    def __init__(self, left: Operand, op: str, right: Operand) -> None:
        self.left, self.op, self.right = left, op, right

    def render(self, ph: Placeholders) -> str:
        return f"{self.left.render(ph)} {self.op} {self.right.render(ph)}"


def if_not_exists(name: str | Path, default: object) -> Operand:
    """``if_not_exists(path, default)``, for SET."""
    return _Call("if_not_exists", (path(name), operand(default)))


def plus(left: object, right: object) -> Operand:
    """``left + right``, for SET (e.g. ``plus(if_not_exists("n", 0), 1)``)."""
    return _Arithmetic(operand(left), "+", operand(right))


def minus(left: object, right: object) -> Operand:
    """``left - right``, an operand (for ``SET``)."""
    return _Arithmetic(operand(left), "-", operand(right))


def list_append(left: object, right: object) -> Operand:
    """``list_append(left, right)``, an operand (for ``SET``)."""
    return _Call("list_append", (operand(left), operand(right)))


# -- conditions ------------------------------------------------------------------------------------
class Cond(_Node):
    """A condition (or key condition, or filter) expression."""

    __slots__ = ()

    def render(self, ph: Placeholders) -> str:
        """The condition in expression syntax, its placeholders allocated in ``ph``."""
        raise NotImplementedError

    def __and__(self, other: Cond) -> Cond:
        return _Join("AND", (self, other))

    def __or__(self, other: Cond) -> Cond:
        return _Join("OR", (self, other))

    def __invert__(self) -> Cond:
        return _Not(self)


class _Compare(Cond):
    __slots__ = ("left", "op", "right")

    def __init__(self, left: Operand, op: str, right: Operand) -> None:
        self.left, self.op, self.right = left, op, right

    def render(self, ph: Placeholders) -> str:
        return f"{self.left.render(ph)} {self.op} {self.right.render(ph)}"


class _Between(Cond):
    __slots__ = ("subject", "low", "high")

    def __init__(self, subject: Operand, low: Operand, high: Operand) -> None:
        self.subject, self.low, self.high = subject, low, high

    def render(self, ph: Placeholders) -> str:
        return f"{self.subject.render(ph)} BETWEEN {self.low.render(ph)} AND {self.high.render(ph)}"


class _Function(Cond):
    __slots__ = ("function", "args")

    def __init__(self, function: str, args: tuple[Operand, ...]) -> None:
        self.function, self.args = function, args

    def render(self, ph: Placeholders) -> str:
        return f"{self.function}({', '.join(a.render(ph) for a in self.args)})"


class _Join(Cond):
    __slots__ = ("op", "parts")

    def __init__(self, op: str, parts: tuple[Cond, ...]) -> None:
        self.op, self.parts = op, parts

    def render(self, ph: Placeholders) -> str:
        return "(" + f" {self.op} ".join(p.render(ph) for p in self.parts) + ")"


class _Not(Cond):
    __slots__ = ("inner",)

    def __init__(self, inner: Cond) -> None:
        self.inner = inner

    def render(self, ph: Placeholders) -> str:
        return f"(NOT {self.inner.render(ph)})"


def all_of(*conds: Cond | None) -> Cond | None:
    """The conjunction of the conditions given (``None`` s skipped); ``None`` if there are none."""
    kept = [c for c in conds if c is not None]
    if not kept:
        return None
    out = kept[0]
    for c in kept[1:]:
        out = out & c
    return out


def any_of(*conds: Cond) -> Cond:
    """The conditions joined by ``OR``."""
    out = conds[0]
    for c in conds[1:]:
        out = out | c
    return out
