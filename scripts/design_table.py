"""docs/DESIGN.md's item table, rendered from the store modules' shapes (counters.store.layout).

``python scripts/design_table.py`` rewrites the table between the ``store-layout`` markers;
``--check`` exits 1 when the doc differs (tests/tooling/test_store_layout.py runs the same check).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from counters.store.layout import table  # noqa: E402
from scripts.generated_block import Block  # noqa: E402

DOC = ROOT / "docs" / "DESIGN.md"
BLOCK = Block(
    DOC,
    "<!-- store-layout: generated from counters/store/*.py SHAPES by scripts/design_table.py -->",
    "<!-- /store-layout -->",
    table,
    "docs/DESIGN.md's item table differs from the store modules: run python scripts/design_table.py",
)
rendered = BLOCK.rendered

if __name__ == "__main__":
    raise SystemExit(BLOCK.main(sys.argv[1:]))
