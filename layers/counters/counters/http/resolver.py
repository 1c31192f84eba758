"""HTTP glue shared by every API function: one resolver factory, errors mapped in one place.

Every error body is ``{"error": <code>, "message": <text>}``. Validation errors are 400 and
are raised before the handler runs, so bad input never writes: the routes' contracts are checked
by [`counters.http.validation`][counters.http.validation] (Powertools' own validation, which needs pydantic, is off). Unexpected exceptions are
logged with their stack trace and answered with a bare 500: nothing internal leaks.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from counters.core.caller import Caller
from counters.core.errors import ConfigurationError, ContentionError, CounterError, Hidden, IdempotencyKeyMissing, Unauthorized
from counters.core.extras import needs_lambda_extra
from counters.core.ids import ID_PATTERN
from counters.core.json import JSONObject, json_object
from counters.http.auth import AuthSettings, ProxyEvent, caller_from_event

try:  # first: it registers Powertools' event_handler without its __init__ (counters.http.powertools)
    from counters.http.powertools import APIGatewayRestResolver, Response, content_types
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

try:
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError
    from aws_lambda_powertools.metrics import MetricUnit
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

from counters.http.validation import validate

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from counters.deferral.queue import Deferrer

__all__ = [
    "ID_PATTERN",
    "ProxyResponse",
    "TallyResolver",
    "build_app",
    "early_response",
    "error",
    "json_response",
    "request_time",
]

ProxyResponse = dict[str, Any]
"""A Lambda proxy response (``statusCode``, ``headers``, ``body``...), as Powertools'
``resolve`` returns it (``dict[str, Any]`` there; this override keeps its type)."""
E = TypeVar("E", bound=Exception)

MAX_BODY_BYTES = 64 * 1024
"""Every body this API takes is small (a post's text is at most 4,000 characters, an order 50
lines); anything larger is refused before it is parsed."""

MAX_JSON_DEPTH = 64
"""No body of this API nests deeper than 3; json.loads would raise RecursionError near 1,000."""
MAX_NUMBER_DIGITS = 100
"""No number of this API has more than 16 digits; json.loads raises ValueError past 4,300 (the
int-string conversion limit). Digits inside strings are not counted."""

_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_LONG_NUMBER = re.compile(f"[0-9]{{{MAX_NUMBER_DIGITS + 1}}}")
_BRACKET = re.compile(r"[\[\]{}]")


def error(status: int, code: str, message: str, details: dict[str, str] | None = None) -> Response[JSONObject]:
    """The error body: ``{"error", "message"}``, and an error's own details (e.g. ``region``)."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": code, "message": message, **(details or {})},
    )


def json_response(status: int, body: Mapping[str, object], headers: dict[str, str] | None = None) -> Response[Any]:
    """``body`` as a JSON response: a service's typed result (a `TypedDict`, as is or spread into a
    dict with more keys) turned into JSON by [json_object][counters.core.json.json_object], the
    same keys in the same order. ``Response[Any]``: a route declares ``-> Response[Model]``, the
    pydantic model Powertools documents and validates ``body`` (its JSON form) against; a body
    typed as the model would be a lie, and ``Response`` is invariant, so only ``Any`` fits both.
    The route's middleware ([`validate`][counters.http.validation.validate]) serializes it by the
    model, as Powertools' validation did."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json_object(body),
        headers=headers,
    )


def _describe(errors: Sequence[Any]) -> str:  # pydantic's error dicts; Powertools types them Sequence[Any]
    parts = []
    for err in list(errors)[:5]:
        loc = [str(p) for p in err.get("loc", ())]
        if len(loc) > 1 and loc[0] == "body":
            loc = loc[1:]  # "body.authorId" reads better as "authorId"
        where = ".".join(loc) or "request"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _missing_key(err: Any) -> bool:  # one of pydantic's error dicts
    """A required Idempotency-Key header is absent (or empty)."""
    loc = [str(p).lower() for p in err.get("loc", ())]
    return loc == ["header", "idempotency-key"] and (err.get("type") == "missing" or err.get("input") == "")


class TallyResolver(APIGatewayRestResolver):
    """The REST resolver, refusing non-JSON bodies before Powertools' validation parses them
    (it would otherwise try multipart/form-data and fail with a 500 on a missing boundary),
    and knowing who calls ([`caller`][counters.http.resolver.TallyResolver.caller], from the authorizer's verified claims)."""

    caller: Caller = Caller()
    """Who the current request's caller is (set by [`resolve`][counters.http.resolver.TallyResolver.resolve] for each event)."""
    request_time: int = 0
    """When API Gateway received the request (ms): [`request_time`][counters.http.resolver.TallyResolver.request_time] of the current event."""
    auth: Callable[[], AuthSettings] = AuthSettings.from_env
    """Where identity comes from, read when a request arrives (the function's settings)."""

    def resolve(self, event: ProxyEvent, context: LambdaContext) -> ProxyResponse:
        """Answer one API Gateway event: the caller and the request time read once, then the route."""
        self.request_time = request_time(event)
        try:
            auth = self.auth()
            self.caller = caller_from_event(event, mode=auth.auth_mode, admin_group=auth.admin_group)
        except Unauthorized as exc:
            return early_response(exc.status, exc.code, exc.message)
        except ValueError:  # AUTH_MODE misconfigured: fail closed, say nothing about why
            logging.getLogger(__name__).exception("cannot tell who the caller is")
            return early_response(500, "internal_error", "internal error; the request may be retried")
        raw = event.get("body") or ""
        size = len(raw) * 3 // 4 if event.get("isBase64Encoded") else len(raw.encode("utf-8", "surrogatepass"))
        if size > MAX_BODY_BYTES:
            return early_response(413, "payload_too_large", f"the request body must be at most {MAX_BODY_BYTES} bytes")
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
        body = event.get("body")
        if body and content_type and content_type != "application/json" and not content_type.endswith("+json"):
            return early_response(415, "unsupported_media_type", "send the body as application/json")
        if content_type:
            # Media types are case-insensitive and +json is JSON, but Powertools' body parser
            # compares "application/json" case-sensitively (and 415s +json): tell it JSON.
            event = _with_json_content_type(event)
        if body and event.get("isBase64Encoded"):
            try:
                body = base64.b64decode(body, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return early_response(400, "invalid_json", "the request body is not valid UTF-8 JSON")
        if body and body.lstrip()[:1] == "[":
            # Powertools validates a JSON array against a body model with its first element;
            # every body of this API is an object, so an array is refused outright.
            return early_response(400, "validation_error", "the request body must be a JSON object")
        if body:
            problem = _unsafe_json(body)
            if problem:
                return early_response(400, "invalid_json", problem)
        return super().resolve(event, context)


MAX_CLOCK_SKEW_MS = 5 * 60 * 1000
"""How far a request's time may be from this function's clock (5 minutes)."""


def request_time(event: ProxyEvent, now: int | None = None) -> int:
    """When the API received the request, in ms: API Gateway's ``requestContext.requestTimeEpoch``,
    or the function's clock at the start of the request when the event has none, or one further
    than [`MAX_CLOCK_SKEW_MS`][counters.http.resolver.MAX_CLOCK_SKEW_MS] from it (a stored sample event, not a live request: API
    Gateway invokes the function within its integration timeout)."""
    now = time.time_ns() // 1_000_000 if now is None else now
    epoch = (event.get("requestContext") or {}).get("requestTimeEpoch")
    if type(epoch) is int and abs(epoch - now) <= MAX_CLOCK_SKEW_MS:
        return epoch
    return now


def _unsafe_json(text: str) -> str | None:
    """Why ``text`` must not reach ``json.loads`` (a 500 from a RecursionError or ValueError
    deep inside the parser), or None. Bounded before parsing: nesting deeper than
    [`MAX_JSON_DEPTH`][counters.http.resolver.MAX_JSON_DEPTH], a digit run longer than [`MAX_NUMBER_DIGITS`][counters.http.resolver.MAX_NUMBER_DIGITS] outside strings.
    Within both bounds json.loads can raise only a JSONDecodeError, which the validation
    middleware answers (``invalid_json`` as before), so the body is parsed once, by Powertools."""
    bare = _JSON_STRING.sub('""', text)
    if _LONG_NUMBER.search(bare):
        return f"a number in the request body has more than {MAX_NUMBER_DIGITS} digits"
    depth = 0
    for bracket in _BRACKET.finditer(bare):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            return f"the request body nests deeper than {MAX_JSON_DEPTH} levels"
    return None  # within both bounds json.loads raises only JSONDecodeError: no need to parse twice


def _with_json_content_type(event: ProxyEvent) -> dict[str, object]:
    """The event with its Content-Type header (any casing) replaced by ``application/json``."""

    def replaced(headers: dict[str, object] | None, value: str | list[str]) -> dict[str, object] | None:
        if not headers:
            return headers
        kept = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        return {**kept, "Content-Type": value}

    return {
        **event,
        "headers": replaced(event.get("headers"), "application/json"),
        "multiValueHeaders": replaced(event.get("multiValueHeaders"), ["application/json"]),
    }


def early_response(status: int, code: str, message: str) -> ProxyResponse:
    """A proxy response for requests refused before routing."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "multiValueHeaders": {},
        "body": json.dumps({"error": code, "message": message}),
        "isBase64Encoded": False,
    }


def _on(app: TallyResolver, exc_class: type[E]) -> Callable[[Callable[[E], Response[JSONObject]]], Callable[[E], Response[JSONObject]]]:
    """``@app.exception_handler(exc_class)``, typed (Powertools' decorator is not annotated)."""

    def register(handler: Callable[[E], Response[JSONObject]]) -> Callable[[E], Response[JSONObject]]:
        app.exception_handler(exc_class)(handler)
        return handler

    return register


def build_app(
    logger: Logger,
    *,
    auth: Callable[[], AuthSettings] = AuthSettings.from_env,
    deferrer: Callable[[], Deferrer | None] = lambda: None,
    metrics: Metrics | None = None,
) -> TallyResolver:
    """A REST-API resolver validating every route by its contract and the layer's error mapping installed.

    ``auth`` gives the identity settings and ``deferrer`` the retry queue, both when a request
    needs them (never at import). With a deferrer, a contended request that is safe to
    re-drive is queued and answered ``202 {"status": "PENDING", "operationId"}`` instead of 503,
    and counted as the metric ``Deferred`` (the dashboard's 202s).
    """
    # Powertools' validation needs pydantic: off. counters.http.validation checks each route's
    # contract instead; a response that does not match its model is a bug: 500 (logged), never a 4xx.
    app = TallyResolver()
    app.use([validate])
    app.auth = auth

    @_on(app, ContentionError)
    def _contention(exc: ContentionError) -> Response[JSONObject]:
        queue = deferrer() if exc.command is not None else None
        if queue is not None and exc.command is not None:
            try:
                command = queue.defer(exc.command, owner=app.caller.owner)
            except Exception:  # noqa: BLE001 - not acknowledged: the caller gets the 503 and retries
                logger.exception("could not defer a contended request", extra={"op": exc.command.op})
            else:
                logger.info("deferred to the retry queue", extra={"op": command.op, "operationId": command.operation_id})
                if metrics is not None:
                    metrics.add_metric(name="Deferred", unit=MetricUnit.Count, value=1)
                return json_response(
                    202,
                    {"status": "PENDING", "operationId": command.operation_id},
                    headers={"Location": f"/operations/{command.operation_id}"},
                )
        logger.warning("request failed", extra={"error": exc.code, "detail": exc.message})
        return error(exc.status, exc.code, exc.message)

    @_on(app, RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response[JSONObject]:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error(400, "invalid_json", "the request body is not valid JSON")
        missing_key = [e for e in errors if _missing_key(e)]
        if missing_key:  # the IETF draft's case: its own code and where the key is documented
            others = [e for e in errors if not _missing_key(e)]
            message = IdempotencyKeyMissing.default_message + (f"; also {_describe(others)}" if others else "")
            return error(400, IdempotencyKeyMissing.code, message)
        return error(400, "validation_error", _describe(errors))

    @_on(app, RequestUnsupportedContentType)
    def _media_type(exc: RequestUnsupportedContentType) -> Response[JSONObject]:
        return error(415, "unsupported_media_type", "send the body as application/json")

    @_on(app, ConfigurationError)
    def _misconfigured(exc: ConfigurationError) -> Response[JSONObject]:
        # The message names the fix (a table, an endpoint): for the operator's log, not the client.
        logger.error("the function is misconfigured", extra={"error": exc.code, "detail": exc.message})
        return error(500, "internal_error", "internal error; the request may be retried")

    @_on(app, CounterError)
    def _domain(exc: CounterError) -> Response[JSONObject]:
        if exc.status in (401, 403):
            logger.info("refused", extra={"error": exc.code, "caller": app.caller.user_id, "route": app.current_event.resource})
        elif isinstance(exc, Hidden):  # answered as not found, but a refusal all the same
            logger.info(
                "refused",
                extra={
                    "error": "forbidden",
                    "answered": exc.code,
                    "detail": exc.refusal,
                    "caller": app.caller.user_id,
                    "route": app.current_event.resource,
                },
            )
        if exc.status >= 500:
            logger.warning("request failed", extra={"error": exc.code, "detail": exc.message})
        return error(exc.status, exc.code, exc.message, exc.details())

    @app.not_found
    def _no_route(exc: Exception) -> Response[JSONObject]:
        return error(404, "no_route", "no such route")

    @_on(app, Exception)
    def _unexpected(exc: Exception) -> Response[JSONObject]:
        logger.exception("unhandled error")
        return error(500, "internal_error", "internal error; the request may be retried")

    return app
