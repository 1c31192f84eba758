"""Settings: what a function reads from its environment, typed, parsed once, injectable.

Each piece of the layer that needs configuration declares it as a frozen dataclass field bound
to its environment variable (template.yaml sets them):

    @dataclass(frozen=True, kw_only=True)
    class OrderSettings(Settings):
        sequence_mode: SequenceMode = env("SEQUENCE_MODE", SequenceMode.FAST)

A function's settings combine the pieces it uses (``class Settings(ApiSettings, OrderSettings)``)
and are parsed by [`Settings.from_env`][counters.core.settings.Settings.from_env] exactly once, on the first invocation (never at
import: a module can be imported with no environment at all). Tests build settings directly
(``OrderSettings(table_name="t")``) and hand them to the function: nothing patches globals.

A missing required variable or a value of the wrong type raises [`SettingsError`][counters.core.settings.SettingsError] naming
the variable: the function fails its first invocation loudly rather than running half-configured.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import typing
from collections.abc import Mapping
from typing import Any, Self, TypeVar, overload

from counters.core.failures import RetryPolicy
from counters.core.records import dataclass

_ENV = "env"


class SettingsError(ValueError):
    """The environment does not configure the function correctly."""


STREAM_CONSUMERS_ENV = "TALLY_STREAM_CONSUMERS"
"""``true``: the table's stream consumers run (template.yaml sets it on the stack's functions)."""


def stream_consumers(declared: bool | None = None) -> bool:
    """Whether the stream consumers run: ``declared`` (a service's ``stream_consumers=`` argument,
    or its settings' field) when given, else ``TALLY_STREAM_CONSUMERS`` (``true``/``1``/``yes``), else
    ``False``: an operation only a consumer would count is then refused
    ([`StreamConsumerMissing`][counters.core.errors.StreamConsumerMissing]), never accepted and left uncounted."""
    if declared is not None:
        return declared
    raw = os.environ.get(STREAM_CONSUMERS_ENV) or ""
    return bool(raw) and bool(_parse(STREAM_CONSUMERS_ENV, raw, bool))


IDEMPOTENCY_WINDOW_DAYS = 31
"""How long an idempotency key is honoured by default (template parameter ``IdempotencyWindowDays``)."""
DAY_SECONDS = 24 * 3600

T = TypeVar("T")


@overload
def env(name: str) -> Any: ...  # required: Any, as dataclasses.field() without a default (the field's annotation types it)
@overload
def env(name: str, default: T) -> T: ...
def env(name: str, default: object = dataclasses.MISSING) -> object:
    """A settings field read from the environment variable ``name`` (required without a default)."""
    return dataclasses.field(default=default, metadata={_ENV: name})


def _parse(name: str, raw: str, kind: object) -> object:
    try:
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return kind(raw)
        if kind in (int, float, str):
            return kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a valid {getattr(kind, '__name__', kind)}") from None
    raise TypeError(f"no parser for settings of type {kind!r}")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What every function reads: its table and its in-line retry budget."""

    table_name: str = env("TABLE_NAME")
    inline_retry_attempts: int = env("INLINE_RETRY_ATTEMPTS", 6)
    stream_consumers: bool | None = env(STREAM_CONSUMERS_ENV, None)
    """Whether the table's stream consumers run beside this function (the like aggregator, the
    order pointer, MREC escrow): template.yaml sets it on every function of the stack, which deploys
    them. Unset (``None``): as [`stream_consumers`][counters.core.settings.stream_consumers] finds it."""
    idempotency_window_days: int = env("IDEMPOTENCY_WINDOW_DAYS", IDEMPOTENCY_WINDOW_DAYS)
    """How long an idempotency key is honoured (template parameter ``IdempotencyWindowDays``, at
    least 1): its record is kept this long after the first request, which a re-send then answers."""

    @property
    def idempotency_window_seconds(self) -> int:
        """The key window in seconds ([`idempotency_window_days`][counters.core.settings.Settings]);
        [`SettingsError`][counters.core.settings.SettingsError] below one day."""
        if self.idempotency_window_days < 1:
            raise SettingsError(f"IDEMPOTENCY_WINDOW_DAYS={self.idempotency_window_days} must be at least 1 (days)")
        return self.idempotency_window_days * DAY_SECONDS

    @property
    def retry(self) -> RetryPolicy:
        """The in-line retry budget (template parameter ``InlineRetryAttempts``)."""
        return RetryPolicy(max_attempts=max(1, self.inline_retry_attempts))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Every field from its variable; an empty variable counts as unset (SAM writes "")."""
        environ = os.environ if environ is None else environ
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}  # each value parsed for its field's type (checked at run time, by _parse)
        for f in dataclasses.fields(cls):
            name = f.metadata.get(_ENV)
            if name is None:
                continue
            raw = environ.get(name) or None
            if raw is None:
                if f.default is dataclasses.MISSING:
                    raise SettingsError(f"{name} is not set")
                continue
            kind = hints[f.name]
            optional = typing.get_args(kind)
            if optional and type(None) in optional:
                kind = next(a for a in optional if a is not type(None))
            values[f.name] = _parse(name, raw, kind)
        return cls(**values)
