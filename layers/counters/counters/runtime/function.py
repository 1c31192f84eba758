"""A Lambda function's preamble, written once: Logger, Metrics, settings, what it builds from them.

Every handler module starts the same way:

    function = Function(Settings, Likes.from_settings)    # nothing read from the environment yet

    @function.handler()                                   # Logger context + EMF flush
    def lambda_handler(event, context):
        return function.service.do(...)

* [`Function.settings`][counters.runtime.function.Function.settings] is parsed from the environment on first use (the first invocation),
  once; [`Function.configure`][counters.runtime.function.Function.configure] injects settings instead (tests, the local stack).
* [`Function.service`][counters.runtime.function.Function.service] is built from the settings by ``build``, once per settings.
* The layer's own loggers (``counters.*``) get the function's Logger configuration.
* Under Lambda SnapStart, a service built before the snapshot is forgotten after each restore
  and built again on first use ([`counters.core.snapstart`][counters.core.snapstart]).

API functions use ``counters.http.function.ApiFunction``, which adds the resolver.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from counters.core import snapstart
from counters.core.extras import needs_lambda_extra
from counters.core.json import JSONObject
from counters.core.settings import Settings

try:
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

S = TypeVar("S", bound=Settings)
T = TypeVar("T")
F = TypeVar("F", bound="Callable[..., object]")
"""A Lambda entry point, ``(event, context) -> response``; [`Function.handler`][counters.runtime.function.Function.handler] keeps its type."""


class Function(Generic[S, T]):
    """Settings of type ``settings_type`` and the object ``build(settings)`` makes from them."""

    def __init__(self, settings_type: type[S], build: Callable[[S], T]) -> None:
        self.settings_type = settings_type
        self.build = build
        self.logger = Logger()
        self.metrics = Metrics()
        copy_config_to_registered_loggers(source_logger=self.logger, include={"counters"})
        self._lock = threading.Lock()
        self._settings: S | None = None
        self._service: T | None = None
        snapstart.on_restore(_forget_service(weakref.ref(self)))

    @property
    def settings(self) -> S:
        """The settings, read from the environment on first use (once per process)."""
        if self._settings is None:
            with self._lock:
                if self._settings is None:
                    self._settings = self.settings_type.from_env()
        return self._settings

    @property
    def service(self) -> T:
        """The object ``build(settings)`` made, on first use (once per process, again after a SnapStart restore)."""
        if self._service is None:
            settings = self.settings
            with self._lock:
                if self._service is None:
                    self._service = self.build(settings)
        return self._service

    def configure(self, settings: S | None, service: T | None = None) -> T | None:
        """Use ``settings`` from now on (and ``service``, or one built from them); ``None``:
        forget them, so the next invocation reads the environment again."""
        with self._lock:
            self._settings = settings
            self._service = service if service is not None or settings is None else self.build(settings)
        return self._service

    def invoke(self, fn: Callable[[JSONObject, LambdaContext], object], event: JSONObject, context: LambdaContext) -> object:
        """Run one invocation: settings and service ready first, so a misconfigured function
        fails its first invocation loudly (the event source retries it)."""
        self.service  # noqa: B018
        return fn(event, context)

    def handler(self, correlation_id_path: str | None = None) -> Callable[[F], F]:
        """Decorate the Lambda entry point: settings parsed before the first event, Logger
        context (and correlation id), EMF metrics flushed after each invocation."""

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            def entry(event: JSONObject, context: LambdaContext) -> object:
                return self.invoke(fn, event, context)

            logged = self.logger.inject_lambda_context(correlation_id_path=correlation_id_path)(entry)

            @functools.wraps(fn)
            def flushed(event: JSONObject, context: LambdaContext) -> object:
                try:
                    return logged(event, context)
                finally:
                    self.flush_metrics()

            return cast(F, flushed)

        return decorate

    def flush_metrics(self) -> None:
        """Print the EMF metrics recorded since the last flush, if any. Powertools' own
        ``log_metrics`` flushes an empty set too, and warns "No application metrics to publish"
        on every such invocation (a read, a rejected request, a batch with nothing to count):
        here nothing is printed and nothing warns. Its documented fix, a process-wide
        ``warnings.filterwarnings``, would also hide the warning from the user's own code."""
        if self.metrics.metric_set:
            self.metrics.flush_metrics()


def _forget_service(ref: weakref.ref[Function[S, T]]) -> Callable[[], None]:
    """A restore hook dropping the function's service (not its settings): one built before the
    snapshot holds state seeded then (its retry policy's ``random.Random``)."""

    def forget() -> None:
        function = ref()
        if function is not None:
            with function._lock:
                function._service = None

    return forget
