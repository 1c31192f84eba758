"""docs/regions.md's "Who writes what" table, rendered from the store modules' writer rules
(``WRITERS``, counters.store.writers).

``python scripts/writers_table.py`` rewrites the table between the ``writers`` markers;
``--check`` exits 1 when the doc differs (tests/unit/test_writer_rules.py runs the same check).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "counters"))

from counters.store.writers import table  # noqa: E402

DOC = ROOT / "docs" / "regions.md"
BEGIN, END = "<!-- writers: generated from counters/store/*.py WRITERS by scripts/writers_table.py -->", "<!-- /writers -->"


def rendered(text: str) -> str:
    """``text`` with its writers block replaced by the table the store modules declare."""
    head, sep, rest = text.partition(BEGIN)
    if not sep:
        raise SystemExit(f"{DOC}: no {BEGIN!r} marker")
    _, sep, tail = rest.partition(END)
    if not sep:
        raise SystemExit(f"{DOC}: no {END!r} marker")
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    new = rendered(text)
    if "--check" in argv:
        if new != text:
            print("docs/regions.md's who-writes-what table differs from the store modules: run python scripts/writers_table.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
