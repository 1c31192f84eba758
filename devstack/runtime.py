"""A docker-free stand-in for the Lambda runtime: one process per execution environment.

Each :class:`Worker` is a separate Python process holding one function's module, loaded with
the function's environment and its layers on ``sys.path`` (as ``/opt/python`` would be), so
module-level state (clients, Powertools) behaves as in Lambda: set up once per cold start,
one invocation at a time. A :class:`FunctionPool` grows workers up to a concurrency limit,
like Lambda scaling out, and kills a worker whose invocation outlives the function's
timeout.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devstack.template import Function

_ctx = mp.get_context("forkserver")
PRELOAD = ["boto3", "botocore.session", "botocore.client", "aws_lambda_powertools"]
"""The libraries every function imports, imported once by the fork server its workers are forked
from (``spawn`` imported them again in every worker: about 0.4 s of a worker's 0.55 s start). Only
libraries: each worker still imports its own handler, and so the layer, as a cold start does."""
_ctx.set_forkserver_preload(PRELOAD)


@dataclass
class LambdaContext:
    """The attributes of the real ``LambdaContext`` that handlers and Powertools read."""

    function_name: str = "local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 128
    aws_request_id: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""
    deadline_ms: int = 0

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))

    @classmethod
    def for_function(cls, name: str, memory: int = 128, timeout: int = 3) -> LambdaContext:
        return cls(
            function_name=name,
            memory_limit_in_mb=memory,
            aws_request_id=str(uuid.uuid4()),
            log_group_name=f"/aws/lambda/{name}",
            log_stream_name=f"local/{os.getpid()}",
            deadline_ms=int(time.time() * 1000) + timeout * 1000,
        )


class _WithoutEmf:
    """stdout minus CloudWatch EMF lines (``{"_aws": ...}``): what Powertools' Metrics prints per
    request is noise on a terminal. (POWERTOOLS_METRICS_DISABLED is not used: it stops the flush
    from clearing the metric set, so every 100th value still prints a blob.)"""

    def __init__(self, out: Any) -> None:
        self.out, self.pending = out, ""

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            if not line.startswith('{"_aws"'):
                self.out.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def _worker_main(fn: Function, conn: Any, environ: dict[str, str]) -> None:
    # The parent's environment when it started this worker (the fork server's is the one it had
    # when the server started): what a spawned worker inherited.
    os.environ.clear()
    os.environ.update(environ)
    if os.environ.get("DEVSTACK_QUIET_METRICS") == "1":  # set by `python -m devstack` without --metrics
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        sys.stdout = _WithoutEmf(sys.stdout)
    # Ctrl-C reaches the whole foreground process group; the parent stops its workers itself
    # (a worker interrupted mid-invocation would only print a KeyboardInterrupt traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(fn.environment)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", fn.name)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", str(fn.memory))
    for path in reversed([str(fn.code_dir), *map(str, fn.layers)]):
        sys.path.insert(0, path)
    module_name, handler_name = fn.handler.rsplit(".", 1)
    try:
        handler = getattr(importlib.import_module(module_name), handler_name)
    except Exception:  # noqa: BLE001 - an init error fails every invocation, as in Lambda
        init_error = traceback.format_exc()
        handler = None
    _log_writes(fn.name)
    _movable_clock()
    report_faults = _inject_faults(fn.name)
    _setup(fn.name)
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        event = message
        if handler is None:
            conn.send(("error", {"errorType": "Runtime.ImportModuleError", "errorMessage": init_error}))
            continue
        context = LambdaContext.for_function(fn.name, fn.memory, fn.timeout)
        try:
            answer: tuple[str, Any] = ("ok", handler(event, context))
        except Exception as exc:  # noqa: BLE001 - like Lambda: any error becomes an error result
            sys.stderr.write(traceback.format_exc())
            answer = ("error", {"errorType": type(exc).__name__, "errorMessage": str(exc)})
        report_faults()
        try:
            conn.send(answer)
        except OSError:  # the parent is gone (killed): nobody to answer, stop quietly
            return


def _log_writes(function: str) -> None:
    """Test hook: with ``DEVSTACK_WRITE_LOG`` (a folder; never set outside tests), every item the
    layer's DynamoDB client writes in this worker is logged there for the HTTP multi-Region proof's
    writer check (testkit.write_log). Installed before the faults, so it sees each attempt's own answer."""
    folder = os.environ.get("DEVSTACK_WRITE_LOG")
    if not folder:
        return
    from counters.core import client as dynamo
    from testkit.write_log import install

    install(dynamo.client(), folder, function)


def _movable_clock() -> None:
    """Test hook: with ``DEVSTACK_CLOCK`` (a file holding an offset in seconds; never set outside
    tests), the layer in this worker reads the time from that clock (testkit.clock), which the test moves."""
    if os.environ.get("DEVSTACK_CLOCK"):
        from testkit.clock import install_from_env

        install_from_env()


def _setup(function: str) -> None:
    """Bench hook: ``DEVSTACK_SETUP`` = JSON {function: "module:callable"} (never set outside the
    bench and tests) calls that callable once in this worker, after the handler's import and before
    its first invocation: bench/spread.py attaches its limit model to the layer's client there."""
    target = json.loads(os.environ.get("DEVSTACK_SETUP") or "{}").get(function)
    if target:
        module_name, name = target.split(":")
        getattr(importlib.import_module(module_name), name)()


def _inject_faults(function: str) -> Callable[[], None]:
    """Test hook: ``DEVSTACK_FAULTS`` = JSON {function: [[kind, {operations, rate, limit, services}], ...]}
    attaches the test kit's FaultInjector (testkit.faults) to the layer's clients in this worker (never set outside tests):
    ``services`` lists ``dynamodb`` (the default) and/or ``sqs`` (``counters.core.client.sqs_client()``).
    With ``DEVSTACK_FAULTS_REPORT`` (a folder), the returned callable writes what it counted."""
    spec = json.loads(os.environ.get("DEVSTACK_FAULTS") or "{}").get(function)
    if not spec:
        return lambda: None
    from counters.core import client as dynamo
    from testkit.faults import FaultInjector

    injectors: dict[str, FaultInjector] = {}
    for kind, options in spec:
        for service in options.get("services") or ["dynamodb"]:
            if service not in injectors:
                client = dynamo.client() if service == "dynamodb" else dynamo.sqs_client()
                injectors[service] = FaultInjector(client, seed=os.getpid() + len(injectors))
            injectors[service].add(
                kind, operations=set(options.get("operations") or []) or None, rate=options.get("rate", 1.0), limit=options.get("limit")
            )
    report_dir = os.environ.get("DEVSTACK_FAULTS_REPORT")

    def report() -> None:
        if report_dir:
            path = os.path.join(report_dir, f"{function}-{os.getpid()}.json")
            calls: dict[str, int] = {}
            injected: dict[str, int] = {}
            for injector in injectors.values():  # operation names of the two services never collide
                calls.update(injector.calls)
                for kind, n in injector.injected.items():
                    injected[kind] = injected.get(kind, 0) + n
            by_service = {s: {"calls": dict(i.calls), "injected": dict(i.injected)} for s, i in injectors.items()}
            by_operation: dict[str, int] = {}  # "UpdateItem:resend": how often that fault hit that operation
            for injector in injectors.values():
                for (operation, kind), n in injector.by_operation.items():
                    by_operation[f"{operation}:{kind}"] = by_operation.get(f"{operation}:{kind}", 0) + n
            with open(path + ".tmp", "w") as fh:
                json.dump({"calls": calls, "injected": injected, "by_service": by_service, "by_operation": by_operation}, fh)
            os.replace(path + ".tmp", path)

    return report


class Worker:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.conn, child = _ctx.Pipe()
        self.process = _ctx.Process(target=_worker_main, args=(fn, child, dict(os.environ)), daemon=True, name=f"lambda-{fn.name}")
        self.process.start()
        child.close()
        if not self.conn.poll(60):
            self.stop()
            raise RuntimeError(f"{fn.name}: worker did not start")
        self.conn.recv()

    def invoke(self, event: dict[str, Any]) -> tuple[str, Any]:
        self.conn.send(event)
        if not self.conn.poll(self.fn.timeout):
            self.stop()
            return "timeout", {"errorType": "Sandbox.Timedout", "errorMessage": f"Task timed out after {self.fn.timeout} seconds"}
        try:
            return self.conn.recv()
        except EOFError:
            self.stop()
            return "error", {"errorType": "Runtime.ExitError", "errorMessage": "worker exited"}

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=1)


class FunctionPool:
    """Up to ``concurrency`` warm workers for one function; callers block when all are busy."""

    def __init__(self, fn: Function, concurrency: int = 4) -> None:
        self.fn = fn
        self.concurrency = concurrency
        self._idle: list[Worker] = []
        self._count = 0
        self._cond = threading.Condition()

    def warm(self) -> None:
        worker = Worker(self.fn)
        with self._cond:
            self._count += 1
            self._idle.append(worker)
            self._cond.notify()

    def invoke(self, event: dict[str, Any]) -> tuple[str, Any]:
        worker = self._acquire()
        try:
            status, payload = worker.invoke(event)
        finally:
            self._release(worker)
        return status, payload

    def _acquire(self) -> Worker:
        with self._cond:
            while not self._idle and self._count >= self.concurrency:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return Worker(self.fn)
        except Exception:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: Worker) -> None:
        with self._cond:
            if worker.alive:
                self._idle.append(worker)
            else:
                self._count -= 1
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            workers, self._idle = self._idle, []
            self._count = 0
        for worker in workers:
            worker.stop()
