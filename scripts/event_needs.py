"""What a sample event needs in the table (events/needs.toml), seeded before it is invoked.

`make local-invoke FUNCTION=LikesFunction EVENT=likes/like.json` on a fresh devstack answered 404
until `likes/create_post.json` had run. Now scripts/sam_local.py calls :func:`ensure` first: for
each seed the event needs (its own needs first), the seed's probe event is run through its
function's handler, in this process, against the devstack's DynamoDB Local (events/env.local.json:
:class:`HandlerRunner`); if it does not answer 200 (with the fields of ``where``), the seed's
create event is run the same way (or, for ``pending``, the API's PENDING operation record is
written through the layer), and the probe must then answer 200, or :class:`SeedError` says which
event answered what. What exists already is left as it is.

tests/integration/test_event_needs.py runs every event this way, in shuffled orders, on fresh
tables; tests/tooling/test_sam_local.py holds events/needs.toml to the events and to
scripts/invoke_events.py's functions.
"""

from __future__ import annotations

import json
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "layers" / "counters")) if p not in sys.path]

from scripts.gen_events import STAMPED, stamped  # noqa: E402

EVENTS = ROOT / "events"
NEEDS = EVENTS / "needs.toml"
Answer = tuple[int | None, Any]
"""An invocation's answer: the HTTP status and parsed JSON body of an API answer, or ``None``
and the whole answer of any other (an SQS batch's ``batchItemFailures``...)."""


class SeedError(RuntimeError):
    """A seed could not be made: which event answered what."""


class Runner(Protocol):
    def invoke(self, function: str, event: dict[str, Any], params: dict[str, str]) -> Answer: ...

    def record_pending(self, event: dict[str, Any]) -> None: ...


def load(path: Path = NEEDS) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def event_of(name: str, now_ms: int | None = None) -> dict[str, Any]:
    """The committed event ``name``; one whose times expire (gen_events.STAMPED) stamped at ``now_ms``."""
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    if name in STAMPED:
        event = stamped(name, event, time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    return event


def answer_of(response: Any) -> Answer:
    if isinstance(response, dict) and "statusCode" in response:
        body = response.get("body")
        return response["statusCode"], json.loads(body) if body else None
    return None, response


def seeds_for(name: str, needs: dict[str, Any]) -> list[str]:
    """The seeds ``name`` needs, each after the seeds its create event needs, each once."""
    order: list[str] = []

    def visit(event: str, path: tuple[str, ...]) -> None:
        for seed in needs["events"][event].get("needs", []):
            if seed in path:
                raise SeedError(f"events/needs.toml: the seed {seed} needs itself ({' -> '.join((*path, seed))})")
            create = needs["seeds"][seed].get("create")
            if create is not None:
                visit(create, (*path, seed))
            if seed not in order:
                order.append(seed)

    visit(name, ())
    return order


def ensure(name: str, runner: Runner, needs: dict[str, Any] | None = None, report: Callable[[str], None] = lambda _: None) -> list[str]:
    """Seed what the event ``name`` needs (see the module doc); returns the seeds it made."""
    needs = load() if needs is None else needs
    if name not in needs["events"]:
        return []  # an event of the user's own: nothing declared

    def run(event: str) -> Answer:
        spec = needs["events"][event]
        return runner.invoke(spec["function"], event_of(event), spec.get("params", {}))

    def present(seed: str) -> tuple[bool, Answer]:
        spec = needs["seeds"][seed]
        status, body = answer = run(spec["probe"])
        where = spec.get("where", {})
        return status == 200 and isinstance(body, dict) and all(body.get(k) == v for k, v in where.items()), answer

    made: list[str] = []
    for seed in seeds_for(name, needs):
        if present(seed)[0]:
            continue
        spec = needs["seeds"][seed]
        if "pending" in spec:
            runner.record_pending(event_of(spec["pending"]))
            created: Answer = (None, "recorded PENDING")
        else:
            created = run(spec["create"])
        there, probed = present(seed)
        if not there:
            what = spec.get("create") or f"the PENDING record of {spec['pending']}"
            raise SeedError(f"seeding {seed} for {name}: {what} answered {created}, then {spec['probe']} answered {probed}")
        report(f"seeded {seed} ({spec.get('create') or 'PENDING record of ' + spec['pending']})")
        made.append(seed)
    return made


class HandlerRunner:
    """Each function's handler run in this process with the template's environment for
    ``table`` and ``overrides`` (the endpoints, queue URLs), as the local stack runs it."""

    def __init__(
        self,
        table: str,
        overrides: dict[str, str] | None = None,
        per_function: dict[str, dict[str, str]] | None = None,
        refs: dict[str, str] | None = None,
    ) -> None:
        self.table, self.overrides, self.per_function, self.refs = table, overrides or {}, per_function or {}, refs

    @classmethod
    def from_env_vars(cls, path: Path) -> HandlerRunner:
        """The runner for what ``sam local invoke --env-vars path`` points the functions at."""
        env = json.loads(path.read_text())
        shared = env.get("Parameters", {})
        return cls(shared["TABLE_NAME"], shared, {k: v for k, v in env.items() if k != "Parameters"})

    def invoke(self, function: str, event: dict[str, Any], params: dict[str, str]) -> Answer:
        from devstack.runtime import LambdaContext
        from testkit.functions import environment, handler_module, template_function

        fn = template_function(function, self.table, refs=self.refs, params=params)
        with environment(fn, {**self.overrides, **self.per_function.get(function, {})}) as env:
            module = handler_module(fn)
            module.function.configure(module.function.settings_type.from_env(env))
            try:
                return answer_of(module.lambda_handler(event, LambdaContext.for_function(fn.name, fn.memory, 60)))
            finally:
                module.function.configure(None)  # the next invocation reads its own environment

    def record_pending(self, event: dict[str, Any]) -> None:
        """The PENDING operation record the API writes before it queues each of ``event``'s
        commands (left as it is when the operation is recorded already)."""
        from counters.core.commands import Command
        from counters.deferral.operations import Operations
        from testkit.functions import environment, template_function

        with environment(template_function("RetryWorkerFunction", self.table, refs=self.refs), self.overrides):
            operations = Operations(self.table)
            for record in event["Records"]:
                command = Command.from_message(record["body"])
                if operations.records.get(command.operation_id) is None:
                    operations.record_pending(command)
