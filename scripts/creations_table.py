"""docs/regions.md's "Creations" table, rendered from the store modules' rules (counters.store.creation).

``python scripts/creations_table.py`` rewrites the table between the ``creations`` markers;
``--check`` exits 1 when the doc differs (tests/unit/test_creation_rules.py runs the same check).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "counters"))

from counters.store.creation import table  # noqa: E402

DOC = ROOT / "docs" / "regions.md"
BEGIN, END = "<!-- creations: generated from counters/store/*.py CREATIONS by scripts/creations_table.py -->", "<!-- /creations -->"


def rendered(text: str) -> str:
    """``text`` with its creations block replaced by the table the store modules declare."""
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
            print("docs/regions.md's creations table differs from the store modules: run python scripts/creations_table.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
