"""Tally's counter primitives on DynamoDB: exact under retries, redelivery and faults.

Import the pieces you need from their modules (``counters.primitives.refcount``, ``counters.services.likes``...);
this package root stays import-light so a cold start only pays for what a function uses.
"""

from counters.core.errors import CounterError
from counters.core.outcome import Capacity, Outcome, Result

__all__ = ["Capacity", "CounterError", "Outcome", "Result"]
