"""The proof checker must catch what it claims to catch."""

from __future__ import annotations

from proof.checker import History


def history(statuses: list[tuple[int, str]]) -> History:
    h = History(base=0, floor=0, ceiling=10)
    for i, (delta, status) in enumerate(statuses):
        h.complete(h.invoke(f"i{i}", delta), status)
    return h


def test_exact_counter_holds() -> None:
    h = history([(1, "ok"), (1, "ok"), (1, "fail"), (1, "unknown")])
    for final in (2, 3):  # the unknown intent may or may not have applied
        report = h.check("x", final, documented="exact")
        assert (report.over, report.under, report.verdict) == (0, 0, "holds")


def test_over_and_under_counts_are_measured() -> None:
    h = history([(1, "ok"), (1, "ok"), (1, "unknown")])
    assert h.check("x", 4, documented="exact").over == 1
    assert h.check("x", 1, documented="exact").under == 1
    assert h.check("x", 4, documented="exact").verdict == "VIOLATED"
    assert h.check("x", 4, documented="over").verdict == "holds"
    assert h.check("x", 4, documented="under").verdict == "VIOLATED"
    assert h.check("x", 1, documented="under").verdict == "holds"


def test_thresholds_and_impossible_reads() -> None:
    h = History(base=0, floor=0, ceiling=2)
    op = h.invoke("a", 1)
    h.complete(op, "ok")
    h.read(5, op.returned + 1)  # nothing allowed the counter to reach 5
    report = h.check("x", 1, documented="exact")
    assert report.bad_reads == 1 and report.breaches == 1 and report.verdict == "VIOLATED"


def test_negative_deltas_widen_the_window_downwards() -> None:
    h = History(base=5, floor=0)
    h.complete(h.invoke("a", -1), "unknown")
    assert h.check("x", 4, documented="exact").verdict == "holds"
    assert h.check("x", 5, documented="exact").verdict == "holds"
    assert h.check("x", 3, documented="exact").under == 1
