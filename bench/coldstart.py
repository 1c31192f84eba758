"""Cold start: how long each handler's import takes against ``import boto3``, and where it goes.

* :func:`cold_imports`: median wall time of ``import <handler module>`` in a fresh interpreter (the
  layer and the function folder on ``sys.path``, the template's environment) vs ``import boto3``
  measured the same way, the probes interleaved run by run.
* :func:`decompose`: ``python -X importtime`` grouped by who pays for what. Each module's *self*
  time is charged to the first group whose prefix it matches, so the groups add up to the whole
  import (median over fresh interpreters).

``make bench`` writes both (:func:`section`); ``python -m bench.coldstart [--runs N]`` prints them alone.
``--python PATH`` (repeatable; both commands) runs the probes on another interpreter, e.g. the
functions' runtime (template.yaml: ``python3.13``) when the venv is older: a venv of that version
with the layer's requirements and boto3 (the runtime's) installed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench import ROOT
from devstack.template import read_stack

# (group, module prefixes). The first match wins; order from specific to general.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the layer (counters.*)", ("counters",)),
    ("the handler module", ("app",)),
    ("botocore (the clients; boto3 itself is not imported)", ("botocore", "urllib3", "jmespath", "dateutil", "six")),
    (
        "pydantic (Powertools' OpenAPI validation)",
        ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions"),
    ),
    ("Powertools OpenAPI validation", ("aws_lambda_powertools.event_handler.openapi", "aws_lambda_powertools.event_handler.middlewares")),
    ("asyncio (Powertools' AppSync resolver and batch base)", ("asyncio", "concurrent", "ssl", "selectors")),
    (
        "Powertools event handler (resolvers, event data classes)",
        ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes"),
    ),
    ("Powertools batch", ("aws_lambda_powertools.utilities.batch",)),
    ("Powertools Logger, Metrics, shared", ("aws_lambda_powertools",)),
    ("the standard library and the rest", ("",)),
)

_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def group_of(module: str) -> str:
    for name, prefixes in GROUPS:
        if any(module == p or module.startswith(p + ".") or p == "" for p in prefixes):
            return name
    return GROUPS[-1][0]


def parse(stderr: str) -> dict[str, float]:
    """Self time (ms) per group from one ``-X importtime`` trace."""
    totals: dict[str, float] = {}
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            group = group_of(m[4])
            totals[group] = totals.get(group, 0.0) + int(m[1]) / 1000
    return totals


def _trace(code: str, env: dict[str, str], python: str = sys.executable) -> dict[str, float]:
    """Self time per group of what ``code`` imports, the interpreter's own start-up excluded
    (``-X importtime`` also traces it: the modules already loaded before ``code`` runs)."""
    probe = f"import sys; before = set(sys.modules); {code}"
    out = subprocess.run([python, "-X", "importtime", "-c", probe], env=env, capture_output=True, text=True, check=True)
    startup = subprocess.run([python, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True, check=True)
    seen = {m[4] for line in startup.stderr.splitlines() if (m := _LINE.match(line))}
    lines = [line for line in out.stderr.splitlines() if (m := _LINE.match(line)) and m[4] not in seen]
    return parse("\n".join(lines))


def probe_environ() -> dict[str, str]:
    """This process's environment for a probe: without ``PYTHONPATH`` (each probe sets its own) and
    without ``PYTHONDONTWRITEBYTECODE`` / ``PYTHONPYCACHEPREFIX``. A probe measures an import whose
    bytecode is cached, as the layer ships it (layers/counters/Makefile compiles it for the runtime):
    with ``PYTHONDONTWRITEBYTECODE`` set (some shells and CI images set it) the warm-up would write
    no cache and every probe would time compiling the layer and the handler from source, which
    ``import boto3`` (compiled when it was installed) never pays."""
    skip = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    return {k: v for k, v in os.environ.items() if not k.startswith(skip)}


def _env(extra: dict[str, str], paths: Iterable[Path] = ()) -> dict[str, str]:
    base = probe_environ()
    return {**base, **extra, **({"PYTHONPATH": os.pathsep.join(map(str, paths))} if paths else {})}


def decompose(
    code_dir: Path, layers: Iterable[Path], env: dict[str, str], runs: int = 7, module: str = "app", python: str = sys.executable
) -> dict[str, float]:
    """Median self time per group of ``import <module>`` in fresh interpreters."""
    env = _env(env, [code_dir, *layers])
    samples = [_trace(f"import {module}", env, python) for _ in range(runs)]
    groups = {g for s in samples for g in s}
    return {g: statistics.median(s.get(g, 0.0) for s in samples) for g in groups}


def table(rows: dict[str, dict[str, float]], baseline_ms: float) -> str:
    """Markdown: one column per handler, one row per group (ms), totals and the ratio to boto3."""
    names = list(rows)
    order = [g for g, _ in GROUPS if any(g in rows[n] for n in names)]
    out = ["| group | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for g in order:
        out.append(f"| {g} | " + " | ".join(f"{rows[n].get(g, 0.0):.1f}" for n in names) + " |")
    totals = {n: sum(rows[n].values()) for n in names}
    out.append("| **total (ms)** | " + " | ".join(f"**{totals[n]:.1f}**" for n in names) + " |")
    out.append(
        f"| ratio to `import boto3` ({baseline_ms:.1f} ms, same method) | "
        + " | ".join(f"{totals[n] / baseline_ms:.2f}x" for n in names)
        + " |"
    )
    return "\n".join(out)


def boto3_ms(runs: int = 7, python: str = sys.executable) -> float:
    """``import boto3`` by the same method (its start-up excluded the same way)."""
    return statistics.median(sum(_trace("import boto3", _env({}), python).values()) for _ in range(runs))


def import_once(code: str, env: dict[str, str], setup: str = "", python: str = sys.executable) -> float:
    """Wall time (ms) of ``code`` in a fresh interpreter, ``setup`` run before the clock starts."""
    probe = f"import time,sys\n{setup}\nt=time.perf_counter(); {code}; print((time.perf_counter()-t)*1000)"
    out = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cold_imports(runs: int, python: str = sys.executable) -> list[tuple[str, float, float]]:
    """Each run imports ``boto3`` and then every handler, each in a fresh interpreter, so the
    baseline and the handlers meet the same moments of the machine's load; medians over runs."""
    stack = read_stack("bench-table")
    base_env = probe_environ()
    probes: list[tuple[str, str, dict[str, str]]] = [("import boto3 (baseline)", "import boto3", base_env)]
    for name, fn in sorted(stack.functions.items()):
        module = fn.handler.rsplit(".", 1)[0]
        env = {**base_env, **fn.environment, "PYTHONPATH": os.pathsep.join([str(fn.code_dir), *map(str, fn.layers)])}
        probes.append((f"{name} ({fn.code_dir.relative_to(ROOT)}/{module}.py)", f"import {module}", env))
        if name == "LikesFunction":
            # Tracing=Active as shipped adds no import (Lambda writes the segments); with
            # Powertools Tracer the function would also import aws-xray-sdk and patch botocore.
            traced = f"import {module}; from aws_lambda_powertools import Tracer; Tracer(service='bench', auto_patch=True)"
            traced_env = {**env, "AWS_LAMBDA_FUNCTION_NAME": "bench", "POWERTOOLS_TRACE_DISABLED": "false"}
            try:
                import_once(traced, traced_env, python=python)
            except subprocess.CalledProcessError:
                continue  # aws-xray-sdk not installed
            probes.append((f"{name} + Powertools Tracer (Tracing on in code; not shipped)", traced, traced_env))
    probes += references(stack.functions["LikesFunction"], base_env)
    setups = {label: "" for label, _, _ in probes}
    for name in OWN_IMPORT:
        label, code, env, setups[label] = own_import(name, stack.functions[name], base_env, python)
        probes.append((label, code, env))
    for label, code, env in probes:  # warm the bytecode caches: the first import of a module compiles it
        import_once(code, env, setups[label], python)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in probes}
    for _ in range(runs):
        for label, code, env in probes:
            samples[label].append(import_once(code, env, setups[label], python))
    boto3_ms = statistics.median(samples[probes[0][0]])
    return [(label, statistics.median(samples[label]), statistics.median(samples[label]) / boto3_ms) for label, _, _ in probes]


_BELOW_HTTP = "import counters.runtime.function, counters.runtime.metrics, counters.deferral.queue, counters.services.likes"
REFERENCES = (
    ("the layer below its HTTP glue + Powertools Logger/Metrics (no resolver)", _BELOW_HTTP),
    (
        "the above + Powertools' REST resolver without validation (an API handler's floor without pydantic)",
        f"{_BELOW_HTTP}; import aws_lambda_powertools.event_handler.api_gateway",
    ),
    ("the above + `import pydantic` (no model built)", f"{_BELOW_HTTP}; import aws_lambda_powertools.event_handler.api_gateway, pydantic"),
)
"""Reference rows (not handlers): what an API handler's import is made of, cumulatively, with the
likes function's code and environment. The second row is an API handler's floor: the handlers
validate without pydantic (counters.http.validation), so the third row is what they no longer pay
(docs/bench.md, "Cold start")."""


OWN_IMPORT = ("LikesFunction",)
"""The handlers whose layer's own import has a row: ``counters.*`` and the handler module alone."""

_DEPENDENCIES = (
    "import importlib, sys; before = set(sys.modules); import {module}; "
    "print('\\n'.join(m for m in sys.modules if m not in before and m != '{module}' and m.split('.')[0] != 'counters'))"
)


def own_import(name: str, fn: Any, base_env: dict[str, str], python: str = sys.executable) -> tuple[str, str, dict[str, str], str]:
    """A probe of the layer's own import for ``fn``: everything the handler imports from outside
    the layer (botocore, Powertools, the standard library...) imported before the clock starts,
    then the handler module, so the time is the ``counters.*`` modules' and the handler's own
    (issue 26: under 20 % of ``import boto3``). (label, code, env, setup)."""
    module = fn.handler.rsplit(".", 1)[0]
    env = {**base_env, **fn.environment, "PYTHONPATH": os.pathsep.join([str(fn.code_dir), *map(str, fn.layers)])}
    out = subprocess.run([python, "-c", _DEPENDENCIES.format(module=module)], env=env, capture_output=True, text=True, check=True)
    outside = out.stdout.split()
    setup = f"import importlib\nfor m in {outside!r}:\n    try: importlib.import_module(m)\n    except Exception: pass"
    label = f"reference: {name}'s own import, the layer's and its app.py's modules (what they import from outside loaded first)"
    return label, f"import {module}", env, setup


def references(fn: Any, base_env: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    env = {**base_env, **fn.environment, "PYTHONPATH": os.pathsep.join([str(fn.code_dir), *map(str, fn.layers)])}
    return [(f"reference: {label}", code, env) for label, code in REFERENCES]


def version(python: str) -> str:
    """The interpreter's version (``3.13.0``)."""
    out = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def section(runs: int, python: str = sys.executable) -> list[str]:
    """The cold-start section of docs/bench-results.md, as Markdown lines (the probes on ``python``)."""
    on = f"Python {version(python)}" + ("" if python == sys.executable else f", `{python}`")
    lines = [
        f"## Cold start: handler module import (median of fresh interpreters; {on})",
        "",
        "| module | import ms | vs `import boto3` |",
        "|---|---:|---:|",
    ]
    for name, ms, ratio in cold_imports(runs, python):
        lines.append(f"| {name} | {ms:.0f} | {ratio:.2f}x |")
    return [
        *lines,
        "",
        f"### Where each handler's import goes (`python -X importtime`, self time per group in ms, median; start-up excluded; {on})",
        "",
        "The importtime totals run above the wall-clock times (tracing costs); the groups show who pays. "
        '"the standard library and the rest" is almost all what botocore imports (boto3 imports the same).',
        "",
        table(
            {
                name: decompose(fn.code_dir, fn.layers, fn.environment, runs, python=python)
                for name, fn in sorted(read_stack("bench-table").functions.items())
            },
            boto3_ms(runs, python),
        ),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart")
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per probe (default 7)")
    add_python_option(parser)
    args = parser.parse_args(argv)
    print("\n".join(line for python in args.python or [sys.executable] for line in section(args.runs, python)))
    return 0


def add_python_option(parser: argparse.ArgumentParser) -> None:
    """``--python PATH``, repeatable: one cold-start section per interpreter (default: this one)."""
    parser.add_argument(
        "--python",
        action="append",
        metavar="PATH",
        help="run the cold-start probes on this interpreter (repeatable: one section each; default: this one). "
        "It needs the layer's requirements and boto3, e.g. a venv of the functions' runtime (python3.13)",
    )


if __name__ == "__main__":
    raise SystemExit(main())
