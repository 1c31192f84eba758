"""Every relative Markdown link in README.md and docs/*.md resolves: the file exists and a
``#fragment`` names a heading of the target page (GitHub's anchor rules). Exits 1 and lists
the broken ones otherwise. ``python scripts/check_doc_links.py``; a unit test runs it too.

A page of docs/ named in prose (``docs/likes.md``) is a link, not plain text (:func:`plain_mentions`):
on the site plain text is a dead end. Text a tool writes is exempt (a generated block between
``<!-- name: generated ... -->`` and ``<!-- /name -->``, and the pages ``make bench`` and
``make proof`` write whole), since the next run would write it again."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)
LINKED = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\([^)]*\)")
GENERATED = re.compile(r"<!-- ([\w-]+): generated.*?<!-- /\1 -->", re.S)
MENTION = re.compile(r"(?<![\w/.-])docs/([A-Za-z0-9_-]+\.md)")
WRITTEN_BY_TOOLS = {"bench-results.md", "proof-results.md"}
# How the project's own work was tracked ("issue 28, item 4", "turn 4", "stop 36"): a reader of the
# docs or the docstrings has none of it; say the fact instead.
PROCESS = re.compile(r"\b[Ii]ssue #?\d+|\b[Tt]urn \d+\b|\b[Ss]top \d+\b")


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


def plain_mentions(root: Path = ROOT) -> list[str]:
    """Pages of docs/ named as plain text (outside links, code blocks and generated text)."""
    found = []
    for page in pages(root):
        if page.name in WRITTEN_BY_TOOLS:
            continue
        text = LINKED.sub("", GENERATED.sub("", FENCE.sub("", page.read_text())))
        for line in text.splitlines():
            found += [
                f"{page.relative_to(root)}: docs/{name} is plain text: make it a link"
                for name in MENTION.findall(line)
                if (root / "docs" / name).exists()
            ]
    return found


def docstring_mentions(root: Path = ROOT) -> list[str]:
    """Pages of docs/ named as plain text in the package's docstrings, which the API reference
    renders: ``[docs/likes.md](../likes.md)`` there (relative to docs/api/). Code spans aside."""
    found = []
    for path in sorted((root / "layers" / "counters" / "counters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                text = re.sub(r"``.*?``", "", LINKED.sub("", node.value.value), flags=re.S)
                found += [
                    f"{path.relative_to(root)}:{node.value.lineno}: docs/{name} is plain text: make it a link"
                    for name in MENTION.findall(text)
                ]
    return found


def process_references(root: Path = ROOT) -> list[str]:
    """Internal process references in what users read: the docs, the README, the docstrings."""
    files = [*pages(root), *sorted((root / "docs" / "api").glob("*.md"))]
    files += sorted(p for d in ("layers", "functions") for p in (root / d).rglob("*.py"))
    return [
        f"{path.relative_to(root)}:{n}: {hit!r} is an internal reference: say the fact instead"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for hit in PROCESS.findall(line)
    ]


if __name__ == "__main__":
    bad = broken() + plain_mentions() + docstring_mentions() + process_references()
    for line in bad:
        print(line)
    print(f"{len(bad)} broken relative links in {len(pages())} pages")
    sys.exit(1 if bad else 0)
