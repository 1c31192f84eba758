"""scripts/check_site.py's verdicts on pages as the browser reports them (no browser here: the
checks are a pure function of what each page showed; `make docs` runs them on the built site)."""

from pathlib import Path

import pytest

from scripts.check_site import Page, problems, site_pages

ORIGIN = "http://127.0.0.1:1"
PROSE = "A page with enough prose to count as a page a reader can use, and more words than that. " * 2


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for page in ("", "likes", "api/core"):
        (tmp_path / page).mkdir(parents=True, exist_ok=True)
        (tmp_path / page / "index.html").write_text("<html></html>")
    (tmp_path / "openapi.json").write_text("{}")
    (tmp_path / "404.html").write_text("<html></html>")
    return tmp_path


def pages(*extra: Page) -> dict[str, Page]:
    found = {
        "/": Page("/", PROSE, [f"{ORIGIN}/likes/#hot-posts", f"{ORIGIN}/openapi.json", "https://aws.amazon.com/dynamodb/"]),
        "/likes/": Page("/likes/", PROSE, [f"{ORIGIN}/"], {"hot-posts"}),
    }
    return found | {page.path: page for page in extra}


def test_a_sound_site_has_no_problems(site: Path) -> None:
    assert site_pages(site) == ["/", "/api/core/", "/likes/"]
    assert problems(pages(Page("/api/core/", PROSE)), site, ORIGIN) == []


def test_a_link_to_a_missing_page_is_broken(site: Path) -> None:
    found = problems(pages(Page("/api/core/", PROSE, [f"{ORIGIN}/nowhere/"])), site, ORIGIN)
    assert found == ["/api/core/: a link to /nowhere/, which the site does not have"]


def test_a_link_to_a_missing_anchor_is_broken(site: Path) -> None:
    found = problems(pages(Page("/api/core/", PROSE, [f"{ORIGIN}/likes/#cold-posts"])), site, ORIGIN)
    assert found == ["/api/core/: a link to /likes/#cold-posts, which that page has no anchor for"]


def test_an_empty_page_is_a_problem(site: Path) -> None:
    assert problems(pages(Page("/api/core/", "  counters.core  ")), site, ORIGIN) == ["/api/core/: an empty page (13 characters of text)"]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Returns a :class:`Result` of the call.", "a reST role"),
        ("See [Outcome][counters.core.outcome.Outcome] for the five.", "an unresolved cross-reference"),
        ("The table is {{ table }} here.", "a raw {{"),
        ("<!-- docs: skip aws --> then the block", "a docs marker shown as text"),
    ],
)
def test_markup_left_in_the_text_is_a_problem(site: Path, text: str, what: str) -> None:
    found = problems(pages(Page("/api/core/", PROSE + text)), site, ORIGIN)
    assert len(found) == 1 and found[0].startswith(f"/api/core/: {what} left in the text")
