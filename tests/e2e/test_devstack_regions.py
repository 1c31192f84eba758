"""``python -m devstack.regions`` (``make dev-regions``) as a developer runs it: a like written
through Region A's API becomes readable through Region B's, and SIGTERM (Ctrl-C) stops every
Region's stack, the replicator and DynamoDB Local."""

from __future__ import annotations

import os
import random
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
from tests.conftest import HTTP_TIMEOUT

READY = "Ctrl-C to stop."


def free_ports(count: int) -> int:
    """A port with the next ``count - 1`` free too (the Regions take consecutive ports), drawn below
    Linux's ephemeral range (32768-60999): the ports every other process of the suite gets from the
    OS (DynamoDB Local, the APIs, clients' source ports) are never taken from under us there."""
    rng = random.Random()
    while True:
        first = rng.randrange(20000, 32000 - count)
        if all(not port_open("127.0.0.1", first + i) for i in range(count)):
            return first


@dataclass
class Regions:
    process: subprocess.Popen[bytes]
    names: list[str]
    urls: list[str]
    ports: list[int]
    out: Path
    err: Path

    def wait_ready(self) -> None:
        """Until it prints its ready line; an exit fails at once, a hang is pytest-timeout's."""
        while not any(line == READY for line in self.out.read_text().splitlines()):
            assert self.process.poll() is None, f"dev-regions exited early:\n{self.out.read_text()}\n{self.err.read_text()}"
            time.sleep(0.5)


def start(tmp_path: Path, mode: str, regions: list[str], *options: str) -> Regions:
    api, sqs, ddb = free_ports(len(regions)), free_ports(len(regions)), free_port()
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    command = [sys.executable, "-m", "devstack.regions", "--mode", mode, "--regions", ",".join(regions)]
    command += ["--port", str(api), "--sqs-port", str(sqs), "--dynamodb-port", str(ddb), "--concurrency", "1", "--quiet", *options]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    with out.open("wb") as o, err.open("wb") as e:
        process = subprocess.Popen(command, cwd=ROOT, stdout=o, stderr=e, env=env)  # noqa: S603
    ports = [api + i for i in range(len(regions))] + [sqs + i for i in range(len(regions))] + [ddb]
    return Regions(process, regions, [f"http://127.0.0.1:{api + i}" for i in range(len(regions))], ports, out, err)


@pytest.fixture
def regions(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Regions]:
    mode, names = request.param
    stack = start(tmp_path, mode, names)
    try:
        yield stack
    finally:
        stop(stack)


def stop(stack: Regions) -> None:
    """SIGTERM (Ctrl-C) if it still runs; killed if it does not stop within 90 s."""
    if stack.process.poll() is None:
        stack.process.send_signal(signal.SIGTERM)
        try:
            stack.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            stack.process.kill()


@pytest.mark.parametrize(
    "regions",
    [("mrec", ["eu-west-1", "us-east-1"]), ("mrsc", ["us-east-1", "us-east-2", "us-west-2"])],
    indirect=True,
    ids=["mrec", "mrsc"],
)
@pytest.mark.timeout(420)
def test_a_like_in_one_region_is_read_in_another_then_sigterm_stops_everything(regions: Regions) -> None:
    regions.wait_ready()
    a, b = regions.urls[0], regions.urls[-1]
    # p2: its home Region is eu-west-1 (on MREC an id is created there only: docs/regions.md "Creations")
    created = requests.post(f"{a}/posts", json={"postId": "p2", "authorId": "alice", "body": "Hello"}, timeout=HTTP_TIMEOUT)
    assert created.status_code == 201, created.text
    liked = requests.put(f"{a}/posts/p2/likes/u1", timeout=HTTP_TIMEOUT)
    assert liked.status_code == 200 and liked.json()["changed"] is True, liked.text
    likers: list[str] = []
    while not likers:  # MREC: no replication SLA (the local lag is 1 s): waited for, however long (a hang is the timeout's)
        got = requests.get(f"{b}/posts/p2/likes", params={"limit": 10}, timeout=HTTP_TIMEOUT)
        likers = [x["userId"] for x in got.json().get("likers", [])] if got.status_code == 200 else []
        time.sleep(0.5)
    assert likers == ["u1"], regions.out.read_text()[-3000:]
    assert f"[{regions.names[-1]}]" in regions.out.read_text()  # each Region's output, relayed with its name

    regions.process.send_signal(signal.SIGTERM)
    assert regions.process.wait() == 0, regions.err.read_text()  # however long stopping takes on a busy machine (a hang is the timeout's)
    left = [port for port in regions.ports if port_open("127.0.0.1", port)]
    assert not left, f"ports still open after SIGTERM: {left}"


@pytest.mark.parametrize("regions", [("mrec", ["eu-west-1", "us-east-1"])], indirect=True, ids=["mrec"])
@pytest.mark.timeout(420)
def test_a_transfer_is_usable_in_the_target_region_with_nobody_calling_receive(regions: Regions) -> None:
    """Issue 28 item 4, over HTTP: B's EscrowFunction (the template's, polling B's stream) credits a
    transfer sent from A; B's share shows it before any take asks, and nobody calls
    ``POST /resources/{id}/transfers/receive``."""
    regions.wait_ready()
    a, b = regions.urls
    target = regions.names[1]
    created = requests.post(
        f"{a}/resources",
        json={"resourceId": "rx", "capacity": 10, "strategy": "crt", "shares": {regions.names[0]: 10, target: 0}},
        timeout=HTTP_TIMEOUT,
    )
    assert created.status_code == 201, created.text

    def share_in_b() -> dict[str, int] | None:
        got = requests.get(f"{b}/resources/rx", timeout=HTTP_TIMEOUT)
        return got.json()["regions"][target] if got.status_code == 200 else None

    while share_in_b() is None:  # the resource replicates to B: waited for, however long (a hang is the timeout's)
        time.sleep(0.5)
    sent = requests.post(
        f"{a}/resources/rx/transfers", json={"to": target, "quantity": 4}, headers={"Idempotency-Key": "move"}, timeout=HTTP_TIMEOUT
    )
    assert sent.status_code == 201, sent.text
    share = share_in_b()
    while share != {"capacity": 4, "reserved": 0, "available": 4}:  # credited by B's EscrowFunction, nobody calling receive
        time.sleep(0.5)
        share = share_in_b()
    assert share == {"capacity": 4, "reserved": 0, "available": 4}, regions.err.read_text()[-3000:]
    taken = [
        requests.post(f"{b}/resources/rx/reservations", json={"quantity": 1}, headers={"Idempotency-Key": f"b{i}"}, timeout=HTTP_TIMEOUT)
        for i in range(4)
    ]
    assert [t.status_code for t in taken] == [201] * 4, [t.text for t in taken]
