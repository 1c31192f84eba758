"""The README's "Routes at a glance" table lists every API route of template.yaml under its
function, and no route the template lacks (issue 27 item 10: the transfer routes were missing)."""

from __future__ import annotations

import re

from devstack.template import ROOT, read_stack

# One route: `GET /path`; routes sharing a path: `GET`/`PUT`/`DELETE /path`.
_ROUTE = re.compile(r"((?:`[A-Z]+`/)*)`([A-Z]+) (/[^`\s]*)`")


def readme_routes(text: str) -> set[tuple[str, str, str]]:
    table = text.split("Routes at a glance", 1)[1].split("\n\n", 2)[1]
    found = set()
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) < 2 or not re.fullmatch(r"[A-Za-z]+Function", cells[0]):
            continue
        for more, method, path in _ROUTE.findall(cells[1]):
            for verb in [*re.findall(r"`([A-Z]+)`/", more), method]:
                found.add((verb, path, cells[0]))
    return found


def test_the_parser_reads_shared_paths() -> None:
    text = "Routes at a glance:\n\n| function | routes |\n|---|---|\n| XFunction | `GET`/`PUT /a/{b}`, `POST /c` (admin) |\n\nafter"
    assert readme_routes(text) == {("GET", "/a/{b}", "XFunction"), ("PUT", "/a/{b}", "XFunction"), ("POST", "/c", "XFunction")}


def test_the_readme_lists_every_template_route() -> None:
    template = {(r.method, r.path, r.function) for r in read_stack("readme").routes}
    readme = readme_routes((ROOT / "README.md").read_text())
    assert template - readme == set(), "routes of template.yaml missing from the README's table"
    assert readme - template == set(), "routes in the README's table that template.yaml does not have"
