"""The HTTP proof's client re-sends ``POST /audits`` often enough that the scenario's own fault rates
cannot exhaust it (issue 28: 20 re-sends failed a CI run, about once in 20 runs).

The bound is computed from the proof's constants, so lowering the re-sends or raising the fault
rates without the other fails here, not in a CI run under load.
"""

from __future__ import annotations

from proof import http


def test_the_audit_resends_outlast_the_scenarios_faults() -> None:
    assert http.audit_failure_bound() < 1e-12
    assert http.audit_failure_bound(20) > 1e-3  # what failed: 20 re-sends were not enough


def test_one_audit_mostly_fails_under_these_faults_so_the_bound_is_not_vacuous() -> None:
    assert 0.5 < http.audit_failure_bound(1) < 1.0
