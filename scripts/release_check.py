"""Before a release of `tally-counters`: the package version, CHANGELOG.md's top entry and (in the
release workflow) the tag agree. `python scripts/release_check.py [--tag v0.1.0]`; exits 1 naming
what disagrees. The version has one source, layers/counters/counters/__init__.py's `__version__`
(the build backend reads it; layers/counters/pyproject.toml declares it dynamic)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
VERSION_FILE = ROOT / "layers" / "counters" / "counters" / "__init__.py"

# Keep a Changelog 1.1.0: "## [Unreleased]" first (optional), then "## [1.2.3] - 2026-11-27".
_ENTRY = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?\s*$", re.MULTILINE)


def package_version(path: Path = VERSION_FILE) -> str:
    """`__version__` read as text (no import: the release job has no dependencies installed)."""
    found = re.search(r'^__version__ = "([^"]+)"$', path.read_text(), re.MULTILINE)
    if not found:
        raise ValueError(f'no __version__ = "..." line in {path}')
    return found[1]


def released_versions(text: str) -> list[tuple[str, str | None]]:
    """The entries of a changelog, top first, as (version, date); "Unreleased" left out."""
    return [(m["version"], m["date"]) for m in _ENTRY.finditer(text) if m["version"] != "Unreleased"]


def problems(changelog: str, version: str, tag: str | None = None) -> list[str]:
    found = []
    entries = released_versions(changelog)
    if not entries:
        found.append("CHANGELOG.md has no released entry (## [x.y.z] - YYYY-MM-DD)")
    else:
        top, date = entries[0]
        if top != version:
            found.append(f"CHANGELOG.md's top entry is {top}, the package is {version}: add the entry for {version}")
        if date is None:
            found.append(f"CHANGELOG.md's entry {top} has no date (## [{top}] - YYYY-MM-DD)")
    if tag is not None and tag != f"v{version}":
        found.append(f"the tag is {tag}, the package is {version}: tag v{version}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/release_check.py")
    parser.add_argument("--tag", help="the release tag (the workflow passes GITHUB_REF_NAME)")
    args = parser.parse_args(argv)
    version = package_version()
    found = problems(CHANGELOG.read_text(), version, args.tag)
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"tally-counters {version}: CHANGELOG.md and {'the tag' if args.tag else 'the package'} agree")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
