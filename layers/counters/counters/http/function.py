"""An API Gateway (REST) function's preamble: [`Function`][counters.runtime.function.Function] plus the resolver.

    function = ApiFunction(Settings, Likes.from_settings, deferrer=retry_queue)
    app = function.app                       # register routes on it

    @app.get("/posts/<postId>")
    def get_post(postId: IdPath) -> Response[Post]:
        return json_response(200, function.service.get_post(postId))

    lambda_handler = function.lambda_handler

The resolver reads who the caller is with the function's [`ApiSettings`][counters.http.function.ApiSettings] (``AUTH_MODE``,
``ADMIN_GROUP``) and, given a ``deferrer``, defers contended requests to its retry queue
(``RETRY_QUEUE_URL``); both are built from the settings on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from counters.core.extras import needs_lambda_extra
from counters.core.records import dataclass

try:  # first, so that a user who imports this module without the extra is told what to install
    from aws_lambda_powertools.logging import correlation_paths
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

from counters.core.json import JSONObject
from counters.core.settings import SettingsError
from counters.deferral.settings import DeferralSettings
from counters.http.auth import AuthSettings
from counters.http.resolver import TallyResolver, build_app, early_response
from counters.runtime.function import Function

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from counters.deferral.queue import Deferrer


@dataclass(frozen=True, kw_only=True)
class ApiSettings(AuthSettings, DeferralSettings):
    """What every API function reads: identity (auth) and the retry queue (deferral)."""


def retry_queue(settings: DeferralSettings) -> Deferrer | None:
    """``Deferrer.from_settings``, imported on first use: the queue (and the store's operation
    records) is loaded by the first contended request, not by every cold start."""
    from counters.deferral.queue import Deferrer

    return Deferrer.from_settings(settings)


S = TypeVar("S", bound=ApiSettings)
T = TypeVar("T")


class ApiFunction(Function[S, T]):
    """A function behind API Gateway: routes on [`app`][counters.http.function.ApiFunction.app], entry point [`lambda_handler`][counters.http.function.ApiFunction.lambda_handler]."""

    def __init__(self, settings_type: type[S], build: Callable[[S], T], *, deferrer: Callable[[S], Deferrer | None] | None = None) -> None:
        """``deferrer`` ([`retry_queue`][counters.http.function.retry_queue], or ``Deferrer.from_settings``) turns contention into 202s through the retry queue."""
        super().__init__(settings_type, build)
        self._make_deferrer = deferrer
        self._deferrer: tuple[ApiSettings, Deferrer | None] | None = None
        self.app: TallyResolver = build_app(self.logger, auth=lambda: self.settings, deferrer=self.deferrer, metrics=self.metrics)
        """The resolver: register the function's routes on it."""
        self.lambda_handler = self.handler(correlation_paths.API_GATEWAY_REST)(self.app.resolve)
        """The function's entry point (the resolver behind the Powertools decorators)."""

    def invoke(self, fn: Callable[[JSONObject, LambdaContext], object], event: JSONObject, context: LambdaContext) -> object:
        """A misconfigured API function answers a bare 500 (logged), never a stack trace."""
        try:
            self.service  # noqa: B018
        except SettingsError:
            self.logger.exception("the function's settings are invalid")
            return early_response(500, "internal_error", "internal error; the request may be retried")
        return fn(event, context)

    def deferrer(self) -> Deferrer | None:
        """The retry queue's deferrer for the current settings (None: contention answers 503)."""
        if self._make_deferrer is None:
            return None
        settings = self.settings
        if self._deferrer is None or self._deferrer[0] is not settings:
            self._deferrer = (settings, self._make_deferrer(settings))
        return self._deferrer[1]
