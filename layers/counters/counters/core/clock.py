"""The layer's clock: the time every key window and expiry is measured with.

[`now`][counters.core.clock.now] is ``time.time()`` unless something replaced its source with
[`use`][counters.core.clock.use]. The local stack does, in each function process it runs, when a test
asks for a clock it can move (the devstack's ``DEVSTACK_CLOCK``, a file holding an offset in
seconds, never set in AWS): "25 hours later" is then a write of an offset, never a sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_source: Callable[[], float] = time.time


def now() -> float:
    """Seconds since the epoch, from the installed source (``time.time`` by default)."""
    return _source()


def use(source: Callable[[], float] | None) -> None:
    """Read the time from ``source`` from now on (``None``: back to ``time.time``)."""
    global _source  # noqa: PLW0603 - one clock per process, replaced only by the local stack and tests
    _source = time.time if source is None else source
