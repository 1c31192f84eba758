"""The stacks the docs' blocks run against, started as `make dev` and `make dev-regions` start them
(``python -m devstack``, ``python -m devstack.regions``) on the ports the pages use: the API on
:3000 (the Regions on :3000, :3001...), DynamoDB Local on :8000, SQS on :9324. Nothing a page says
is rewritten, so a port taken by something else fails the run with that port's name. One stack at
a time (both take :3000)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from devstack.dynamodb_local import port_open
from tests.e2e.docs.runner import ROOT

READY = "Ctrl-C to stop."
API_PORT, DYNAMODB_PORT, SQS_PORT = 3000, 8000, 9324
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "dummy", "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_DEFAULT_REGION": "us-east-1"}
"""docs/layer.md's `export` line, the pages' Python blocks' environment. The stacks run with the
test's own credentials, as `make dev` runs in another terminal: `make dev`'s DynamoDB Local
(-sharedDb) shows every client the same tables whatever its access key."""


class PortBusy(RuntimeError):
    pass


@dataclass
class Stack:
    name: str
    args: tuple[str, ...]
    process: subprocess.Popen[bytes]
    ports: list[int]
    out: Path
    err: Path

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.name, self.args

    def output(self) -> str:
        return self.out.read_text(errors="replace")[-4000:] + self.err.read_text(errors="replace")[-4000:]

    def wait_ready(self) -> None:
        """Until it prints its ready line, however slow the machine: an exit fails at once, a start
        that never ends is a hang for pytest-timeout."""
        while not any(line.strip() == READY for line in self.out.read_text(errors="replace").splitlines()):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode} before it was ready:\n{self.output()}")
            time.sleep(0.3)

    def stop(self) -> None:
        """SIGTERM (what Ctrl-C does), then until every port it held is closed (the next stack
        takes the same ports); killed if it does not stop within 120 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        while any(port_open("127.0.0.1", p) for p in self.ports):
            time.sleep(0.2)
        shutil.rmtree(self.out.parent, ignore_errors=True)  # its logs (quoted in any failure already)


def regions_count(args: tuple[str, ...]) -> int:
    for i, arg in enumerate(args):
        if arg == "--regions" and i + 1 < len(args):
            return len(args[i + 1].split(","))
        if arg.startswith("--regions="):
            return len(arg.split("=", 1)[1].split(","))
    return 2


def start(name: str, args: tuple[str, ...] = ()) -> Stack:
    """``dev`` or ``dev-regions`` with the page's ARGS; the ports the docs use must be free."""
    if name == "dev":
        module, ports = "devstack", [API_PORT, DYNAMODB_PORT, SQS_PORT]
        options = ["--concurrency", "1", "--quiet"]
    elif name == "dev-regions":
        n = regions_count(args)
        module, ports = "devstack.regions", [*(API_PORT + i for i in range(n)), DYNAMODB_PORT, *(SQS_PORT + i for i in range(n))]
        options = ["--concurrency", "1", "--quiet"]
    else:
        raise ValueError(f"no stack {name!r}")
    busy = [p for p in ports if port_open("127.0.0.1", p)]
    if busy:
        raise PortBusy(
            f"`make {name}` for the docs needs 127.0.0.1 port(s) {', '.join(map(str, busy))}, the ones the pages use, "
            "and something else listens there (another `make dev`?): stop it and run again"
        )
    tmp = Path(tempfile.mkdtemp(prefix=f"docs-{name}-"))
    out, err = tmp / "out.log", tmp / "err.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    command = [sys.executable, "-m", module, *options, *args]
    with out.open("wb") as o, err.open("wb") as e:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=o, stderr=e, start_new_session=True)  # noqa: S603
    stack = Stack(name, args, process, ports, out, err)
    try:
        stack.wait_ready()
    except BaseException:
        stack.stop()
        raise
    return stack


class Stacks:
    """At most one running stack; ``use`` switches when a block needs another."""

    def __init__(self) -> None:
        self.current: Stack | None = None
        self.started: list[str] = []

    def use(self, name: str, args: tuple[str, ...]) -> Stack:
        if self.current is not None and self.current.key == (name, args):
            return self.current
        self.close()
        began = time.monotonic()
        self.current = start(name, args)
        self.started.append(" ".join([name, *args]) + f" in {time.monotonic() - began:.0f} s")
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None
