"""The README and docs/ link only to files and headings that exist."""

from scripts.check_doc_links import broken


def test_every_relative_link_in_the_docs_resolves() -> None:
    assert broken() == []
