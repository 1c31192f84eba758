"""The README and docs/ link only to files and headings that exist, and name no page of docs/ as plain text."""

from scripts.check_doc_links import broken, docstring_mentions, plain_mentions, process_references


def test_every_relative_link_in_the_docs_resolves() -> None:
    assert broken() == []


def test_every_page_named_in_prose_is_a_link() -> None:
    assert plain_mentions() == []


def test_every_page_named_in_a_docstring_is_a_link() -> None:
    assert docstring_mentions() == []


def test_no_internal_process_reference_in_what_users_read() -> None:
    assert process_references() == []
