"""A storm of likes grows a hot post's spread, and every like is still counted once (issue 26 part 1).

Against DynamoDB Local and its stream, with the real LikeAggregatorFunction handler, the likes
from a few threads under ``testkit.limits.LimitModel``. The pressure is forced, not timed: the
model's clock is frozen, so a key's bucket never refills (1 WCU per key at scale 1000: each lane
takes one write, then throttles every later one), and the growth trigger's window
(``PRESSURE_WINDOW_MS``) is one instant. So the post grows after the same likes however fast or
slow the machine is; bench/spread.py measures the rates.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from counters.core.errors import ContentionError
from counters.services.likes import Likes
from counters.store.post_items import FIRST_SPREAD
from devstack.streams import StreamPoller
from testkit.limits import LimitModel
from tests.integration.test_hot_likes import tally
from tests.integration.test_mode_switch import agg_fn, meta, poller  # noqa: F401 (the fixtures)
from tests.integration.test_spread_growth import FAST

THREADS = 4
MOST = 400  # likes tried at most: the post grows within the first few dozen (4 of 8 lanes throttled twice)


def like_items(ddb: Any, table: str) -> Counter[str]:
    """Like items per user, over every lane (pointers aside: they are no like): the truth about duplicates."""
    found: Counter[str] = Counter()
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        found.update(
            i["SK"]["S"].removeprefix("LIKE#USER#") for i in page["Items"] if i["SK"]["S"].startswith("LIKE#") and "livesIn" not in i
        )
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_likes_from_threads_under_throttling_grow_the_post_and_each_is_counted_once(
    table: str,
    layer_client: Any,
    ddb: Any,
    poller: StreamPoller,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from counters.services.likes import toggling

    frozen = toggling.now_ms()
    monkeypatch.setattr(toggling, "now_ms", lambda: frozen)  # the trigger's window: one instant, whatever the machine's speed
    likes = Likes(table, retry=FAST, max_spread=64)
    likes.posts.create_post(author_id="a", body="b", post_id="p1", mode="hot")
    likes.posts.like_state("p1", "nobody")  # the post's spread read and cached before the model
    model = LimitModel(layer_client, scale=1000, clock=lambda: 0.0)  # 1 WCU, 3 RCU per key, never refilled
    lock = threading.Lock()
    next_user = iter(range(MOST))
    liked: list[str] = []
    refused: list[str] = []  # ContentionError: the API's documented 503 (202 with the retry queue)
    other: list[BaseException] = []

    def storm() -> None:
        while (likes.posts.info("p1").spread or 0) == FIRST_SPREAD:
            with lock:
                n = next(next_user, None)
            if n is None:
                return
            try:
                likes.toggling.like("p1", f"u{n}")
                outcome = liked
            except ContentionError:
                outcome = refused
            except Exception as exc:  # noqa: BLE001 - any other answer fails the test below
                with lock:
                    other.append(exc)
                return
            with lock:
                outcome.append(f"u{n}")

    threads = [threading.Thread(target=storm) for _ in range(THREADS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        model.detach()
    assert not other, other
    spread = int(meta(ddb, table)["spread"]["N"])
    assert spread > FIRST_SPREAD, (
        f"{len(liked) + len(refused)} likes never grew the post ({sum(model.throttles.values())} throttles): "
        "with buckets that never refill and a frozen window this is the trigger, not the machine"
    )
    assert liked and refused and sum(model.throttles.values()) >= len(refused)
    poller.poll_once()
    items = like_items(ddb, table)
    assert set(items) == set(liked), "an acknowledged like is missing, or a refused one was written"
    assert max(items.values()) == 1, [u for u, n in items.items() if n > 1]
    assert tally(ddb, table, "p1") == len(liked)
    a = likes.audits.audit("p1")
    assert (a.stored, a.counted) == (len(liked), len(liked))
    listed = [liker["userId"] for liker in likes.posts.likers("p1", limit=50).user_ids]
    assert sorted(listed) == sorted(liked)
