"""One exception root for the layer; handlers map these to HTTP statuses in one place.

Botocore errors never reach a handler as such: [`counters.core.failures.classify`][counters.core.failures.classify] turns
each into a failure kind inside the engine, the primitives answer an outcome, and the services
raise these (a contention that outlasted the budget is [`ContentionError`][counters.core.errors.ContentionError], carrying the
command that replays the request). The HTTP glue maps them to statuses in one place.
Each class also says whether it is **final** ([`CounterError.final`][counters.core.errors.CounterError.final]): what the retry worker
does when a deferred request's replay raises it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from counters.core.commands import Command


class CounterError(Exception):
    """Root of every error the layer raises on purpose."""

    code = "counter_error"
    default_message = "counter operation failed"
    status = 500
    final = False
    """Whether a deferred request's replay that raises this has its definite outcome: ``True``, the
    operation ends ``REJECTED`` with this error's code (a refusal no redelivery changes); ``False``,
    the message is left for SQS to redeliver (and after ``maxReceiveCount``, the DLQ).
    [`counters.core.commands.Replayable.run`][counters.core.commands.Replayable.run] applies it, for every deferred operation.

    Every class in this module declares its own (``tests/unit/test_final_errors.py``). The root's
    ``False`` is what a subclass that does not say gets: an error nobody classified is not known to
    be a refusal, and ``REJECTED`` tells the client that nothing applied. A replay is idempotent, so
    a redelivery is always safe, and a message in the DLQ is visible and can be redriven; a wrong
    ``REJECTED`` is not."""

    def __init__(self, message: str | None = None, *, cause_code: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.cause_code = cause_code
        """The DynamoDB/botocore error code behind this error, when there is one."""

    def details(self) -> dict[str, str]:
        """What the error body carries beside ``error`` and ``message`` (nothing, for most errors)."""
        return {}


class NotFound(CounterError):
    """The item the operation needs does not exist."""

    code = "not_found"
    default_message = "not found"
    status = 404
    final = True  # the item is not there: a later delivery finds the same


class Hidden(NotFound):
    """Another user's object, answered exactly as a missing one (404, the same body): its id is
    computable, so a 403 would tell that it exists. Handlers still log it as a refusal."""

    final = True

    def __init__(self, missing: NotFound, refusal: str) -> None:
        super().__init__(missing.message)
        self.refusal = refusal


class AlreadyExists(CounterError):
    """An item with that key exists already."""

    code = "already_exists"
    default_message = "already exists"
    status = 409
    final = True


class Unauthorized(CounterError):
    """No verified identity where one is required (AuthMode COGNITO without authorizer claims)."""

    code = "unauthorized"
    default_message = "sign in: this API needs a verified identity"
    status = 401
    final = True


class Forbidden(CounterError):
    """The verified caller may not act on this object (another user's, or an admin route)."""

    code = "forbidden"
    default_message = "you may not act on this"
    status = 403
    final = True


class InvalidRequest(CounterError):
    """The request cannot be valid whatever the table holds (caught before any write)."""

    code = "invalid_request"
    default_message = "invalid request"
    status = 400
    final = True


class InvalidCursor(InvalidRequest):
    """A paging cursor this deployment did not issue for this listing (forged, tampered, or
    another post's): refused without saying why."""

    code = "invalid_cursor"
    default_message = "cursor is not valid"
    final = True


class IntegrityError(CounterError):
    """Stored data contradicts an invariant (e.g. a child exists but the tally is 0)."""

    code = "integrity_error"
    default_message = "stored data is inconsistent; see the audit"
    status = 409
    final = True  # a redelivery meets the same data (an audit repairs it, not a retry)


class NotSwitchable(CounterError):
    """The post's likes are stored in a layout that only one mode can count (stored before ``spread``)."""

    code = "not_switchable"
    default_message = "this post cannot switch modes"
    status = 409
    final = True


class ContentionError(CounterError):
    """Conflicts, throttling or unknown outcomes outlasted the retry budget.

    Nothing is known to have applied, and replaying the same request is safe.
    """

    code = "contention"
    default_message = "the item is busy; retry the same request later"
    status = 503
    final = False  # nothing is known to have applied, and a replay is safe: redelivered

    def __init__(self, message: str | None = None, *, cause_code: str | None = None, command: Command | None = None) -> None:
        super().__init__(message, cause_code=cause_code)
        self.command = command
        """A [`counters.core.commands.Command`][counters.core.commands.Command] to re-drive the request later, when it is safe to."""


class IdempotencyKeyInFlight(ContentionError):
    """The first request with this Idempotency-Key is still being processed: retry the same request later.

    409, as draft-ietf-httpapi-idempotency-key-header-07 (section 2.7) has it; a [`ContentionError`][counters.core.errors.ContentionError]
    all the same (nothing was done, the same request is safe to retry), but never deferred: the
    first request is the one that finishes."""

    code = "idempotency_key_in_flight"
    default_message = "the first request with this Idempotency-Key is still being processed; retry the same request later"
    status = 409
    final = False  # the first request is the one that finishes: a replay that meets it is redelivered


class DeadlineReached(ContentionError):
    """The caller's deadline ([`counters.core.engine.deadline`][counters.core.engine.deadline]) passed before the next attempt:
    it was not sent. Like any contention, replaying the request is safe."""

    default_message = "out of time before the next call; retry the request"
    final = False


class InsufficientCapacity(CounterError):
    """Not enough is left for the quantity asked (across every shard)."""

    code = "insufficient_capacity"
    default_message = "not enough capacity left for this quantity"
    status = 409
    final = True


class SlotsFull(CounterError):
    """A bounded approach (the token set) holds as many live requests as it may."""

    code = "reservation_slots_full"
    default_message = "this resource holds the maximum number of live reservations; release one first"
    status = 409
    final = True


class IdempotencyKeyMissing(InvalidRequest):
    """The route (or the resource's strategy) needs an Idempotency-Key header and the request has none."""

    code = "idempotency_key_missing"
    default_message = "this request needs an Idempotency-Key header (docs/retries.md#idempotency-keys)"
    final = True


class IdempotencyKeyExpired(CounterError):
    """The idempotency key is older than the retry window: its outcome can no longer be told."""

    code = "idempotency_key_expired"
    default_message = "the idempotency key is older than the retry window; send a new key"
    status = 422
    final = True  # the key only gets older: every later delivery is refused the same way


class IdempotencyKeyReused(CounterError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_key_reused"
    default_message = "this Idempotency-Key was already used with a different request"
    status = 422
    final = True


class WrongRegion(CounterError):
    """This request may only be made in another Region: ``region`` names it (e.g. creating an id
    owned by its home Region on an MREC global table, [docs/regions.md "Creations"](../regions.md#creations))."""

    code = "wrong_region"
    default_message = "this request is made in another Region"
    status = 409
    final = True  # a Region's retry queue replays in that Region only

    def __init__(self, message: str | None = None, *, region: str) -> None:
        super().__init__(message)
        self.region = region
        """The Region to send the request to (the error body's ``region``)."""

    def details(self) -> dict[str, str]:
        """The error body's extra field: the Region to send the request to."""
        return {"region": self.region}


class UnsupportedInMode(CounterError):
    """This approach is not exact on this global table's mode (MREC or MRSC), so it is refused."""

    code = "unsupported_in_region_mode"
    default_message = "this approach is not available on this global table (docs/regions.md)"
    status = 409
    final = True  # the table's topology refuses it; a redelivery meets the same topology


class AmbiguousOutcome(CounterError):
    """The write may or may not have applied, and this approach cannot tell (atomic, occ)."""

    code = "outcome_unknown"
    default_message = "the reservation may or may not have been applied; this strategy cannot tell"
    status = 500
    final = False  # not a refusal: it may have applied, so REJECTED would be false


class ConfigurationError(CounterError):
    """The layer is pointed at something that is not there (an endpoint, a table): a setup to fix,
    not a request to retry. Its message names the fix; an API answers it as a bare 500 (logged)."""

    code = "configuration_error"
    default_message = "the layer is not configured correctly"
    status = 500
    final = False  # a setup to fix, not a refusal of the request: a replay waits for the fix (redelivered, then the DLQ)


class EndpointUnreachable(ConfigurationError):
    """No attempt could connect to the service's endpoint, and this process never reached it
    (outside Lambda only: inside one, a lost connection is contention, retried and answered 503)."""

    code = "endpoint_unreachable"
    default_message = "cannot connect to the endpoint; check AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL"
    final = False

    def __init__(self, message: str | None = None, *, cause_code: str | None = None, endpoint: str | None = None) -> None:
        super().__init__(message, cause_code=cause_code)
        self.endpoint = endpoint
        """The URL every attempt failed to connect to."""


class TableNotFound(ConfigurationError):
    """The table (or index) the call names does not exist at this endpoint and region."""

    code = "table_not_found"
    default_message = "the table does not exist; create it from template.yaml, or check TABLE_NAME and the region"
    final = False

    def __init__(self, message: str | None = None, *, cause_code: str | None = None, table: str | None = None) -> None:
        super().__init__(message, cause_code=cause_code)
        self.table = table
        """The table the call named (``None`` when it named several)."""


class CredentialsNotFound(ConfigurationError):
    """botocore found no AWS credentials (``NoCredentialsError``), outside Lambda."""

    code = "credentials_not_found"
    default_message = "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
    final = False


class RegionNotSet(ConfigurationError):
    """botocore found no Region to send to (``NoRegionError``), outside Lambda."""

    code = "region_not_set"
    default_message = "no AWS Region: set AWS_DEFAULT_REGION, e.g. us-east-1"
    final = False


class EndpointInvalid(ConfigurationError):
    """The endpoint variable is not a URL botocore accepts (``ValueError: Invalid endpoint``), outside Lambda."""

    code = "endpoint_invalid"
    default_message = "the endpoint is not a URL: give its scheme, e.g. AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000"
    final = False


class TableLayoutMismatch(ConfigurationError):
    """The table's key schema, a key's type or a counted attribute's type is not the layout the layer
    writes (DynamoDB's ``ValidationException`` of that shape), outside Lambda."""

    code = "table_layout_mismatch"
    default_message = "the table does not have the layout the layer writes (PK and SK, both strings; numeric counters)"
    final = False


class StreamConsumerMissing(ConfigurationError):
    """The operation is counted (or its effect applied) only by a consumer of the table's stream,
    and this process was not told one runs: refused before anything is written, rather than
    accepted and never counted. The message names what to run and the setting that says it runs
    (``stream_consumers=True``, ``TALLY_STREAM_CONSUMERS``; [docs/layer.md, "What needs a stream consumer"](../layer.md#what-needs-a-stream-consumer))."""

    code = "stream_consumer_missing"
    default_message = "this operation needs a consumer of the table's stream; run it and set TALLY_STREAM_CONSUMERS=true"
    final = False  # a setup to fix: a replay waits for it (redelivered, then the DLQ)
