"""Tally's counter primitives on DynamoDB: exact under retries, redelivery and faults.

The public names below are importable from the package root (``from counters import Likes``)
and resolved lazily, on first use: ``import counters`` imports no submodule (no botocore), so a
cold start only pays for what a function uses. `_PUBLIC` maps each name to the module that
defines it, the one place to change when a module moves. Everything else is imported from its
module (``counters.primitives.refcount``...).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing is most of this module's cost

__version__ = "0.1.0"
"""The package version (the one source: the build backend reads it from here)."""

_PUBLIC: dict[str, str] = {
    # the services (botocore only)
    "Likes": "counters.services.likes",
    "Reservations": "counters.services.reservations",
    "Ledgers": "counters.services.ledgers",
    "Orders": "counters.services.orders",
    # the outcome model
    "Outcome": "counters.core.outcome",
    "Result": "counters.core.outcome",
    "Capacity": "counters.core.outcome",
    # the retry budget and settings
    "RetryPolicy": "counters.core.failures",
    "Settings": "counters.core.settings",
    # the errors, under one root
    "errors": "counters.core.errors",
    "CounterError": "counters.core.errors",
    "NotFound": "counters.core.errors",
    "AlreadyExists": "counters.core.errors",
    "InvalidRequest": "counters.core.errors",
    "ContentionError": "counters.core.errors",
    "InsufficientCapacity": "counters.core.errors",
    "IdempotencyKeyReused": "counters.core.errors",
}

__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:  # the same names for type checkers (``X as X``: an explicit re-export)
    from counters.core import errors as errors
    from counters.core.errors import AlreadyExists as AlreadyExists
    from counters.core.errors import ContentionError as ContentionError
    from counters.core.errors import CounterError as CounterError
    from counters.core.errors import IdempotencyKeyReused as IdempotencyKeyReused
    from counters.core.errors import InsufficientCapacity as InsufficientCapacity
    from counters.core.errors import InvalidRequest as InvalidRequest
    from counters.core.errors import NotFound as NotFound
    from counters.core.failures import RetryPolicy as RetryPolicy
    from counters.core.outcome import Capacity as Capacity
    from counters.core.outcome import Outcome as Outcome
    from counters.core.outcome import Result as Result
    from counters.core.settings import Settings as Settings
    from counters.services.ledgers import Ledgers as Ledgers
    from counters.services.likes import Likes as Likes
    from counters.services.orders import Orders as Orders
    from counters.services.reservations import Reservations as Reservations


def __getattr__(name: str) -> object:
    """Import a public name's module on first access (PEP 562) and cache the name here."""
    module_name = _PUBLIC.get(name)
    if module_name is None:
        raise AttributeError(f"module 'counters' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
