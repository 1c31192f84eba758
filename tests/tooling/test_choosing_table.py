"""docs/choosing.md's table is what the code declares and what the cited pages measure."""

from scripts import choosing_table
from scripts.choosing_table import DOC, ROWS, broken_sources, rendered


def test_the_choosing_table_is_current() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/choosing_table.py"


def test_every_figure_is_still_said_by_its_source_page() -> None:
    assert broken_sources() == []


def test_every_reservation_approach_has_a_row() -> None:
    assert {row.approach for row in ROWS if row.approach} == set(choosing_table.REGISTRY)


def test_dollars_are_the_units_at_on_demand_prices() -> None:
    crt = next(row for row in ROWS if row.approach == "crt")
    assert choosing_table.dollars(crt) == "$1.250"  # 2 WCU x $0.625 per million
