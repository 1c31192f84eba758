"""The proof's linearizability verdict sees a layer guard removed: occ's ambiguity rule switched
off, the seeded occ row (proof.scenarios.occ_late_scenario: one client, late writes, a rival
writer after each) is NOT LINEARIZABLE; with the rule on it is linearizable."""

from __future__ import annotations

from typing import Any

import pytest

from proof.scenarios import occ_late_scenario


@pytest.mark.parametrize("guard", ["on", "off"])
def test_occ_row_on_a_seeded_schedule_is_linearizable_only_with_the_guard(
    guard: str, ddb: Any, layer_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from counters.primitives.approaches import occ as occ_module

    if guard == "off":
        monkeypatch.setattr(occ_module, "may_have_landed", lambda _report: False)
    (report,) = occ_late_scenario(ddb, seed=7, clients=1, size=30)
    assert report.linearizable is not None
    assert not report.unexercised, report.notes
    want = "linearizable" if guard == "on" else "NOT LINEARIZABLE"
    assert report.linearizable.result == want, (report.notes, report.final, report.acknowledged)
    assert report.verdict == ("holds" if guard == "on" else "VIOLATED")
