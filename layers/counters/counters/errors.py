"""One exception root for the layer; handlers map these to HTTP statuses in one place.

Botocore error codes are mapped to these once, in :mod:`counters.dynamo`, chained with
``raise ... from exc``. Anything unrecognised is re-raised untouched.
"""

from __future__ import annotations


class CounterError(Exception):
    """Root of every error the layer raises on purpose."""

    code = "counter_error"
    default_message = "counter operation failed"
    status = 500

    def __init__(self, message: str | None = None, *, cause_code: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.cause_code = cause_code
        """The DynamoDB/botocore error code behind this error, when there is one."""


class NotFound(CounterError):
    """The item the operation needs does not exist."""

    code = "not_found"
    default_message = "not found"
    status = 404


class AlreadyExists(CounterError):
    """An item with that key exists already."""

    code = "already_exists"
    default_message = "already exists"
    status = 409


class InvalidRequest(CounterError):
    """The request cannot be valid whatever the table holds (caught before any write)."""

    code = "invalid_request"
    default_message = "invalid request"
    status = 400


class IntegrityError(CounterError):
    """Stored data contradicts an invariant (e.g. a child exists but the tally is 0)."""

    code = "integrity_error"
    default_message = "stored data is inconsistent; see the audit"
    status = 409


class ContentionError(CounterError):
    """Conflicts, throttling or unknown outcomes outlasted the retry budget.

    Nothing is known to have applied, and replaying the same request is safe.
    """

    code = "contention"
    default_message = "the item is busy; retry the same request later"
    status = 503

    def __init__(
        self, message: str | None = None, *, cause_code: str | None = None, replay: tuple[str, dict, str | None] | None = None
    ) -> None:
        super().__init__(message, cause_code=cause_code)
        self.replay = replay
        """(operation, payload, token) to re-drive the request later, when it is safe to."""


class IdempotencyKeyReused(CounterError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_key_reused"
    default_message = "this Idempotency-Key was used with a different request"
    status = 422
