"""counters.core.lru: a per-process cache bounded by entries, least recently used out first."""

from __future__ import annotations

import pytest

from counters.core.lru import LRU


def test_it_holds_at_most_size_entries_and_drops_the_least_recently_used() -> None:
    cache: LRU[str, int] = LRU(3)
    for i in range(5):
        cache[f"k{i}"] = i
    assert len(cache) == 3 and "k0" not in cache and "k1" not in cache
    assert cache.get("k2") == 2  # read: now the most recent
    cache["k5"] = 5
    assert "k3" not in cache and [k in cache for k in ("k2", "k4", "k5")] == [True, True, True]
    cache["k4"] = 40  # written again: most recent, nothing dropped
    assert len(cache) == 3 and cache["k4"] == 40
    assert cache.pop("k4") == 40 and cache.pop("k4") is None and len(cache) == 2
    assert cache.get("nope", 7) == 7
    with pytest.raises(KeyError):
        cache["nope"]
    with pytest.raises(ValueError):
        LRU(0)
