"""``@dataclass`` as the standard library's, without compiling code when a class is defined.

The standard library writes each dataclass's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``
and (frozen) ``__setattr__``/``__delattr__`` as source text and compiles it with ``exec`` when the
class statement runs: about 0.5 ms a class on CPython 3.11 and 0.7 ms on 3.13, most of a cold
start's layer import (a handler defines 25-40 of them). Here the standard library still
processes the class (fields, defaults, ``__dataclass_fields__``, ``__match_args__``), asked for
none of those methods; the methods are functions defined once in this module, bound to each
class's field list. So ``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass`` and
subclassing with the standard ``@dataclass`` work as on a standard dataclass, and
``__dataclass_params__`` says what the class is (``frozen``, ``eq``...).

Supported: ``init``, ``repr``, ``eq``, ``frozen``, ``kw_only``, ``__post_init__`` (without
``InitVar``), ``field(default=..., default_factory=..., init=, repr=, compare=, hash=, kw_only=)``.
A class that uses anything else (``InitVar``, ``order``, ``slots``...) is handed to the standard
library whole. What differs: the methods take ``*args, **kwargs`` (``inspect.signature`` of the
class is not its fields'), a class without a docstring gets no generated one, and ``__repr__`` has
no guard against a record that contains itself.

A frozen class with a frozen dataclass base is still given its ``__setattr__`` and ``__delattr__``
by the standard library (its check that frozen and non-frozen classes do not mix reads the bases'
``__dataclass_params__``, which say frozen).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_SETATTR = object.__setattr__


@overload
@dataclass_transform(field_specifiers=(dataclasses.field, Field))
def dataclass(cls: type[T], /) -> type[T]: ...
@overload
@dataclass_transform(field_specifiers=(dataclasses.field, Field))
def dataclass(
    *, init: bool = True, repr: bool = True, eq: bool = True, frozen: bool = False, kw_only: bool = False
) -> Callable[[type[T]], type[T]]: ...
def dataclass(
    cls: type[T] | None = None,
    /,
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    frozen: bool = False,
    kw_only: bool = False,
) -> type[T] | Callable[[type[T]], type[T]]:
    """``dataclasses.dataclass`` with these parameters (the others are the standard defaults)."""

    def wrap(cls: type[T]) -> type[T]:
        return _process(cls, init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


def _process(cls: type[T], *, init: bool, repr: bool, eq: bool, frozen: bool, kw_only: bool) -> type[T]:
    own = cls.__dict__.get("__annotations__", {})
    if any("InitVar" in str(a) for a in own.values()):
        return dataclasses.dataclass(init=init, repr=repr, eq=eq, frozen=frozen, kw_only=kw_only)(cls)
    bases = [b for b in cls.__mro__[1:] if hasattr(b, "__dataclass_fields__")]
    frozen_base = any(b.__dataclass_params__.frozen for b in bases)  # type: ignore[attr-defined]
    if bases and frozen != frozen_base:  # the standard library's checks, with its messages
        which = "non-frozen dataclass from a frozen one" if frozen_base else "frozen dataclass from a non-frozen one"
        raise TypeError(f"cannot inherit {which}")
    if frozen and not frozen_base:
        for name in ("__setattr__", "__delattr__"):
            if name in cls.__dict__:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    explicit_hash = "__hash__" in cls.__dict__ and not (cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__)
    cls = dataclasses.dataclass(init=False, repr=False, eq=False, frozen=frozen_base, kw_only=kw_only)(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init, params.repr, params.eq, params.frozen = init, repr, eq, frozen
    fields = list(dataclasses.fields(cls))  # type: ignore[arg-type]
    if init and "__init__" not in cls.__dict__:
        _add(cls, _init(cls, fields, frozen))
    if repr and "__repr__" not in cls.__dict__:
        _add(cls, _repr(tuple(f.name for f in fields if f.repr)))
    if eq:
        if "__eq__" not in cls.__dict__:
            _add(cls, _eq(tuple(f.name for f in fields if f.compare)))
        if not explicit_hash:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            if frozen:
                _add(cls, _hash(hashed))
            else:
                type.__setattr__(cls, "__hash__", None)
    if frozen and not frozen_base:
        names = frozenset(f.name for f in fields)
        _add(cls, _frozen_setattr(cls, names))
        _add(cls, _frozen_delattr(cls, names))
    return cls


def _add(cls: type, method: Callable[..., Any]) -> None:
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    type.__setattr__(cls, method.__name__, method)


def _init(cls: type, fields: list[Field[Any]], frozen: bool) -> Callable[..., None]:
    """``__init__(self, <positional fields>, *, <keyword-only fields>)``, then ``__post_init__``."""
    given = [f for f in fields if f.init]
    positional = tuple(f.name for f in given if not f.kw_only)
    accepted = frozenset(f.name for f in given)
    seen_default = ""
    for f in given:
        if f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = f.name
        elif seen_default:  # the standard library's message (3.13 names the default)
            after = f" {seen_default!r}" if sys.version_info >= (3, 13) else ""
            raise TypeError(f"non-default argument {f.name!r} follows default argument{after}")
    # (name, in __init__, default, factory) in field order: what each instance gets.
    plan = tuple((f.name, f.init, f.default, f.default_factory) for f in fields if f.init or f.default_factory is not MISSING)
    post_init = getattr(cls, "__post_init__", None) is not None
    set_ = _SETATTR if frozen else setattr
    qualname = f"{cls.__qualname__}.__init__()"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(positional):
            raise TypeError(f"{qualname} takes {len(positional) + 1} positional arguments but {len(args) + 1} were given")
        if kwargs:
            for name in kwargs:
                if name not in accepted:
                    raise TypeError(f"{qualname} got an unexpected keyword argument {name!r}")
            for name in positional[: len(args)]:
                if name in kwargs:
                    raise TypeError(f"{qualname} got multiple values for argument {name!r}")
        values = dict(zip(positional, args, strict=False))  # fewer args than fields: the rest by keyword
        values.update(kwargs)
        missing = []
        for name, in_init, default, factory in plan:
            if in_init and name in values:
                set_(self, name, values[name])
            elif factory is not MISSING:
                set_(self, name, factory())
            elif default is not MISSING:
                set_(self, name, default)
            else:
                missing.append(name)
        if missing:
            raise TypeError(f"{qualname} missing {len(missing)} required argument(s): {', '.join(map(repr, missing))}")
        if post_init:
            self.__post_init__()

    return __init__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({inner})"

    return __repr__


def _eq(names: tuple[str, ...]) -> Callable[[Any, object], Any]:
    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:  # as the standard library: the fields as tuples
            return tuple([getattr(self, n) for n in names]) == tuple([getattr(other, n) for n in names])
        return NotImplemented

    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple([getattr(self, n) for n in names]))

    return __hash__


def _frozen_setattr(cls: type[Any], names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: type[Any], names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__
