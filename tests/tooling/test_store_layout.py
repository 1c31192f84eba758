"""The table's layout lives in the store modules; docs/DESIGN.md's item table is their image."""

from __future__ import annotations

import importlib

from counters.store import layout
from scripts.design_table import DOC, rendered


def test_every_family_declares_its_shapes() -> None:
    for family in layout.FAMILIES:
        module = importlib.import_module(f"counters.store.{family}")
        assert module.SHAPES, family
        assert all(isinstance(s, layout.Shape) for s in module.SHAPES)


def test_design_md_holds_the_table_the_store_declares() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/design_table.py"
