"""docs/proof-results.md is what ``make proof`` writes: a header naming the run, then its tables."""

from pathlib import Path

from proof.__main__ import DOCS_RESULTS, results_page

ROOT = Path(__file__).resolve().parents[2]


def test_results_page_names_commit_date_seed_stress_and_command() -> None:
    page = results_page(
        "| scenario | verdict |\n|---|---|\n| likes | holds |\n",
        commit="abc1234",
        dirty=True,
        date="2026-11-23 06:07",
        seed=7,
        stress="none",
        command="python -m proof --seed 7",
    )
    assert page.startswith("# Proof results\n")
    assert "| `abc1234` + uncommitted changes | 2026-11-23 06:07 | 7 | none | `python -m proof --seed 7` |" in page
    assert "[proof.md](proof.md)" in page
    assert page.endswith("| likes | holds |\n")


def test_the_committed_page_has_the_generated_header() -> None:
    assert DOCS_RESULTS == ROOT / "docs" / "proof-results.md"
    text = DOCS_RESULTS.read_text()
    header = results_page("", commit="x", dirty=False, date="d", seed=0, stress="s", command="c").split("| commit |")[0]
    assert text.startswith(header)
    assert "| commit | date (UTC) | seed | stress | command |" in text
