"""Multi-Region proof scenarios (issue 21): each approach's module exposes
``scenarios(endpoint, seed, schedules) -> list[proof.checker.Report]``, registered here by name."""

from __future__ import annotations

REGISTRY: dict[str, str] = {
    "reservations": "proof.regions.reservations",
}
"""Name -> the module whose ``scenarios`` runs that approach's schedules."""
