"""The SAM translator's log notices, each shown once per process.

`make validate` translates the template 24 times (scripts/check_auth_modes.py: 2,
scripts/check_region_modes.py: 22), and samtranslator logs the same warning on each translation
(``Feature 'deployment_preference_condition_fix' not available in Feature Toggle Config.``: offline
its feature-toggle config is empty, so the feature is off, as in `sam validate`). With no logging
configured, Python's last-resort handler printed all 24. :func:`show_each_once` gives the
``samtranslator`` loggers one stderr handler that passes each distinct message once;
scripts/check_modes.py runs both checks in one process, so `make validate` shows it once.
"""

from __future__ import annotations

import logging
import sys


class OncePerMessage(logging.Filter):
    """Passes a record whose (logger, message) it has not passed before."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def show_each_once(logger_name: str = "samtranslator") -> logging.Handler:
    """Idempotent: a second call returns the handler the first installed."""
    logger = logging.getLogger(logger_name)
    for handler in logger.handlers:
        if any(isinstance(f, OncePerMessage) for f in handler.filters):
            return handler
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.addFilter(OncePerMessage())
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s (shown once)"))
    logger.addHandler(handler)
    return handler
