"""counters.core.caller and counters.http.auth: who the caller is (claims only), and what each rule lets them do."""

from __future__ import annotations

from typing import Any

import pytest

from counters.core.caller import Caller, ledger_owner
from counters.core.errors import Forbidden, Unauthorized
from counters.http.auth import COGNITO, NONE, caller_from_event, parse_groups
from tests.conftest import api_event, invoke


def with_claims(claims: dict[str, str] | None) -> dict[str, Any]:
    event = api_event("PUT", "/posts/p1/likes/alice")
    if claims is not None:
        event["requestContext"]["authorizer"] = {"claims": claims}
    return event


@pytest.mark.parametrize(
    ("raw", "groups"),
    [
        ("admin", {"admin"}),  # REST API, one group
        ("[admin ops]", {"admin", "ops"}),  # HTTP API JWT authorizer form: whitespace never is in a name
        ("[ops  admin\tdev]", {"ops", "admin", "dev"}),
        (["admin", "ops"], {"admin", "ops"}),  # a real list: exact names
        ("", set()),
        (None, set()),
        (7, set()),
    ],
)
def test_groups_as_api_gateway_flattens_them(raw: Any, groups: set[str]) -> None:
    assert parse_groups(raw) == groups


@pytest.mark.parametrize(
    "raw",
    [
        "ops,admin",  # one group named "ops,admin" - or, on the REST API, two groups: it cannot tell
        "admin,ops",
        "admin,",
        ",admin",
        "[admin]",  # one group named "[admin]" (a single HTTP API group is ambiguous with it)
        "[admin",
        "admin]",
        "[ops,admin]",
        "[ops admin",  # not the bracketed form: whitespace, so not one name either
        "ops admin",
        " admin",
        ["ops,admin"],
        ["[admin]"],
        ["admin "],
    ],
)
def test_a_group_name_with_commas_or_brackets_never_grants_admin(raw: Any) -> None:
    assert "admin" not in parse_groups(raw)
    caller = caller_from_event(with_claims({"sub": "mallory", "cognito:groups": raw}), mode=COGNITO)  # type: ignore[dict-item]
    assert not caller.is_admin
    with pytest.raises(Forbidden):
        caller.require_admin("create a resource")


def test_the_caller_is_the_sub_claim_never_the_path() -> None:
    caller = caller_from_event(with_claims({"sub": "bob", "cognito:groups": "ops"}), mode=COGNITO)
    assert (caller.user_id, caller.is_admin, caller.restricted_to) == ("bob", False, "bob")
    with pytest.raises(Forbidden):
        caller.require_self("alice", "like")  # the path says alice; the token says bob


def test_cognito_mode_without_claims_is_unauthorized() -> None:
    for claims in (None, {}, {"sub": ""}):
        with pytest.raises(Unauthorized):
            caller_from_event(with_claims(claims), mode=COGNITO)


def test_none_mode_enforces_nothing() -> None:
    caller = caller_from_event(with_claims({"sub": "bob"}), mode=NONE)  # claims are ignored when auth is off
    assert (caller.enforced, caller.is_admin, caller.owner, caller.restricted_to) == (False, True, None, None)
    caller.require_self("alice", "like")
    caller.require_owner("alice", "release")
    caller.require_admin("create")


def test_admins_read_anything_but_act_only_as_themselves() -> None:
    admin = Caller("root", frozenset({"admin"}))
    admin.require_owner("alice", "read")
    admin.require_admin("create")
    with pytest.raises(Forbidden):
        admin.require_self("alice", "like")
    user = Caller("alice")
    user.require_owner("alice", "read")
    for check in (lambda: user.require_owner("bob", "read"), lambda: user.require_owner(None, "read"), lambda: user.require_admin("x")):
        with pytest.raises(Forbidden):
            check()


def test_a_ledger_belongs_to_its_first_segment() -> None:
    assert ledger_owner("alice") == ledger_owner("alice.savings") == "alice"
    assert ledger_owner("alicex") == "alicex"
    Caller("alice").require_ledger("alice.savings", "read")
    with pytest.raises(Forbidden):
        Caller("alice").require_ledger("alicex.savings", "read")


def test_a_handler_refuses_a_request_without_claims_before_routing(load_function: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    likes = load_function("LikesFunction", "no-such-table", params={"AuthMode": COGNITO})  # nothing is read or written: no table needed
    status, body = invoke(likes, with_claims(None))
    assert (status, body["error"]) == (401, "unauthorized")
    status, body = invoke(likes, with_claims({"sub": "bob"}))
    assert (status, body["error"]) == (403, "forbidden")


def test_an_unknown_auth_mode_fails_loudly(load_function: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    likes = load_function("LikesFunction", "no-such-table")
    monkeypatch.setenv("AUTH_MODE", "JWT")
    likes.function.configure(None)  # the next invocation reads the (misconfigured) environment
    status, body = invoke(likes, with_claims(None))
    assert status == 500 and "JWT" not in str(body)  # a misconfigured stage fails closed, without detail
