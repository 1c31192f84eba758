"""Handler modules at import: nothing read from the environment, and the consumers stay light.

Each handler is imported in a fresh interpreter with an empty environment (no TABLE_NAME, no
region): settings are parsed on the first invocation, never at import. The stream and SQS
consumers must not import pydantic or the REST resolver (their cold start; the import rule in
pyproject.toml keeps the layer's side of it, this checks the handlers' own imports too).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devstack.template import ROOT, read_stack

FUNCTIONS = read_stack("unused").functions
CONSUMERS = {name for name, fn in FUNCTIONS.items() if not any(r.function == name for r in read_stack("unused").routes)}
PROBE = (
    "import json, sys; import {module}; "
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' or m.startswith('aws_lambda_powertools.event_handler'))))"
)


def test_the_consumers_are_the_stream_queue_and_schedule_only_functions() -> None:
    assert CONSUMERS == {"ExpirySweeperFunction", "LikeAggregatorFunction", "OrderPointerFunction", "RetryWorkerFunction"}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_handler_imports_with_an_empty_environment(name: str) -> None:
    fn = FUNCTIONS[name]
    module = fn.handler.rsplit(".", 1)[0]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(map(str, [fn.code_dir, *fn.layers]))}
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    heavy = json.loads(out.stdout.strip().splitlines()[-1])
    if name in CONSUMERS:
        assert heavy == [], f"{name} imports {heavy[:5]}"
    else:
        assert "pydantic" in heavy  # the API functions validate with it: the probe sees imports
