"""docs/regions.md's "What each mode refuses" table, rendered from the one refusal table
(every family's ``TABLE``, counters.store.tables).

``python scripts/refusals_table.py`` rewrites the table between the ``refusals`` markers;
``--check`` exits 1 when the doc differs (tests/unit/test_policy.py runs the same check).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from counters.store.tables import refusals_table as table  # noqa: E402
from scripts.generated_block import Block  # noqa: E402

DOC = ROOT / "docs" / "regions.md"
BLOCK = Block(
    DOC,
    "<!-- refusals: generated from the counters/store/*.py TABLEs by scripts/refusals_table.py -->",
    "<!-- /refusals -->",
    table,
    "docs/regions.md's what-each-mode-refuses table differs from the counters/store/*.py TABLEs: run python scripts/refusals_table.py",
)
rendered = BLOCK.rendered

if __name__ == "__main__":
    raise SystemExit(BLOCK.main(sys.argv[1:]))
