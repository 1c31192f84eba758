"""Multi-Region proof scenarios (issue 21): each approach's ``scenarios(endpoint, seed, schedules)``."""

from __future__ import annotations

from collections.abc import Callable

from proof.checker import Report

Scenarios = Callable[[str, int, int], list[Report]]


def _likes(endpoint: str, seed: int, schedules: int) -> list[Report]:
    from proof.regions import likes

    return likes.scenarios(endpoint, seed, schedules)


REGISTRY: dict[str, Scenarios] = {"likes": _likes}
