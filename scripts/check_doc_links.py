"""Every relative Markdown link in README.md and docs/*.md resolves: the file exists and a
``#fragment`` names a heading of the target page (GitHub's anchor rules). Exits 1 and lists
the broken ones otherwise. ``python scripts/check_doc_links.py``; a unit test runs it too."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        if not line.startswith("#"):
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken(root: Path = ROOT) -> list[str]:
    problems = []
    for page in pages(root):
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = page.relative_to(root)
            if not dest.exists():
                problems.append(f"{where}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: {target} (no heading #{fragment})")
    return problems


if __name__ == "__main__":
    bad = broken()
    for line in bad:
        print(line)
    print(f"{len(bad)} broken relative links in {len(pages())} pages")
    sys.exit(1 if bad else 0)
