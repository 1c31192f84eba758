"""Where contended requests are deferred to: the retry queue's settings, apart from the queue's code.

An API function's settings include them (``ApiSettings``) while the queue itself
([`counters.deferral.queue`][counters.deferral.queue], with the operation records of the store) is
imported only when a request is first deferred: a cold start does not pay for it.
"""

from __future__ import annotations

from counters.core.records import dataclass
from counters.core.settings import Settings, env


@dataclass(frozen=True, kw_only=True)
class DeferralSettings(Settings):
    """The retry queue (``RETRY_QUEUE_URL``); unset, contended requests answer 503."""

    retry_queue_url: str | None = env("RETRY_QUEUE_URL", None)
