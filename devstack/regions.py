"""``python -m devstack.regions`` (``make dev-regions``): the local stack as 2 or 3 Regions of one
global table, so a like written in one Region can be watched arriving in another.

* One DynamoDB Local. Without ``-sharedDb`` it keeps a database per client Region, so each Region
  is a client ``region_name`` on the same endpoint, with its own table and its own stream.
* One ``python -m devstack`` process per Region (its API on ``--port`` + i: 3000, 3001, 3002), with
  ``AWS_REGION``/``AWS_DEFAULT_REGION`` set to its Region and the template's parameters
  ``GlobalTableMode``, ``ReplicaRegions`` and ``HomeRegion`` given as overrides, so every function
  gets ``GLOBAL_TABLE_MODE``/``TABLE_REGIONS``/``HOME_REGION`` from the template, as on AWS. Its
  stream consumers poll that Region's stream; its SQS emulator is its own (``--sqs-port`` + i).
  A process per Region, because the layer's clients and settings are per process, as per Lambda.
* ``--mode mrec``: the emulator ``testkit.regions.GlobalTable(...).start()`` replicates every
  Region's local writes to the others (last writer wins per item, asynchronous, per item; see
  testkit/regions.py for what it models).
  ``--mode mrsc`` (3 Regions): DynamoDB Local runs with ``-sharedDb``, one store every Region
  reads and writes (strongly consistent, one stream that every Region's consumers read, as MRSC
  replicas' streams carry the same records). It does not refuse transactions or inject
  ``ReplicatedWriteConflictException`` (the emulator's in-process MRSC client does, for tests).
* Ctrl-C (or SIGTERM) stops the Regions' stacks, then the replicator, then DynamoDB Local.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from devstack.dynamodb_local import DynamoDBLocal, _die_with_parent
from devstack.template import ROOT

READY = "Ctrl-C to stop."
DEFAULT_REGIONS = "eu-west-1,us-east-1"


@dataclass
class RegionStack:
    """One Region's ``python -m devstack`` child, its output relayed with a ``[Region]`` prefix."""

    region: str
    port: int
    command: list[str]
    env: dict[str, str]
    out: IO[str] = field(default=sys.stdout)
    process: subprocess.Popen[str] | None = None
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RegionStack:
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, our own module
            self.command,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches the parent, which stops the Regions in order
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 - a parent killed outright takes the Regions with it
        )
        threading.Thread(target=self._relay, daemon=True, name=f"relay-{self.region}").start()
        return self

    def _relay(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.out.write(f"[{self.region}] {line}")
            self.out.flush()
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"{self.region}: its stack did not start within {timeout:.0f}s") from None
            if line is None:
                raise RuntimeError(f"{self.region}: its stack exited with {self.process and self.process.wait()}")
            if line.strip() == READY:
                return

    def terminate(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the devstack stops its API, pollers and SQS emulator

    def wait(self, timeout: float = 30) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def region_stacks(
    regions: list[str],
    mode: str,
    home: str,
    *,
    endpoint: str,
    port: int,
    sqs_port: int,
    table: str,
    overrides: list[str],
    concurrency: int,
    quiet: bool,
) -> list[RegionStack]:
    """One ``python -m devstack`` per Region: its port, its Region, the global table's parameters."""
    stacks = []
    for i, region in enumerate(regions):
        env = {**os.environ, "AWS_REGION": region, "AWS_DEFAULT_REGION": region, "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
        env.pop("AWS_ENDPOINT_URL_SQS", None)  # each Region starts its own SQS emulator
        params = [f"GlobalTableMode={mode}", f"ReplicaRegions={','.join(regions)}", f"HomeRegion={home}"]
        if region != home:  # the template refuses a stack outside HomeRegion without its replica's stream; locally
            # each stack reads its own table's stream by the table's name, so this ARN only names it
            params.append(f"ReplicaStreamArn=arn:aws:dynamodb:{region}:123456789012:table/{table}/stream/local")
        params += overrides
        command = [sys.executable, "-m", "devstack", "--region", region, "--port", str(port + i), "--sqs-port", str(sqs_port + i)]
        command += ["--table", table, "--concurrency", str(concurrency), "--wait-dynamodb", "60", *(["--quiet"] if quiet else [])]
        command += ["--parameter-overrides", *params]
        stacks.append(RegionStack(region, port + i, command, env))
    return stacks


def replicator(endpoint: str, table: str, regions: list[str], seed: int, lag: float | None) -> Any:
    """The MREC emulator between the Regions' tables (testkit/regions.py), started: each local
    write reaches the other Regions ``lag`` seconds later, or (``None``) after the emulator's
    seeded delays (milliseconds to minutes, a few duplicated)."""
    layer = str(ROOT / "layers" / "counters")  # the emulator's clients take the layer's client config
    if layer not in sys.path:
        sys.path.insert(0, layer)
    from testkit.regions import Delays, GlobalTable, Mode

    delays = None if lag is None else Delays.fixed(lag)
    return GlobalTable(endpoint, table, regions=tuple(regions), mode=Mode.MREC, seed=seed, delays=delays).create().start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.regions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--regions", default=DEFAULT_REGIONS, help=f"2 or 3 Regions, comma-separated (default {DEFAULT_REGIONS})")
    parser.add_argument("--mode", choices=["mrec", "mrsc"], default="mrec", help="the global table's mode (mrsc: exactly 3 Regions)")
    parser.add_argument("--home", default=None, help="HomeRegion (default: the first Region)")
    parser.add_argument("--port", type=int, default=3000, help="the first Region's API port; the next Regions take the next ports")
    parser.add_argument("--dynamodb-port", type=int, default=8000)
    parser.add_argument("--sqs-port", type=int, default=9324, help="the first Region's SQS emulator; the next Regions take the next ports")
    parser.add_argument("--table", default="tally-local")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes per function, per Region")
    parser.add_argument("--seed", type=int, default=0, help="the replicator's seed (delays, reordering, duplicates)")
    parser.add_argument(
        "--lag",
        default="1",
        help="mrec: seconds from a write to its arrival in the other Regions (default 1), or 'seeded' for the "
        "emulator's seeded delays (milliseconds to minutes: replication has no SLA)",
    )
    parser.add_argument(
        "--parameter-overrides", nargs="+", default=[], metavar="KEY=VALUE", help="more template parameters, for every Region"
    )
    parser.add_argument("--quiet", action="store_true", help="no access log line per request")
    args = parser.parse_args(argv)
    regions = [r.strip() for r in args.regions.split(",") if r.strip()]
    if len(regions) not in (2, 3) or len(set(regions)) != len(regions):
        parser.error("--regions takes 2 or 3 distinct Regions")
    if args.mode == "mrsc" and len(regions) != 3:
        parser.error("an MRSC global table has exactly 3 Regions (--regions a,b,c)")
    try:
        lag = None if args.lag == "seeded" else float(args.lag)
    except ValueError:
        parser.error("--lag takes seconds or 'seeded'")
    home = args.home or regions[0]
    if home not in regions:
        parser.error(f"--home {home} is not one of --regions")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    ddb_local: DynamoDBLocal | None = None
    stacks: list[RegionStack] = []
    table: Any = None
    try:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        if not endpoint:
            ddb_local = DynamoDBLocal(port=args.dynamodb_port, log=ROOT / ".dynamodb-local.log", shared_db=args.mode == "mrsc").start()
            endpoint = ddb_local.endpoint
        print(
            f"DynamoDB Local   {endpoint}   ({'one shared store (MRSC)' if args.mode == 'mrsc' else 'a database per Region'})", flush=True
        )
        stacks = region_stacks(
            regions,
            args.mode,
            home,
            endpoint=endpoint,
            port=args.port,
            sqs_port=args.sqs_port,
            table=args.table,
            overrides=args.parameter_overrides,
            concurrency=args.concurrency,
            quiet=args.quiet,
        )
        for stack in stacks:  # one at a time: each creates its Region's table, then serves
            stack.start().wait_ready(timeout=180)
        if args.mode == "mrec":
            table = replicator(endpoint, args.table, regions, args.seed, lag)
            delay = f"{lag:g} s lag" if lag is not None else f"seeded delays, seed {args.seed}"
            print(f"Replicator       MREC between {', '.join(regions)} (testkit.regions, {delay})", flush=True)
        for stack in stacks:
            print(f"Region {stack.region:12} {stack.url}{'   (HomeRegion)' if stack.region == home else ''}", flush=True)
        print(READY, flush=True)
        reported = 0
        while all(s.process and s.process.poll() is None for s in stacks):
            time.sleep(0.5)
            errors = table.live_errors if table is not None else []
            for error in errors[reported:]:  # the replicator keeps going; say what it could not apply
                print(f"Replicator       {error}", file=sys.stderr, flush=True)
            reported = len(errors)
        print("a Region's stack exited; stopping the others", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
        return 0
    except RuntimeError as error:
        print(f"python -m devstack.regions: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for stack in stacks:  # all at once: each takes seconds to stop its workers
            stack.terminate()
        for stack in stacks:
            stack.wait()
        if table is not None:
            table.stop()
        if ddb_local:
            ddb_local.stop()


if __name__ == "__main__":
    sys.exit(main())
