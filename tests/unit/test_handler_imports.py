"""Handler modules at import: nothing read from the environment, and the consumers stay light.

Each handler is imported in a fresh interpreter with an empty environment (no TABLE_NAME, no
region): settings are parsed on the first invocation, never at import. The stream and SQS
consumers must not import pydantic or the REST resolver (their cold start; the import rule in
pyproject.toml keeps the layer's side of it, this checks the handlers' own imports too). The
API functions do not import pydantic either: they validate with counters.http.validation. Nor do
they import what only a few routes use: the retry queue, the likes audit, or the ~40 event modules
of Powertools' data classes package (issue 26).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devstack.template import ROOT, read_stack

MODES = [  # every function of every mode (a conditional one exists in its mode only)
    {},
    {"GlobalTableMode": "mrec", "ReplicaRegions": "us-east-1,eu-west-1", "HomeRegion": "us-east-1"},
    {"GlobalTableMode": "mrsc", "ReplicaRegions": "us-east-1,us-east-2,us-west-2", "HomeRegion": "us-east-1"},
]
FUNCTIONS = {name: fn for params in MODES for name, fn in read_stack("unused", params=params).functions.items()}
CONSUMERS = {name for name, fn in FUNCTIONS.items() if not any(r.function == name for r in read_stack("unused").routes)}
EVERY_EVENT = "aws_lambda_powertools.utilities.data_classes.code_pipeline_job_event"
"""An event no function uses: imported only by the event data classes' ``__init__``."""
PROBE = (
    "import json, sys; import {module}; "
    "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core') or m == 'asyncio' "
    "or m in ('counters.deferral.queue', 'counters.services.likes.audit') or m.startswith('aws_lambda_powertools.event_handler') "
    "or m in ('aws_lambda_powertools.utilities.data_classes.s3_event', EVERY_EVENT))))".replace("EVERY_EVENT", repr(EVERY_EVENT))
)


def test_the_consumers_are_the_stream_queue_and_schedule_only_functions() -> None:
    assert CONSUMERS == {"EscrowFunction", "ExpirySweeperFunction", "LikeAggregatorFunction", "OrderPointerFunction", "RetryWorkerFunction"}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_handler_imports_with_an_empty_environment(name: str) -> None:
    fn = FUNCTIONS[name]
    module = fn.handler.rsplit(".", 1)[0]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(map(str, [fn.code_dir, *fn.layers]))}
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    heavy = json.loads(out.stdout.strip().splitlines()[-1])
    # counters.runtime.light: no function runs the event data classes' __init__ (every event)
    assert EVERY_EVENT not in heavy, f"{name} imports every Powertools event (take the batch utility from counters.runtime.batch)"
    if name in CONSUMERS:
        no_rest = [
            m
            for m in heavy
            if m
            not in (
                "asyncio",
                "counters.deferral.queue",
                "counters.services.likes.audit",
                "aws_lambda_powertools.utilities.data_classes.s3_event",  # sqs_event imports it
            )
        ]  # Powertools' batch base imports asyncio
        assert no_rest == [], f"{name} imports {no_rest[:5]}"
    else:
        assert [m for m in heavy if m.startswith("pydantic")] == []  # counters.http.validation, no pydantic
        assert "counters.deferral.queue" not in heavy  # the retry queue: loaded by the first contended request
        assert "counters.services.likes.audit" not in heavy  # the likes audit: loaded by the first audit
        assert "aws_lambda_powertools.event_handler.middlewares.openapi_validation" not in heavy  # Powertools' own: off
        # counters.http.powertools: the REST resolver without the package __init__'s AppSync (asyncio)
        assert "aws_lambda_powertools.event_handler.api_gateway" in heavy
        unused = [m for m in heavy if m == "asyncio" or m.startswith("aws_lambda_powertools.event_handler.appsync")]
        assert unused == [], f"{name} imports {unused}"
        # nor the event data classes' __init__ (every event Powertools knows): the proxy events only
        assert "aws_lambda_powertools.utilities.data_classes.s3_event" not in heavy


LIGHT_PROBE = """
import json, sys
import counters.http.powertools as light
package = sys.modules[light.EVENT_HANDLER]
before = {name: getattr(package, name) for name in light.KNOWN}
light_ok = "asyncio" not in sys.modules
from aws_lambda_powertools.event_handler import AppSyncResolver  # a name the light package does not know: the real __init__ runs
import aws_lambda_powertools.event_handler.appsync as appsync
print(json.dumps({
    "light_ok": light_ok,
    "same": sorted(name for name, value in before.items() if getattr(package, name) is value),
    "appsync": AppSyncResolver is appsync.AppSyncResolver,
    "all": sorted(name for name in package.__all__ if not hasattr(package, name)),
}))
"""


def test_the_light_event_handler_package_gives_what_its_init_gives() -> None:
    """counters.http.powertools registers aws_lambda_powertools.event_handler without running its
    __init__: the names it takes from submodules (KNOWN) are the objects the real __init__ binds,
    and any other name runs the real __init__ (nothing that imported before fails now)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "counters")}
    out = subprocess.run([sys.executable, "-c", LIGHT_PROBE], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    from counters.http.powertools import KNOWN

    assert got == {"light_ok": True, "same": sorted(KNOWN), "appsync": True, "all": []}


DATA_CLASSES_PROBE = """
import json, sys
{light}
import aws_lambda_powertools.utilities.data_classes as package
names = {names!r} if {light!r} else package.__all__
print(json.dumps({{
    "names": {{name: f"{{getattr(package, name).__module__}}.{{getattr(package, name).__qualname__}}" for name in names}},
    "every_event": "aws_lambda_powertools.utilities.data_classes.kafka_event" in sys.modules,
}}))
"""


def test_the_light_event_data_classes_give_what_their_init_gives() -> None:
    """counters.http.powertools registers aws_lambda_powertools.utilities.data_classes without its
    __init__ (which imports every event): DATA_CLASSES_KNOWN covers every name of the real __init__,
    and each is the same object, taken from its submodule, without the other events."""
    from counters.http.powertools import DATA_CLASSES_KNOWN

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "counters")}
    got = {}
    for side, light in (("real", ""), ("light", "import counters.http.powertools")):
        probe = DATA_CLASSES_PROBE.format(light=light, names=sorted(DATA_CLASSES_KNOWN))
        out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        got[side] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["real"]["every_event"]
    assert got["light"]["names"] == got["real"]["names"]  # every name of __all__, the same objects
    light_only = "import counters.http.powertools, sys; print('aws_lambda_powertools.utilities.data_classes.kafka_event' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", light_only], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_a_consumer_imports_after_an_api_handler_in_one_process() -> None:
    """Powertools' batch utility after the light data classes (tests import both kinds of handler in
    one process): ``sqs_event`` asks the package for ``S3Event`` while it is being imported."""
    probe = (
        "import counters.http.powertools; import aws_lambda_powertools.utilities.batch; "
        "from aws_lambda_powertools.utilities.data_classes import SQSEvent, event_source; print(callable(event_source))"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "counters")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


def test_the_likes_audit_loads_on_first_use() -> None:
    """counters.services.likes exports ``Likes`` alone and builds ``Likes.audits`` without
    importing counters.services.likes.audit until it is asked for (then once)."""
    probe = """
import json, sys
import counters.services.likes as likes
service = likes.Likes("T")
loaded = "counters.services.likes.audit" in sys.modules
import counters.services.likes.audit as audit
print(json.dumps({"loaded": loaded, "all": likes.__all__, "audits": isinstance(service.audits, audit.Audits) and service.audits is service.audits}))
"""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "counters")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": False, "all": ["Likes"], "audits": True}
