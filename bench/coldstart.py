"""Where a handler's cold import goes: ``python -X importtime`` grouped by who pays for what.

Each module's *self* time is charged to the first group whose prefix it matches, so the groups
add up to the whole import (median over fresh interpreters). Used by ``make bench`` for every
handler; ``python -m bench.coldstart`` prints it alone.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (group, module prefixes). The first match wins; order from specific to general.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the layer (counters.*)", ("counters",)),
    ("the handler module", ("app",)),
    ("botocore (the clients; boto3 itself is not imported)", ("botocore", "urllib3", "jmespath", "dateutil", "six")),
    ("pydantic (Powertools' OpenAPI validation)", ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions")),
    ("Powertools OpenAPI validation", ("aws_lambda_powertools.event_handler.openapi", "aws_lambda_powertools.event_handler.middlewares")),
    ("asyncio (Powertools' AppSync resolver and batch base)", ("asyncio", "concurrent", "ssl", "selectors")),
    ("Powertools event handler (resolvers, event data classes)", ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")),
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


def _trace(code: str, env: dict[str, str]) -> dict[str, float]:
    """Self time per group of what ``code`` imports, the interpreter's own start-up excluded
    (``-X importtime`` also traces it: the modules already loaded before ``code`` runs)."""
    probe = f"import sys; before = set(sys.modules); {code}"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], env=env, capture_output=True, text=True, check=True)
    startup = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True, check=True)
    seen = {m[4] for line in startup.stderr.splitlines() if (m := _LINE.match(line))}
    lines = [line for line in out.stderr.splitlines() if (m := _LINE.match(line)) and m[4] not in seen]
    return parse("\n".join(lines))


def _env(extra: dict[str, str], paths: Iterable[Path] = ()) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
    return {**base, **extra, **({"PYTHONPATH": os.pathsep.join(map(str, paths))} if paths else {})}


def decompose(code_dir: Path, layers: Iterable[Path], env: dict[str, str], runs: int = 7, module: str = "app") -> dict[str, float]:
    """Median self time per group of ``import <module>`` in fresh interpreters."""
    env = _env(env, [code_dir, *layers])
    samples = [_trace(f"import {module}", env) for _ in range(runs)]
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
    out.append(f"| ratio to `import boto3` ({baseline_ms:.1f} ms, same method) | " + " | ".join(f"{totals[n] / baseline_ms:.2f}x" for n in names) + " |")
    return "\n".join(out)


def boto3_ms(runs: int = 7) -> float:
    """``import boto3`` by the same method (its start-up excluded the same way)."""
    return statistics.median(sum(_trace("import boto3", _env({})).values()) for _ in range(runs))


def main() -> int:
    sys.path[:0] = [str(ROOT)]
    from devstack.template import read_stack

    stack = read_stack("bench-table")
    rows = {name: decompose(fn.code_dir, fn.layers, fn.environment) for name, fn in sorted(stack.functions.items())}
    print(table(rows, boto3_ms()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
