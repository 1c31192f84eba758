"""counters.core.records: ``@dataclass`` without compiling code, behaving as the standard library's.

Every check runs the same class shapes through ``dataclasses.dataclass`` and the layer's
``dataclass`` and compares what they do: constructors, defaults, ``repr``, ``==``, ``hash``,
frozen assignment, ``dataclasses.fields`` / ``replace`` / ``asdict``, subclassing with the standard
decorator (how a function declares its settings), and the errors a bad class or a bad call raises.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable
from dataclasses import InitVar, field
from pathlib import Path
from typing import Any

import pytest

from counters.core import records

DECORATORS = pytest.mark.parametrize("deco", [dataclasses.dataclass, records.dataclass], ids=["stdlib", "records"])
LAYER = Path(__file__).resolve().parents[2] / "layers" / "counters" / "counters"
FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def shapes(deco: Any) -> dict[str, Any]:
    @deco(frozen=True, kw_only=True)
    class Base:
        """Settings-like: frozen, keyword-only, metadata."""

        table: str = field(default="t", metadata={"env": "TABLE"})
        attempts: int = 6

    @deco(frozen=True, kw_only=True)
    class Sub(Base):
        """A frozen subclass of a frozen one."""

        extra: str | None = None

    @deco
    class Mutable:
        """Mutable, with a factory and a field left out of repr and ==."""

        a: int
        b: list[int] = field(default_factory=list)
        c: str = field(default="x", repr=False, compare=False)

    @deco(frozen=True)
    class Frozen:
        """Frozen, positional, checked after init."""

        a: int
        b: str = "q"
        skipped: dict[str, int] = field(default_factory=dict, init=False)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    @deco(frozen=True)
    class OwnHash:
        """Frozen with its own __hash__ (kept)."""

        a: int

        def __hash__(self) -> int:
            return 7

    @deco(frozen=True)
    class Empty:
        """No fields."""

    return {c.__name__: c for c in (Base, Sub, Mutable, Frozen, OwnHash, Empty)}


def behaviour(deco: Any) -> list[Any]:
    """What the shapes do, as plain values (class names without the local scope)."""
    c = shapes(deco)
    s, m, f = c["Sub"](table="a", extra="e"), c["Mutable"](1), c["Frozen"](2)
    out: list[Any] = [
        repr(s).split("<locals>.")[-1],
        repr(m).split("<locals>.")[-1],
        repr(f).split("<locals>.")[-1],
        repr(c["Empty"]()).split("<locals>.")[-1],
        s == c["Sub"](table="a", extra="e"),
        s == c["Sub"](table="b"),
        s == c["Base"](table="a"),
        hash(s) == hash(c["Sub"](table="a", extra="e")),
        hash(c["OwnHash"](1)),
        c["Empty"]() == c["Empty"](),
        c["Mutable"].__hash__,
        m == c["Mutable"](1, c="other"),
        m == c["Mutable"](1, [2]),
        c["Mutable"](1, [2], "y").b,
        c["Mutable"](a=3, c="z").c,
        c["Mutable"](1).b is not c["Mutable"](1).b,
        f.skipped,
        repr(dataclasses.replace(f, b="z")).split("<locals>.")[-1],
        dataclasses.asdict(s),
        [(x.name, x.kw_only, dict(x.metadata)) for x in dataclasses.fields(c["Sub"])],
        repr(c["Sub"].__dataclass_params__),
        repr(c["Mutable"].__dataclass_params__),
        c["Frozen"].__match_args__,
        copy.copy(f) == f,
        copy.deepcopy(m) == m,
        dataclasses.is_dataclass(s),
    ]
    failing: list[Callable[[], Any]] = [
        lambda: setattr(f, "a", 3),
        lambda: setattr(f, "other", 3),
        lambda: delattr(s, "attempts"),
        lambda: c["Sub"]("a"),
        lambda: c["Sub"](nope=1),
        lambda: c["Frozen"](),
        lambda: c["Frozen"](-1),
        lambda: c["Frozen"](1, skipped={}),
        lambda: c["Frozen"](1, a=2),
        lambda: c["Mutable"](1, [], "x", 4),
    ]
    for bad in failing:
        try:
            bad()
            out.append("no error")
        except Exception as e:
            out.append(type(e).__name__)
    return out


def test_a_record_behaves_as_a_standard_dataclass() -> None:
    assert behaviour(records.dataclass) == behaviour(dataclasses.dataclass)


@DECORATORS
def test_a_settings_class_declared_with_the_standard_decorator_extends_a_record(deco: Any) -> None:
    """A function's settings: ``@dataclasses.dataclass(frozen=True, kw_only=True)`` over the layer's."""
    base = shapes(deco)["Sub"]

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class App(base):  # type: ignore[valid-type,misc]
        z: int = 1

    app = App(table="x", z=3)
    assert repr(app).endswith("App(table='x', attempts=6, extra=None, z=3)")
    assert [f.name for f in dataclasses.fields(App)] == ["table", "attempts", "extra", "z"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        app.z = 2  # type: ignore[misc]


def errors(make: Callable[[Any], object]) -> list[str]:
    """The error each decorator raises for a bad class (``make(decorator)``)."""
    out = []
    for deco in (dataclasses.dataclass, records.dataclass):
        try:
            make(deco)
            out.append("no error")
        except TypeError as e:
            out.append(str(e))
    return out


def frozen_over_mutable(deco: Any) -> object:
    @deco
    class Base:
        a: int = 0

    @deco(frozen=True)
    class Sub(Base):
        b: int = 0

    return Sub


def mutable_over_frozen(deco: Any) -> object:
    @deco(frozen=True)
    class Base:
        a: int = 0

    @deco
    class Sub(Base):
        b: int = 0

    return Sub


def default_then_required(deco: Any) -> object:
    @deco
    class Bad:
        a: int = 0
        b: int

    return Bad


def frozen_with_own_setattr(deco: Any) -> object:
    @deco(frozen=True)
    class Bad:
        a: int = 0

        def __setattr__(self, name: str, value: object) -> None: ...

    return Bad


@pytest.mark.parametrize("make", [frozen_over_mutable, mutable_over_frozen, default_then_required, frozen_with_own_setattr])
def test_a_bad_class_is_refused_as_the_standard_library_refuses_it(make: Callable[[Any], object]) -> None:
    stdlib, layer = errors(make)
    assert stdlib != "no error"
    assert layer == stdlib


def test_a_class_with_an_init_only_variable_is_a_standard_dataclass() -> None:
    @records.dataclass
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            self.a *= scale

    assert WithInitVar(2, 3).a == 6


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"frozen": True, "kw_only": True}], ids=["mutable", "frozen", "frozen-kw-only"])
def test_a_record_compiles_no_code_when_defined(monkeypatch: pytest.MonkeyPatch, options: dict[str, bool]) -> None:
    """What the layer's import saves (issue 26): the standard library ``exec``s each method's source."""
    compiled: list[str] = []

    def spy(source: str, *args: Any) -> None:
        compiled.append(source)
        exec(source, *args)

    monkeypatch.setattr(dataclasses, "exec", spy, raising=False)

    @records.dataclass(**options)
    class Record:
        a: int
        b: list[int] = field(default_factory=list)

    assert compiled == []
    assert Record(a=1).a == 1  # and the spy does see the standard library's:
    dataclasses.dataclass(**options)(type("Plain", (), {"__annotations__": {"a": "int"}}))
    assert compiled


def test_the_layer_defines_its_dataclasses_as_records() -> None:
    """Every ``@dataclass`` of the layer and the functions is ``counters.core.records.dataclass``."""
    offenders = []
    for path in sorted([*LAYER.rglob("*.py"), *FUNCTIONS.rglob("*.py")]):
        if "__pycache__" in path.parts or path.name == "records.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "dataclasses":
                offenders += [f"{path}:{node.lineno}" for a in node.names if a.name == "dataclass"]
            elif isinstance(node, ast.Attribute) and node.attr == "dataclass":
                offenders.append(f"{path}:{node.lineno}")
    assert offenders == []
