"""counters.runtime.function: an invocation that records no metric prints nothing and warns
nothing (Powertools' ``log_metrics`` warned "No application metrics to publish" on every such
invocation: every read, and every `sam local invoke` of one); one that records metrics still
prints them as one EMF blob, also when the handler raises.

pyproject.toml no longer filters that warning; these tests record every warning themselves
(``simplefilter("always")``), so a filter anywhere else could not hide it either.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from counters.core.settings import Settings
from counters.runtime.function import Function
from devstack.runtime import LambdaContext

EMPTY = "No application metrics to publish"


def function_with(body: Any) -> Any:
    function: Function[Settings, object] = Function(Settings, lambda _settings: object())
    function.metrics.namespace = "TallyTest"  # the template sets POWERTOOLS_METRICS_NAMESPACE
    function.configure(Settings(table_name="t"))

    @function.handler()
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        return body(function, event)

    return function, lambda_handler


def call(handler: Any, event: dict[str, Any]) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            answer = handler(event, LambdaContext.for_function("metrics-test", 512, 10))
        except RuntimeError as exc:
            answer = exc
    return answer, [str(w.message) for w in seen]


def emf_blobs(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_an_invocation_recording_no_metric_warns_nothing_and_prints_no_blob(capsys: pytest.CaptureFixture[str]) -> None:
    _, handler = function_with(lambda _f, event: {"ok": event["n"]})
    for n in range(3):  # every invocation, not only the first
        answer, seen = call(handler, {"n": n})
        assert answer == {"ok": n}
        assert not [m for m in seen if EMPTY in m], seen
    assert emf_blobs(capsys.readouterr().out) == []


def test_recorded_metrics_are_still_flushed_once_per_invocation(capsys: pytest.CaptureFixture[str]) -> None:
    from aws_lambda_powertools.metrics import MetricUnit

    def count(function: Any, event: dict[str, Any]) -> Any:
        function.metrics.add_metric(name="Seen", unit=MetricUnit.Count, value=event["n"])
        if event.get("fail"):
            raise RuntimeError("after recording")
        return "done"

    _, handler = function_with(count)
    assert call(handler, {"n": 2}) == ("done", [])
    answer, seen = call(handler, {"n": 3, "fail": True})  # raised: its metric is flushed all the same
    assert isinstance(answer, RuntimeError) and seen == []
    assert call(handler, {"n": 5}) == ("done", [])
    blobs = emf_blobs(capsys.readouterr().out)
    assert [b["Seen"] for b in blobs] == [[2.0], [3.0], [5.0]]  # one blob each, none carried over


def test_a_real_handlers_read_warns_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """OperationsFunction answering a GET for an operation it has never seen: a 404 recording no
    metric (no DynamoDB needed beyond moto)."""
    from testkit.functions import handler_module, template_function
    from tests.conftest import load_event, moto_table

    with moto_table(monkeypatch, "metrics-test-table"):
        fn = template_function("OperationsFunction", "metrics-test-table")
        for key, value in fn.environment.items():
            monkeypatch.setenv(key, value)
        module = handler_module(fn)
        module.function.configure(module.function.settings_type.from_env(fn.environment))
        event = load_event("operations/get_operation.json")
        answer, seen = call(module.lambda_handler, event)
    assert answer["statusCode"] == 404
    assert not [m for m in seen if EMPTY in m], seen
