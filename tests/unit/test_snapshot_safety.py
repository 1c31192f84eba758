"""Handler modules are safe to snapshot (Lambda SnapStart): importing one opens no connection and
keeps no random number, uuid or clock value.

SnapStart runs a version's init (the handler's import) once and resumes every execution environment
from that memory: a value drawn at import would be the same in all of them. Each handler is
imported in a fresh interpreter with the template's environment, after the probe below has wrapped
the sources of such values; any call made during the import fails the test, unless its caller is in
:data:`ALLOWED`, each entry with the reason its value is not kept.

``random``'s own module-level generator is seeded when ``random`` is imported (before the probe
wraps anything, and in every Python process): that state is in the snapshot by nature, and
counters.core.snapstart re-seeds it after a restore (tested below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devstack.template import ROOT, read_stack

FUNCTIONS = read_stack("snapshot-table").functions

ALLOWED: dict[str, str] = {
    # "<file path suffix>:<function>" of the frame that made the call -> why its value is harmless
    "logging/__init__.py:<module>": "logging._startTime = time.time(): used only for LogRecord.relativeCreated, "
    "which Powertools' JSON formatter does not write; and Lambda's runtime imports logging before the handler, "
    "so it is in every snapshot whatever the handler does",
}

PROBE = textwrap.dedent(
    """
    import json, os, random, socket, sys, time, traceback, uuid

    calls = []
    importing = True

    def caller():
        for frame in reversed(traceback.extract_stack()[:-2]):
            if frame.filename != "<string>":
                return f"{frame.filename}:{frame.lineno}:{frame.name}"
        return "?"

    def watch(owner, name, label=None):
        real = getattr(owner, name)
        def wrapper(*args, **kwargs):
            if importing:
                calls.append([label or name, caller()])
            return real(*args, **kwargs)
        setattr(owner, name, wrapper)

    def refuse(*args, **kwargs):
        if importing:
            calls.append(["network", caller()])
        raise OSError("no network at import")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    for name in ("random", "getrandbits", "randbytes", "randint", "choice", "uniform", "shuffle", "seed"):
        watch(random, name, "random." + name)
    watch(random.Random, "seed", "random.Random() (seeded)")
    for name in ("urandom", "getrandom"):
        if hasattr(os, name):
            watch(os, name, "os." + name)
    for name in ("uuid1", "uuid4"):
        watch(uuid, name, "uuid." + name)
    for name in ("time", "time_ns"):
        watch(time, name, "time." + name)

    import {module}  # noqa

    importing = False
    print(json.dumps(calls))
    """
)


def _calls(name: str, module: str, *extra_paths: object) -> list[list[str]]:
    """What the import of ``module`` (with function ``name``'s code, layers and environment) drew."""
    fn = FUNCTIONS[name]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")},
        **fn.environment,
        "PYTHONPATH": os.pathsep.join(map(str, [*extra_paths, fn.code_dir, *fn.layers])),
    }
    out = subprocess.run([sys.executable, "-c", PROBE.replace("{module}", module)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _allowed(where: str) -> bool:
    """``where`` is ``<file>:<line>:<function>``; ALLOWED keys are ``<file suffix>:<function>``."""
    path, _, rest = where.partition(":")
    function = rest.rpartition(":")[2]
    return any(path.replace(os.sep, "/").endswith(key.rpartition(":")[0]) and key.rpartition(":")[2] == function for key in ALLOWED)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_importing_a_handler_keeps_nothing_a_snapshot_would_share(name: str) -> None:
    module = FUNCTIONS[name].handler.rsplit(".", 1)[0]
    kept = [(what, where) for what, where in _calls(name, module) if not _allowed(where)]
    assert kept == [], f"{name} draws at import: {kept[:10]}"


def test_the_probe_sees_a_value_drawn_at_import(tmp_path: Path) -> None:
    """The probe is not blind: a handler keeping ``uuid.uuid4()`` at module level fails it."""
    (tmp_path / "bad_handler.py").write_text("import uuid\n\nimport app  # noqa: F401\n\nINSTANCE = uuid.uuid4()\n")
    calls = _calls("LikesFunction", "bad_handler", tmp_path)
    assert [what for what, where in calls if "bad_handler.py" in where] == ["uuid.uuid4"], calls


def test_after_restore_reseeds_random_and_forgets_clients_and_services(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two environments restored from one snapshot share ``random``'s state until the hook re-seeds it;
    the cached clients and a service built before the snapshot are dropped."""
    import random

    from counters.core import client as dynamo
    from counters.core import snapstart
    from counters.core.settings import Settings
    from counters.runtime.function import Function

    built: list[object] = []
    function = Function(Settings, lambda settings: built.append(object()) or built[-1])
    function.configure(Settings(table_name="t"))
    before = function.service
    monkeypatch.setattr(dynamo, "_dynamodb", object())
    monkeypatch.setattr(dynamo, "_sqs", object())
    snapshot = random.getstate()

    draws = []
    for _ in range(2):  # two restores of the same snapshot
        random.setstate(snapshot)
        snapstart.after_restore()
        draws.append(random.random())
    assert draws[0] != draws[1]
    assert dynamo._dynamodb is None and dynamo._sqs is None
    assert function.service is not before and len(built) == 2


def test_the_hook_is_registered_with_the_runtime_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Lambda's runtime ``snapshot_restore_py`` exists and gets :func:`after_restore`, once;
    elsewhere the import fails quietly."""
    import types

    from counters.core import snapstart

    registered: list[object] = []
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_after_restore = registered.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    monkeypatch.setattr(snapstart, "_registered", None)
    assert snapstart.install() and snapstart.install()
    assert registered == [snapstart.after_restore]

    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails, as outside Lambda
    monkeypatch.setattr(snapstart, "_registered", None)
    assert snapstart.install() is False
