"""``python -m devstack`` as a developer runs it: Ctrl-C is one clean line, and whatever signal
ends its process group (SIGINT, SIGTERM, even SIGKILL) nothing it started keeps running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from devstack.dynamodb_local import free_port, port_open
from devstack.template import ROOT

READY = "Ctrl-C to stop."


@dataclass
class Devstack:
    process: subprocess.Popen[bytes]
    ports: dict[str, int]
    out: Path
    err: Path

    def wait_ready(self) -> None:
        """Until it prints its ready line, however slow the machine: an exit fails at once, a
        start that never finishes is a hang for pytest-timeout (no clock decides the verdict)."""
        while READY not in self.out.read_text():
            assert self.process.poll() is None, f"devstack exited early:\n{self.err.read_text()}"
            time.sleep(0.2)

    def java_pids(self) -> list[int]:
        """DynamoDB Local processes serving this devstack's port (found by command line)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(b"DynamoDBLocal" in a for a in argv) and str(self.ports["dynamodb"]).encode() in argv:
                found.append(int(entry.name))
        return found

    def leftovers(self) -> list[str]:
        left = [f"{name} port {port} still open" for name, port in self.ports.items() if port_open("127.0.0.1", port)]
        return left + [f"java pid {pid}" for pid in self.java_pids()]


@pytest.fixture
def devstack(tmp_path: Path) -> Iterator[Devstack]:
    ports = {"api": free_port(), "dynamodb": free_port(), "sqs": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    cmd = [sys.executable, "-m", "devstack", "--port", str(ports["api"]), "--dynamodb-port", str(ports["dynamodb"])]
    cmd += ["--sqs-port", str(ports["sqs"]), "--concurrency", "1", "--table", "tally-signals"]
    with open(out, "wb") as o, open(err, "wb") as e:
        # its own process group, as a shell gives a foreground job: the signals below go to the group.
        # And Ctrl-C's default disposition, as a terminal gives it: pytest started as a background
        # job of a script (`make test &`, CI wrappers) inherits SIGINT ignored, and so would the
        # devstack, which would then never see the Ctrl-C this test sends.
        process = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=o,
            stderr=e,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    stack = Devstack(process, ports, out, err)
    try:
        yield stack
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in stack.java_pids():  # never leave a JVM behind, even when the test failed
            os.kill(pid, signal.SIGKILL)


def _gone(stack: Devstack) -> list[str]:
    """What it started, once all of it has stopped: the group is signalled and the parent reaped,
    so what is left is either on its way out or leaked. A leak never goes, and the test hangs
    until pytest-timeout fails it; no deadline passes a slow exit off as a leak."""
    while left := stack.leftovers():
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_everything_with_one_line(devstack: Devstack, sig: signal.Signals) -> None:
    devstack.wait_ready()
    assert devstack.java_pids(), "DynamoDB Local is not running"
    api = f"http://127.0.0.1:{devstack.ports['api']}"
    assert requests.get(f"{api}/posts/nothing-here", timeout=30).status_code == 404
    assert requests.post(f"{api}/posts", json={"authorId": "a", "body": "b"}, timeout=30).status_code == 201  # records metrics
    os.killpg(devstack.process.pid, sig)  # a terminal's Ctrl-C signals the whole foreground group
    assert devstack.process.wait() == 0  # however long stopping takes on a busy machine (a hang is pytest-timeout's)
    assert _gone(devstack) == []
    err = devstack.err.read_text()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "No application metrics" not in err, err
    out = devstack.out.read_text()
    assert re.search(r"^GET /posts/nothing-here 404 \d+ms$", out, re.M), out  # the access log
    assert re.search(r"^POST /posts 201 \d+ms$", out, re.M), out
    assert '"_aws"' not in out, out  # no EMF blob per request
    assert out.count("stopping") == 1, out
    assert out.rstrip().endswith("stopping..."), out


def test_sigkill_of_the_group_leaves_nothing_running(devstack: Devstack) -> None:
    devstack.wait_ready()
    assert devstack.java_pids(), "DynamoDB Local is not running"
    os.killpg(devstack.process.pid, signal.SIGKILL)
    devstack.process.wait(timeout=30)
    assert _gone(devstack) == []


def test_sigkill_of_the_parent_alone_leaves_nothing_running(devstack: Devstack) -> None:
    devstack.wait_ready()
    os.kill(devstack.process.pid, signal.SIGKILL)  # e.g. the OOM killer: no handler runs in the parent
    devstack.process.wait(timeout=30)
    assert _gone(devstack) == []


def test_dynamodb_local_listens_on_loopback_only(dynamodb_endpoint: str) -> None:
    if os.environ.get("TALLY_TEST_DYNAMODB_ENDPOINT"):
        pytest.skip("an external DynamoDB endpoint")
    port = int(dynamodb_endpoint.rsplit(":", 1)[1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                listening.append(address)
    # 127.0.0.1 as an IPv4 or IPv4-mapped IPv6 address (Java listens on a dual-stack socket)
    assert listening and all(a in ("0100007F", "0000000000000000FFFF00000100007F") for a in listening), listening


def test_an_endpoint_that_never_answers_fails_in_one_line(tmp_path: Path) -> None:
    """AWS_ENDPOINT_URL_DYNAMODB set to something not up: waited for (a bound), then one line that
    names the endpoint, a non-zero exit, no traceback."""
    closed = free_port()  # bound and released: nothing listens there
    endpoint = f"http://127.0.0.1:{closed}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}, "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
    cmd = [sys.executable, "-m", "devstack", "--port", str(free_port()), "--sqs-port", str(free_port()), "--wait-dynamodb", "1.5"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert endpoint in lines[0] and "1.5s" in lines[0], lines[0]


def test_a_background_job_still_stops_on_sigint(tmp_path: Path) -> None:
    """A shell starts a background job with SIGINT ignored (no job control: `make dev &`, a
    script's `python -m devstack &`); the devstack restores its own handler, so SIGINT stops it."""
    probe = f"{sys.executable} -c 'import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)' & wait $!"
    inherited = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert inherited == "True", inherited  # what the devstack below inherits
    ports = {"api": free_port(), "dynamodb": free_port(), "sqs": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    out, err, pid_file = tmp_path / "stdout", tmp_path / "stderr", tmp_path / "pid"
    cmd = [sys.executable, "-m", "devstack", "--port", str(ports["api"]), "--dynamodb-port", str(ports["dynamodb"])]
    cmd += ["--sqs-port", str(ports["sqs"]), "--concurrency", "1", "--table", "tally-background"]
    script = f"{' '.join(cmd)} >{out} 2>{err} & echo $! >{pid_file}; wait $!"
    shell = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, start_new_session=True)
    stack = Devstack(shell, ports, out, err)
    try:
        while not pid_file.exists() or not pid_file.read_text().strip() or not out.exists():
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        stack.wait_ready()
        os.kill(pid, signal.SIGINT)
        assert shell.wait() == 0  # `wait $!`: the devstack's own exit status
        assert _gone(stack) == []
        assert "Traceback" not in err.read_text(), err.read_text()
        assert out.read_text().rstrip().endswith("stopping...")
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        for pid in stack.java_pids():
            os.kill(pid, signal.SIGKILL)
