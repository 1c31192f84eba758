"""docs/regions.md's "Who writes what" table, rendered from the store modules' writer rules
(``WRITERS``, counters.store.writers).

``python scripts/writers_table.py`` rewrites the table between the ``writers`` markers;
``--check`` exits 1 when the doc differs (tests/unit/test_writer_rules.py runs the same check).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from counters.store.writers import table  # noqa: E402
from scripts.generated_block import Block  # noqa: E402

DOC = ROOT / "docs" / "regions.md"
BLOCK = Block(
    DOC,
    "<!-- writers: generated from counters/store/*.py WRITERS by scripts/writers_table.py -->",
    "<!-- /writers -->",
    table,
    "docs/regions.md's who-writes-what table differs from the store modules: run python scripts/writers_table.py",
)
rendered = BLOCK.rendered

if __name__ == "__main__":
    raise SystemExit(BLOCK.main(sys.argv[1:]))
