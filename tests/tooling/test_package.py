"""layers/counters as a package: its version, its public names, a cheap `import counters`, and the
layer's pins inside the [lambda] extra's ranges (tests/e2e/test_wheel.py installs it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

import counters

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "counters"
PYPROJECT = tomllib.loads((PACKAGE / "pyproject.toml").read_text())


def test_the_version_has_one_source_read_by_the_build_backend() -> None:
    assert "version" in PYPROJECT["project"]["dynamic"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "counters/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", counters.__version__)


def test_every_public_name_resolves_to_what_its_module_defines() -> None:
    import importlib

    for name, module_name in counters._PUBLIC.items():
        module = importlib.import_module(module_name)
        expected = module if module_name.endswith(f".{name}") else getattr(module, name)
        assert getattr(counters, name) is expected, name
    assert set(counters.__all__) == {"__version__", *counters._PUBLIC}


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        counters.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("counters.NoSuchThing resolved")


def test_import_counters_imports_no_submodule_and_no_botocore() -> None:
    """The package root is lazy: `import counters` pays for nothing; the first use of a public
    name imports its module."""
    probe = (
        "import json, sys; before = set(sys.modules); import counters; "
        "new = sorted(set(sys.modules) - before); likes = counters.Likes; "
        "print(json.dumps({'new': new, 'likes': likes.__module__, 'after': 'counters.services.likes' in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=PACKAGE, capture_output=True, text=True, check=True).stdout
    answer = json.loads(out)
    new = answer["new"]
    assert "counters" in new and not [m for m in new if m.startswith("counters.")], new  # no submodule
    third_party = [m for m in new if m != "counters" and m.partition(".")[0] not in sys.stdlib_module_names]
    assert third_party == [] and "typing" not in new, new  # not botocore; not even typing
    assert answer["likes"] == "counters.services.likes" and answer["after"]


def test_core_depends_on_botocore_only_and_the_lambda_glue_is_an_extra() -> None:
    assert [Requirement(r).name for r in PYPROJECT["project"]["dependencies"]] == ["botocore"]
    extra = {Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["lambda"]}
    assert extra == {"aws-lambda-powertools", "pydantic"}


def test_the_layer_pins_fall_inside_the_extra_and_the_tests_pin_of_botocore_inside_the_core_range() -> None:
    """requirements.txt (the layer, the dev install) pins exactly what pyproject.toml allows."""
    ranges = {Requirement(r).name: Requirement(r).specifier for r in PYPROJECT["project"]["optional-dependencies"]["lambda"]}
    pins = [Requirement(line) for line in (PACKAGE / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert {p.name for p in pins} == set(ranges)
    for pin in pins:
        (version,) = [s.version for s in pin.specifier if s.operator == "=="]
        assert ranges[pin.name].contains(version), f"{pin} is outside the [lambda] extra's {ranges[pin.name]}"
    core = Requirement(PYPROJECT["project"]["dependencies"][0]).specifier
    dev = Path(__file__).resolve().parents[2] / "requirements-dev.txt"
    (botocore_pin,) = [Requirement(line) for line in dev.read_text().splitlines() if line.startswith("botocore==")]
    assert core.contains(next(iter(botocore_pin.specifier)).version)


def test_the_package_is_typed() -> None:
    assert (PACKAGE / "counters" / "py.typed").is_file()


def test_the_otel_extra_is_the_api_only_and_the_tests_pin_falls_inside_it() -> None:
    """Tracing (counters.core.tracing) needs the OpenTelemetry API alone, and only when asked for:
    the SDK and its exporter are the application's (or the ADOT Lambda layer's)."""
    (api,) = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["otel"]]
    assert api.name == "opentelemetry-api"
    dev = Path(__file__).resolve().parents[2] / "requirements-dev.txt"
    (pin,) = [Requirement(line) for line in dev.read_text().splitlines() if line.startswith("opentelemetry-api==")]
    assert api.specifier.contains(next(iter(pin.specifier)).version)
    layer = (PACKAGE / "requirements.txt").read_text()
    assert "opentelemetry" not in layer  # the SAM layer leaves the API to the ADOT layer (one copy, its version)


# The ADOT Python Lambda layers and the first OpenTelemetry API release each cannot load. An
# application that bundles a newer API ahead of /opt leaves ADOT uninitialised: the invocation
# goes on, spans are non-recording and nothing reaches X-Ray, with no error. Source:
# aws-observability/aws-otel-python-instrumentation issue 823 (2026-07-17), "ADOT Lambda layer fails
# to initialize when application bundles OpenTelemetry 1.44.0": layers :32 (ADOT 0.17.1) and :33
# (ADOT 0.18.0, OpenTelemetry 1.42.1) import opentelemetry._events, which 1.44.0 removed; 1.43.0
# initialises. A new ADOT layer that loads 1.44+ is a new row here, and only then may the bound move.
ADOT_CANNOT_LOAD = {
    "AWSOpenTelemetryDistroPython:32 (ADOT Python 0.17.1)": "1.44.0",
    "AWSOpenTelemetryDistroPython:33 (ADOT Python 0.18.0, OpenTelemetry 1.42.1)": "1.44.0",
}


def test_the_otel_extra_admits_no_release_an_adot_layer_cannot_load() -> None:
    """Every `<`/`<=`/`==`/`~=` bound of the extra lies at or below the first release some ADOT layer
    cannot load (an open-ended range fails), and that release and its successors are outside it."""
    from packaging.version import Version

    (api,) = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["otel"]]
    first_broken = min(Version(v) for v in ADOT_CANNOT_LOAD.values())
    for spec in api.specifier:
        if spec.operator in ("<", "<=", "==", "~="):
            break
    else:
        raise AssertionError(f"{api}: no upper bound, so it admits {first_broken} (ADOT: {ADOT_CANNOT_LOAD})")
    for release in (first_broken, Version(f"{first_broken.major}.{first_broken.minor}.9"), Version("1.45.2"), Version("1.99.0")):
        assert not api.specifier.contains(release), f"{api} admits {release}, which {ADOT_CANNOT_LOAD} cannot load"
    assert api.specifier.contains("1.42.1")  # what ADOT 0.18.0 bundles: the range is not empty
