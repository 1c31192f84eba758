"""The hot-post proof's own logic (proof/hot.py): predicted answers, the latest-wins check, like
items grouped by post in either layout."""

from __future__ import annotations

from proof.hot import Intent, Intents, expected_answers, like_owner, likes_by_post


def test_a_like_replayed_after_a_later_unlike_is_predicted_stale() -> None:
    assert expected_answers([(True, 1), (False, 2)], [1, 0]) == ["ok", "stale"]
    assert expected_answers([(True, 0), (True, 1), (False, 2)], [0, 2, 1]) == ["ok", "ok", "stale"]
    assert expected_answers([(True, 0), (False, 1), (True, 2)], [0, 2, 1]) == ["ok", "ok", "stale"]
    # an older request asking for the state already there is "ok" (already set); a redelivery too
    assert expected_answers([(True, 0), (True, 1)], [1, 0, 1]) == ["ok", "ok", "ok"]


def _intents(*specs: tuple[bool, int, str]) -> Intents:
    intents = Intents(likes=None)
    intents.all = [Intent("p", "u", liked, at, request_id=f"r{at}", status=status) for liked, at, status in specs]
    return intents


def _state(liked: bool | None) -> dict[str, dict[str, dict[str, object]]]:
    if liked is None:
        return {}
    return {"p": {"u": {"PK": "POST#p#S1", "SK": "LIKE#USER#u", "postId": "p", "userId": "u", "liked": liked}}}


def test_the_final_state_must_be_the_latest_recorded_requests() -> None:
    assert _intents((True, 1, "ok"), (False, 2, "ok")).check(_state(False))[0] == 0
    assert _intents((True, 1, "ok"), (False, 2, "ok")).check(_state(True))[0] == 1
    assert _intents((True, 1, "ok"), (False, 2, "unknown")).check(_state(True))[0] == 0  # the unlike may not have landed
    assert _intents((True, 1, "ok"), (False, 2, "unknown")).check(_state(False))[0] == 0
    assert _intents((True, 1, "stale"), (False, 2, "unknown")).check(_state(True))[0] == 1  # something newer decided
    assert _intents((False, 1, "unknown")).check(_state(None))[0] == 0
    assert _intents((True, 1, "ok")).check(_state(None))[0] == 1


def test_like_items_are_grouped_by_post_in_either_layout() -> None:
    old = {"PK": "POST#p1", "SK": "LIKE#USER#u1", "userId": "u1"}
    hot = {"PK": "POST#p2#S3", "SK": "LIKE#USER#u1", "userId": "u1", "postId": "p2"}
    hot_without_post_id = {"PK": "POST#p3#S0", "SK": "LIKE#USER#u2", "userId": "u2"}
    assert like_owner(old) == ("p1", "u1") and like_owner(hot) == ("p2", "u1") and like_owner(hot_without_post_id) == ("p3", "u2")
    assert like_owner({"PK": "POST#p1", "SK": "META"}) is None
    grouped, problems = likes_by_post([old, hot, {**hot, "PK": "POST#p2"}])
    assert set(grouped) == {"p1", "p2"} and len(problems) == 1  # one user's like of p2 in two layouts
