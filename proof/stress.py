"""``--stress N``: busy processes beside the proof, so it also runs on a loaded machine."""

from __future__ import annotations

import os
import subprocess
import sys

SPIN = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:  # bounded: the run's limit, or the proof gone
    for _ in range(200_000):
        pass
"""
STRESS_LIMIT_SECONDS = 3600.0


class Stress:
    """N pure-CPU spin processes beside the proof, bounded by the run (and by an hour)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Stress:
        for _ in range(self.n):
            self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN, str(STRESS_LIMIT_SECONDS), str(os.getpid())]))
        return self

    def __exit__(self, *_: object) -> None:
        for proc in self.procs:  # only the processes started here, by their own handle
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
