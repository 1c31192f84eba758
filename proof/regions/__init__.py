"""Multi-Region proof scenarios (issue 21): each approach's ``scenarios(endpoint, seed, schedules)``."""

from __future__ import annotations

from collections.abc import Callable

from proof.checker import Report
from proof.regions import ledger

REGISTRY: dict[str, Callable[[str, int, int], list[Report]]] = {
    "ledger": ledger.scenarios,
}
