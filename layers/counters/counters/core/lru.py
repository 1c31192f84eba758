"""A bounded per-process cache: the least recently used entry goes first.

A warm Lambda instance lives for hours and its caches see every key its requests name, public
reads included; a dict that only grows is a memory leak anyone can drive. Thread-safe (the
tests share services across threads; Lambda does not).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

CACHE_SIZE = 10_000  # entries, per cache and process


class LRU(Generic[K, V]):
    """At most ``size`` entries; reading or writing an entry makes it the most recent."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        if size < 1:
            raise ValueError("an LRU holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key]

    def __getitem__(self, key: K) -> V:
        with self._lock:
            self._entries.move_to_end(key)  # KeyError for a missing key, as a dict
            return self._entries[key]

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key``; its value, or ``default``."""
        with self._lock:
            return self._entries.pop(key, default)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
