"""The table's layout, declared by the store modules that own it.

Each family module ([`counters.store.post_items`][counters.store.post_items], ``resources_counters``, ``resources_transfers``,
``resources_records``, ``ledger_items``, ``sequences``, ``operations``, ``expiry``) declares its item shapes as [`Shape`][counters.store.layout.Shape] s in a module-level ``SHAPES`` tuple, next
to the key functions and attribute names it uses. [`table`][counters.store.layout.table] renders every family's shapes as the
Markdown item table of [docs/DESIGN.md](../DESIGN.md), and a unit test (tests/tooling/test_store_layout.py) keeps that
table equal to it: the layout lives in code, the doc is its image.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

FAMILIES = (
    "post_items",
    "resources_counters",
    "resources_transfers",
    "resources_records",
    "ledger_items",
    "sequences",
    "operations",
    "expiry",
)
"""The store modules that own items, in the order the table lists them."""


class Shape(NamedTuple):
    """One kind of item: what its keys look like and what it holds."""

    item: str
    pk: str
    sk: str
    notes: str = ""

    def row(self) -> str:
        """The shape as a Markdown table row."""
        return f"| {self.item} | `{self.pk}` | `{self.sk}` | {self.notes} |"


def shapes() -> list[Shape]:
    """Every family's shapes, in [`FAMILIES`][counters.store.layout.FAMILIES] order (families not written yet are skipped)."""
    out: list[Shape] = []
    for family in FAMILIES:
        try:
            module = importlib.import_module(f"counters.store.{family}")
        except ModuleNotFoundError as exc:
            if exc.name != f"counters.store.{family}":
                raise
            continue
        out.extend(getattr(module, "SHAPES", ()))
    return out


def table() -> str:
    """The item table, as [docs/DESIGN.md](../DESIGN.md) holds it between its ``store-layout`` markers."""
    head = ["| item | PK | SK | notes (details in) |", "|---|---|---|---|"]
    return "\n".join(head + [s.row() for s in shapes()])
