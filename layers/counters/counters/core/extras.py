"""The ``[lambda]`` extra: what a module that needs it raises when it is not installed.

The core needs botocore only; the Lambda glue ([`counters.runtime.function`][counters.runtime.function],
[`counters.http.function`][counters.http.function], [`counters.http.resolver`][counters.http.resolver]) imports Powertools and pydantic,
which ``pip install 'tally-counters[lambda]'`` adds. Each of those modules imports them as:

    try:
        from aws_lambda_powertools import Logger
    except ModuleNotFoundError as missing:
        raise needs_lambda_extra(__name__, missing) from missing
"""

from __future__ import annotations

LAMBDA_EXTRA = "pip install 'tally-counters[lambda]'"
"""The command that installs the Lambda glue's dependencies."""


def needs_lambda_extra(module: str, missing: ModuleNotFoundError) -> ModuleNotFoundError:
    """The error for ``module`` importing without the extra: still a ``ModuleNotFoundError`` for
    the same ``name`` (code that catches ``ImportError`` sees no change), with the fix in its message."""
    package = (missing.name or "a dependency").split(".")[0]
    return ModuleNotFoundError(f"{module} needs the [lambda] extra ({package} is not installed): {LAMBDA_EXTRA}", name=missing.name)
