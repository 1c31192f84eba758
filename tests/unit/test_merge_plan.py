"""The merge's plan of a user's items on a grown post (counters.services.likes.merging.plan): which
item is kept, what it takes, what the count moves by, and the pointer in the user's lane.

Pure: the plan of items as read. Its transaction, against DynamoDB Local:
tests/integration/test_spread_merge.py and tests/integration/test_spread_settle.py.
"""

from __future__ import annotations

import pytest

from counters.services.likes.merging import SettlePayload, plan
from counters.store.like_merges import LikeItem
from counters.store.toggles import Stamp, StateItem


def key(lane: int) -> dict[str, str]:
    return {"PK": f"POST#p#S{lane}", "SK": "LIKE#USER#u"}


def item(lane: int, on: bool, at: int) -> LikeItem:
    return LikeItem(key(lane), StateItem(on, Stamp(at, f"r{at}"), f"r{at}"))


def pointer(lane: int, to: int) -> LikeItem:
    return LikeItem(key(lane), StateItem(False, None, None, points_to=to))


def test_a_single_item_in_the_users_lane_needs_nothing() -> None:
    assert plan([item(11, True, 1)], key(11)) is None


def test_a_single_item_in_an_older_lane_gets_a_pointer_in_the_users_lane_and_the_count_stays() -> None:
    found = plan([item(3, True, 1)], key(11))
    assert found is not None and found.retired == [] and found.delta == 0
    assert found.pointer == (key(11), None)  # nothing there: put where nothing is


def test_a_pointer_already_naming_the_kept_item_needs_nothing() -> None:
    assert plan([item(3, True, 1), pointer(11, 3)], key(11)) is None


def test_a_pointer_naming_another_lane_is_repointed_conditioned_on_it_as_read() -> None:
    stale = pointer(27, 11)
    found = plan([item(3, False, 5), stale], key(27))
    assert found is not None and found.pointer == (key(27), stale) and found.kept.key == key(3)


@pytest.mark.parametrize(
    ("old", "new", "delta"),
    [(True, True, -1), (True, False, -1), (False, True, 0), (False, False, 0)],
    ids=["like+like", "like+newer-unlike", "tombstone+newer-like", "tombstone+tombstone"],
)
def test_a_duplicate_in_the_users_lane_is_replaced_by_the_pointer_and_the_latest_state_kept(old: bool, new: bool, delta: int) -> None:
    older, newer = item(3, old, 1), item(11, new, 2)
    found = plan([older, newer], key(11))
    assert found is not None and found.kept == older and found.latest == newer and found.retired == [newer]
    assert found.pointer == (key(11), newer)  # the pointer takes the retired item's place, conditioned on it
    # the count goes from the items' states summed (each counted its own delta) to the latest's
    assert found.delta == delta == int(new) - int(old) - int(new)


def test_without_the_users_lane_the_plan_is_the_merge_into_the_oldest_alone() -> None:
    found = plan([item(3, True, 1), item(11, True, 2)])
    assert found is not None and found.pointer is None and found.delta == -1


def test_pointers_alone_plan_nothing() -> None:
    assert plan([pointer(11, 3)], key(11)) is None


@pytest.mark.parametrize("spread", [8, 12, 512, "16", True])
def test_a_sweep_names_a_grown_spread(spread: object) -> None:
    with pytest.raises(Exception, match="invalid spread"):
        SettlePayload("p", spread)  # type: ignore[arg-type]
    assert SettlePayload("p", 32).spread == 32


def test_a_sweep_is_queued_once_then_again_after_enough_batches_meet_the_post_unsettled() -> None:
    """The aggregator's side (Merges.sweeps/sent): a sweep lost to the DLQ is queued again while
    likes flow, counted in batches, never timed; one not taken by the queue is asked again next batch."""
    from counters.services.likes.merging import SWEEP_AGAIN_AFTER, Merges

    merges = Merges("t")
    merges.unsettled.add(("p", 16))
    (first,) = merges.sweeps()
    assert first.payload == {"postId": "p", "spread": 16}
    merges.unsettled.add(("p", 16))
    assert [c.payload for c in merges.sweeps()] == [{"postId": "p", "spread": 16}]  # not taken yet: asked again
    merges.sent(first)
    for _ in range(SWEEP_AGAIN_AFTER):
        merges.unsettled.add(("p", 16))
        assert merges.sweeps() == []
    merges.unsettled.add(("p", 16))
    assert [c.payload for c in merges.sweeps()] == [{"postId": "p", "spread": 16}]
    assert merges.sweeps() == []  # only posts met unsettled by the last examinations
