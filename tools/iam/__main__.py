"""``python -m tools.iam [--template PATH]``: per function, the actions its code performs against its Policies.

Exits 1 when any function's Policies grant more or less than its code performs, or when the
analysis cannot read a function (an operation on an unrecognised client, no action derived).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from tools.iam.compare import Stack, Verdict


def actions(found: Iterable[str]) -> str:
    """``dynamodb:GetItem dynamodb:Query sqs:SendMessage`` -> ``dynamodb GetItem Query; sqs SendMessage``."""
    by_service: dict[str, list[str]] = {}
    for action in sorted(found):
        service, _, name = action.partition(":")
        by_service.setdefault(service, []).append(name or service)
    return "; ".join(f"{service} {' '.join(names)}" for service, names in by_service.items()) or "-"


def table(verdicts: list[Verdict]) -> str:
    header = ("function", "", "code performs (derived)", "Policies grant", "missing", "broader", "SAM event source")
    rows = [
        (
            v.name,
            "ok" if v.ok else "FAIL",
            actions(v.needed),
            "= derived" if v.granted == v.needed else actions(v.granted),
            actions(v.missing),
            actions(v.broader),
            actions(v.event_actions) if v.event_actions else "",
        )
        for v in verdicts
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    for verdict in verdicts:
        lines += [f"{verdict.name}: {problem}" for problem in verdict.problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.iam", description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--template", type=Path, default=None, help="template.yaml (default: the repository's)")
    args = parser.parse_args(argv)
    stack = Stack.load(args.template)
    verdicts = [stack.verdict(name) for name in stack.functions()]
    print(table(verdicts))
    failed = [v.name for v in verdicts if not v.ok]
    print(f"\n{len(verdicts) - len(failed)}/{len(verdicts)} functions: Policies grant exactly what the code performs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
