"""Final errors, classified once: each error class says whether a deferred request's replay that
raises it has its definite outcome (REJECTED) or is redelivered, and one place applies it.

The table below is the deliberate decision for every class in ``counters.core.errors``: a new
class fails ``test_every_error_class_declares_its_finality`` until it declares ``final`` itself
and has its row here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from counters.core import errors
from counters.core.commands import Command, PoisonMessage, Replayable, Verdict
from counters.core.errors import CounterError

LAYER = Path(__file__).resolve().parents[2] / "layers" / "counters" / "counters"

FINAL: dict[str, bool] = {
    # the root: what a subclass that does not say gets. Not final: an error nobody classified is
    # redelivered (a replay is idempotent) and ends in the DLQ, never REJECTED on a guess.
    "CounterError": False,
    "NotFound": True,
    "Hidden": True,
    "AlreadyExists": True,
    "Unauthorized": True,
    "Forbidden": True,
    "InvalidRequest": True,
    "InvalidCursor": True,
    "IntegrityError": True,
    "NotSwitchable": True,
    "ContentionError": False,  # safe to re-drive: SQS redelivers it
    "InsufficientCapacity": True,
    "SlotsFull": True,
    "IdempotencyKeyExpired": True,
    "IdempotencyKeyReused": True,
    "WrongRegion": True,
    "UnsupportedInMode": True,
    "AmbiguousOutcome": False,  # it may have applied: REJECTED ("nothing applied") would be false
    "ConfigurationError": False,  # a setup to fix, not a refusal: the replay waits for the fix
    "EndpointUnreachable": False,
    "TableNotFound": False,
    "CredentialsNotFound": False,  # a setup to fix: redelivered, then the DLQ
    "RegionNotSet": False,
    "EndpointInvalid": False,
    "TableLayoutMismatch": False,
    "StreamConsumerMissing": False,
    "IdempotencyKeyInFlight": False,  # the first request with the key finishes; a replay meeting it is redelivered
    "IdempotencyKeyMissing": True,
    "DeadlineReached": False,  # out of time before the next call: nothing was sent, safe to replay
}


def error_classes() -> dict[str, type[CounterError]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, CounterError) and value.__module__ == errors.__name__
    }


def instance(cls: type[CounterError]) -> CounterError:
    if cls is errors.Hidden:
        return errors.Hidden(errors.NotFound("post 'p' not found"), "another user's post")
    if cls is errors.WrongRegion:
        return errors.WrongRegion("create it in its home Region", region="eu-west-1")
    return cls(f"a {cls.__name__}")


def test_every_error_class_declares_its_finality() -> None:
    classes = error_classes()
    assert set(classes) == set(FINAL), "a new error class needs its row in FINAL (and its own `final`)"
    for name, cls in classes.items():
        assert "final" in vars(cls), f"{name} inherits `final`: declare it on the class, deliberately"
        assert vars(cls)["final"] is FINAL[name], name


@dataclass(frozen=True)
class Payload:
    n: int


def replayable(exc: BaseException) -> Replayable:
    def execute(payload: Payload, command: Command) -> Verdict:
        raise exc

    return Replayable(Payload, execute)


@pytest.mark.parametrize("name", sorted(FINAL))
def test_a_replay_that_raises_a_final_error_is_rejected_with_its_code_and_any_other_propagates(name: str) -> None:
    exc = instance(error_classes()[name])
    command = Command("op", {"n": 1})
    if FINAL[name]:
        assert replayable(exc).run(command) == Verdict("REJECTED", {"error": exc.code, "message": exc.message})
    else:
        with pytest.raises(type(exc)) as raised:
            replayable(exc).run(command)
        assert raised.value is exc


def test_an_unclassified_error_is_redelivered_not_rejected() -> None:
    class Unclassified(CounterError):
        code = "unclassified"

    for exc in (Unclassified(), RuntimeError("a bug")):
        with pytest.raises(type(exc)):
            replayable(exc).run(Command("op", {"n": 1}))


def test_a_bad_payload_is_still_poison() -> None:
    with pytest.raises(PoisonMessage):
        replayable(errors.NotFound()).run(Command("op", {"m": 1}))


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return {n for element in node.elts for n in _names(element)}
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def test_no_executor_keeps_its_own_list_of_final_errors() -> None:
    """An executor (a function answering a ``Verdict``) never catches the layer's errors: which
    ones end a replay is each class's ``final``, applied in ``Replayable.run`` alone."""
    found: list[str] = []
    for path in sorted(LAYER.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef) or not _returns_verdict(function):
                continue
            if path.relative_to(LAYER).as_posix() == "core/commands.py" and function.name == "run":
                continue  # Replayable.run: the one place
            for node in ast.walk(function):
                if isinstance(node, ast.ExceptHandler) and _names(node.type) & set(FINAL):
                    found.append(f"{path.relative_to(LAYER)}:{node.lineno} {function.name}")
    assert found == [], f"hand-written lists of final errors: {found}"


def _returns_verdict(function: Any) -> bool:
    returns = function.returns
    return isinstance(returns, (ast.Name, ast.Constant)) and getattr(returns, "id", getattr(returns, "value", None)) == "Verdict"
