"""Lambda SnapStart: what the layer redoes after an execution environment is restored from a snapshot.

With SnapStart (template.yaml: ``SnapStart: ApplyOn: PublishedVersions``) Lambda runs the init
phase (the handler module's import) once per published version, snapshots the memory, and resumes
every new execution environment from that one snapshot: whatever init drew or opened is shared by
all of them. Handlers draw nothing unique and open nothing at import
(tests/unit/test_snapshot_safety.py imports every one to check), but some state is process-wide by
nature, so after a restore [`after_restore`][counters.core.snapstart.after_restore]:

* re-seeds the ``random`` module's generator, seeded from the OS when ``random`` was imported
  (Powertools' log sampling and any caller of ``random.random`` would otherwise draw the same
  sequence in every restored environment);
* drops the cached botocore clients (DynamoDB, SQS): they are made on first use, so normally
  after the restore, but one made during init (a warm-up call) would hold dead connections and
  the credentials resolved at snapshot time;
* runs the hooks registered with [`on_restore`][counters.core.snapstart.on_restore] (a [`Function`][counters.runtime.function.Function]
  forgets a service built before the snapshot: its retry jitter's ``random.Random`` was seeded then).

``snapshot_restore_py`` ships in Lambda's managed Python runtimes (3.12+); anywhere else (tests,
the local stack, a user's own process) its import fails and nothing is registered.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable

CLIENT_CACHES = (("counters.core.client", "reset_clients"),)
"""(module, function) forgetting a cached client; called only if the module is loaded (read from
``sys.modules``, so this module imports neither)."""

_hooks: list[Callable[[], None]] = []
_lock = threading.Lock()
_registered: bool | None = None  # None: not tried yet; False: no snapshot_restore_py here


def on_restore(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` after every restore (after the layer's own resets); registers with the runtime."""
    with _lock:
        _hooks.append(hook)
    install()
    return hook


def after_restore() -> None:
    """Re-seed ``random``, forget the cached clients, run the registered hooks."""
    random.seed()  # from os.urandom, which the restored VM's kernel re-seeds
    for module, name in CLIENT_CACHES:
        reset = getattr(sys.modules.get(module), name, None)
        if reset is not None:
            reset()
    with _lock:
        hooks = list(_hooks)
    for hook in hooks:
        hook()


def install() -> bool:
    """Register [`after_restore`][counters.core.snapstart.after_restore] with the Lambda runtime once; False where there is no runtime hook API."""
    global _registered
    with _lock:
        if _registered is None:
            try:
                from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]  # in Lambda's runtime only
            except ImportError:
                _registered = False
            else:
                register_after_restore(after_restore)
                _registered = True
        return _registered
