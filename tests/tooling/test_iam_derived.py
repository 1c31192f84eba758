"""Each function's DynamoDB/SQS actions, derived from its code, against what template.yaml grants.

The analysis is tools/iam (its docstring says what is derived, how, and what is compared; its
own tests are in test_iam_tool.py). Here: the assertions on the real template and code.
"""

from __future__ import annotations

from typing import Any

import pytest

from tools.iam.compare import Stack

STACK = Stack.load()
# Disagreements found, kept visible until the template is fixed (strict: a fix makes them fail).
KNOWN_GAPS: dict[str, tuple[type[Exception], str]] = {}  # function -> (error, why): a gap the template still has


def _param(name: str) -> Any:
    if name in KNOWN_GAPS:
        raises, reason = KNOWN_GAPS[name]
        return pytest.param(name, marks=pytest.mark.xfail(raises=raises, strict=True, reason=reason))
    return name


@pytest.mark.parametrize("name", [_param(n) for n in STACK.functions()])
def test_policies_grant_exactly_what_the_code_performs(name: str) -> None:
    STACK.check(name)


@pytest.mark.parametrize("name", STACK.functions())
def test_condition_check_is_granted_only_where_code_builds_condition_checks(name: str) -> None:
    _, kinds = STACK.derivation(name)
    if "ConditionCheck" not in kinds:
        assert "dynamodb:ConditionCheckItem" not in STACK.granted(name)


def test_every_function_derives_some_action() -> None:
    """An empty derivation would mean the analysis lost the code, not that it needs nothing."""
    assert all(STACK.derived(name) for name in STACK.functions())


@pytest.mark.parametrize("name", STACK.functions())
def test_every_operation_is_on_a_recognised_client(name: str) -> None:
    """The guard against under-deriving: a call named like a DynamoDB/SQS operation that the
    analysis cannot tie to a client (a new client helper, a boto3 resource) fails here."""
    assert not STACK.unrecognised(name)
