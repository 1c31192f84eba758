"""A clock the tests move, read by the local stack's functions: "25 hours later" without a sleep.

The layer reads the time through :func:`counters.core.clock.now`. A :class:`MovableClock` is the
wall clock plus an offset kept in a file; the devstack installs it in every function process it
starts when ``DEVSTACK_CLOCK`` names that file (:meth:`MovableClock.environment`; never set outside
tests), and a test installs it in its own process with :meth:`MovableClock.install`. Moving it is one
atomic file write, which every process sees at its next reading.

:func:`ttl_pass` is DynamoDB TTL's part on the moved clock: it deletes the items whose ``expiresAt``
is at or before that time, as TTL does some time after expiry (DynamoDB Local deletes nothing by the
moved clock). On an MRSC table, which has no TTL, the test runs the expiry sweeper instead.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ENV = "DEVSTACK_CLOCK"


class MovableClock:
    """The wall clock plus an offset (seconds) stored in ``path``; it only moves forward."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.exists():
            self._write(0.0)

    def offset(self) -> float:
        try:
            return float(self.path.read_text() or 0)
        except (OSError, ValueError):  # the file replaced at this instant: read it again
            return float(self.path.read_text() or 0)

    def now(self) -> float:
        return time.time() + self.offset()

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward; returns the new time."""
        if seconds < 0:
            raise ValueError("time does not go back")
        self._write(self.offset() + seconds)
        return self.now()

    def environment(self) -> dict[str, str]:
        """What a local stack's function processes need to read this clock."""
        return {ENV: str(self.path)}

    def install(self) -> None:
        """This process's layer reads this clock (undo with ``counters.core.clock.use(None)``)."""
        from counters.core import clock

        clock.use(self.now)

    def _write(self, offset: float) -> None:
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(repr(offset))
        os.replace(tmp, self.path)


def install_from_env() -> None:
    """The devstack's hook: with ``DEVSTACK_CLOCK`` set, this process reads that clock."""
    path = os.environ.get(ENV)
    if path:
        MovableClock(path).install()


def ttl_pass(dynamodb: Any, table: str, now: float) -> int:
    """Delete every item whose ``expiresAt`` is at or before ``now`` (what DynamoDB TTL does, some
    time after); returns how many were deleted."""
    deleted = 0
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#e <= :now",
        ExpressionAttributeNames={"#e": "expiresAt"},
        ExpressionAttributeValues={":now": {"N": str(int(now))}},
        ProjectionExpression="PK, SK",
    )
    for page in pages:
        for key in page.get("Items", []):
            dynamodb.delete_item(TableName=table, Key=key)
            deleted += 1
    return deleted
