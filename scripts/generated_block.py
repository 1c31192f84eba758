"""A generated block of a doc: the text between two markers, rendered from code (the store's tables).

``scripts/design_table.py`` and ``scripts/writers_table.py`` each name their doc, markers and table;
``--check`` exits 1 when the doc differs (their unit tests run the same check)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Block:
    doc: Path
    begin: str
    end: str
    table: Callable[[], str]
    stale: str
    """What ``--check`` prints when the doc differs (the command that fixes it)."""

    def rendered(self, text: str) -> str:
        """``text`` with its block replaced by the table the code declares."""
        head, sep, rest = text.partition(self.begin)
        if not sep:
            raise SystemExit(f"{self.doc}: no {self.begin!r} marker")
        _, sep, tail = rest.partition(self.end)
        if not sep:
            raise SystemExit(f"{self.doc}: no {self.end!r} marker")
        return f"{head}{self.begin}\n{self.table()}\n{self.end}{tail}"

    def main(self, argv: list[str]) -> int:
        text = self.doc.read_text()
        new = self.rendered(text)
        if "--check" in argv:
            if new != text:
                print(self.stale)
                return 1
            return 0
        self.doc.write_text(new)
        return 0
