"""A function's ``app.py`` loaded with the template's environment: one way, used by the tests
(``tests/conftest.py``), the proof (``proof/hot.py``), the bench (``bench/hot.py``) and the
OpenAPI generator (``testkit/openapi.py``).

* :func:`template_function`: the function as the local stack reads it from template.yaml
  (code directory, handler, layers, environment resolved for a table, queue URLs, parameters).
* :func:`environment`: its environment set in ``os.environ`` (plus extras), restored after.
  Powertools reads its variables per call, except ``Metrics``' namespace, read at import: import
  inside it the first time.
* :func:`handler_module`: its handler file, imported once per process (a handler reads nothing
  else at import; settings are injected with ``module.function.configure``), with its code
  directory and layers on ``sys.path`` while it is imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from devstack.template import Function, read_stack

_MODULES: dict[Path, ModuleType] = {}


def template_function(name: str, table: str, *, refs: dict[str, str] | None = None, params: dict[str, str] | None = None) -> Function:
    return read_stack(table, params=params, refs=refs).functions[name]


@contextlib.contextmanager
def environment(fn: Function, extra: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """``fn``'s environment (and ``extra``) in ``os.environ`` while inside; the previous values after."""
    env = {**fn.environment, **(extra or {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _load(path: Path, name: str, paths: list[str]) -> ModuleType:
    """The module at ``path`` imported once per process as ``name``, with ``paths`` on ``sys.path``
    while it runs (then taken off again)."""
    if path not in _MODULES:
        added = [p for p in paths if p not in sys.path]
        sys.path[:0] = added
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        finally:
            for p in added:
                sys.path.remove(p)
        _MODULES[path] = module
    return _MODULES[path]


def handler_module(fn: Function) -> ModuleType:
    """``fn``'s handler module (``Handler``'s file under ``CodeUri``), imported once per process."""
    stem = fn.handler.rsplit(".", 1)[0]
    return _load(fn.code_dir / f"{stem}.py", f"tally_fn_{fn.code_dir.name}_{stem}", [str(fn.code_dir), *map(str, fn.layers)])


def contract_module(fn: Function) -> ModuleType | None:
    """``fn``'s contract (``contract.py`` next to its handler: the API's pydantic models), imported
    once per process, or None for a function without routes."""
    path = fn.code_dir / "contract.py"
    if not path.exists():
        return None
    return _load(path, f"tally_fn_{fn.code_dir.name}_contract", list(map(str, fn.layers)))


def bound_handler_module(fn: Function) -> ModuleType:
    """``fn``'s handler module with its contract's names in its namespace: what the OpenAPI
    generator and the tests need to read the routes' types (the handler names them for the type
    checker only; at run time its resolver validates from counters.http.schemas). A name for a
    service's result type (a `TypedDict`) reads as its response model
    ([`answer`][counters.http.models.answer])."""
    module = handler_module(fn)
    contract = contract_module(fn)
    if contract is not None:
        from counters.http.models import answer

        for name in contract.__all__:
            value = getattr(contract, name)  # an answer is a service's result type: its response model is derived
            module.__dict__.setdefault(name, answer(value) if typing.is_typeddict(value) else value)
    return module
