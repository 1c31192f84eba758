"""Audit across many posts, repair surgically (issue "Hot posts", step 5).

``Likes.audit_posts`` compares a count with the tally only at settled points (a hot post's: once
the stream's aggregator has applied the audit's probes), and repairs a drift by one write
conditioned on ``tallyRev``/``modeEpoch`` being what they were at the second point: a like
counted since then refuses it. Against DynamoDB Local and its stream, the real aggregator handler.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from counters.core.failures import RetryPolicy
from counters.services.likes import Likes
from counters.services.likes.model import SPREAD
from devstack.streams import StreamPoller
from tests.conftest import api_event, invoke, likes_count
from tests.integration.test_hot_likes import FN, deliver, tally

FAST = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.005)
WAIT_S = 600.0
"""How long an audit waits for the aggregator to apply its probes (the service's default is 8 s):
a hang guard, not a speed bound. On a loaded machine the aggregator's lag has no ceiling, and a
post whose probes were not applied in time is answered ``aggregator_behind``, not settled."""


def unhurried() -> Any:
    """A Lambda context with 15 minutes left (Lambda's longest): the audit's budget is then no race
    with the machine's speed."""
    from devstack.runtime import LambdaContext

    return LambdaContext.for_function("LikesFunction", 512, 900)


@pytest.fixture
def agg_fn(load_function: Any, table: str, layer_client: Any) -> Any:
    from counters.streams import like_aggregator

    return load_function(FN, table, build=lambda s: like_aggregator(table, retry=FAST))


@pytest.fixture
def aggregator(agg_fn: Any, table: str, dynamodb_endpoint: str) -> Iterator[StreamPoller]:
    """The aggregator running from the stream in the background, as deployed."""
    poller = StreamPoller(table, dynamodb_endpoint, {FN: lambda event: ("ok", deliver(agg_fn, event["Records"]))})
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            poller.poll_once()
            stop.wait(0.05)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield poller
    stop.set()
    thread.join()


def corrupt(ddb: Any, table: str, post: str, value: int) -> None:
    """Set the tally behind the layer's back (tallyRev untouched: a real drift, not a like)."""
    ddb.update_item(
        TableName=table,
        Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :n",
        ExpressionAttributeValues={":n": {"N": str(value)}},
    )


def wait_for_tally(ddb: Any, table: str, post: str, value: int) -> None:
    """Until the tally is ``value`` (a hot post's: once the aggregator has applied its likes)."""
    while tally(ddb, table, post) != value:
        threading.Event().wait(0.02)


def posts(likes: Likes, n_standard: int = 2, n_hot: int = 2, users: int = 6) -> list[str]:
    ids = [f"s{i}" for i in range(n_standard)] + [f"h{i}" for i in range(n_hot)]
    for post in ids:
        likes.posts.create_post(author_id="a", body="b", post_id=post, mode="hot" if post.startswith("h") else "standard")
        for u in range(users):
            likes.toggling.like(post, f"u{u}")
        likes.toggling.unlike(post, "u0")
    return ids


def test_many_posts_are_audited_at_settled_points_and_drift_is_repaired(table: str, layer_client: Any, ddb: Any, aggregator: Any) -> None:
    likes = Likes(table, retry=FAST)
    ids = posts(likes)
    for post in ids:
        wait_for_tally(ddb, table, post, 5)
    likes.posts.switch_mode("s1", "hot")
    likes.posts.switch_mode("s1", "standard")  # was hot: audited through probes too
    clean = likes.audits.audit_posts(ids + ["missing"], wait_s=WAIT_S)
    assert [(r.post_id, r.settled, r.drift) for r in clean] == [(p, True, 0) for p in ids] + [("missing", False, None)]
    assert clean[-1].reason == "not_found"
    for post in ids:
        corrupt(ddb, table, post, 42)
    found = likes.audits.audit_posts(ids, wait_s=WAIT_S)
    assert all(r.settled and r.drift == 42 - 5 and not r.repaired for r in found)  # reported, not touched
    assert all(tally(ddb, table, p) == 42 for p in ids)
    repaired = likes.audits.audit_posts(ids, repair=True, wait_s=WAIT_S)
    assert all(r.repaired for r in repaired), [r.public() for r in repaired]
    assert all(tally(ddb, table, p) == likes_count(ddb, table, p) == 5 for p in ids)
    likes.toggling.like("h0", "late")  # the hot tally keeps counting from the repaired value
    assert [r.drift for r in likes.audits.audit_posts(["h0"], wait_s=WAIT_S)] == [0] and likes_count(ddb, table, "h0") == 6


def test_a_hot_post_whose_aggregator_is_behind_is_not_settled(table: str, layer_client: Any) -> None:
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="h0", mode="hot")
    likes.toggling.like("h0", "u1")  # no aggregator runs: the tally is 0, the likes 1 -- lag, not drift
    [result] = likes.audits.audit_posts(["h0"], repair=True, wait_s=0.3)
    assert (result.settled, result.reason, result.drift, result.repaired) == (False, "aggregator_behind", None, False)


class LikesDuring(Likes):
    """Runs ``during()`` at a chosen moment of an audit: in the count, or just before the repair."""

    def __init__(self, *args: Any, moment: str, during: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.moment, self.during, self.done = moment, during, False
        count = self.audits._count  # a post's count, all its lanes (counters.services.likes.audit)

        def counting(*a: Any, **k: Any) -> tuple[int, int]:
            if self.moment == "count" and not self.done:
                self.done = True
                self.during()
            return count(*a, **k)

        self.audits._count = counting  # type: ignore[method-assign]
        repair = self.audits._repair  # the audit's part (counters.services.likes.audit)

        def repairing(*a: Any, **k: Any) -> bool:
            if self.moment == "repair" and not self.done:
                self.done = True
                self.during()
            return repair(*a, **k)

        self.audits._repair = repairing  # type: ignore[method-assign]


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_and_an_unlike_during_the_count_leave_the_tally_as_it_was_but_settle_nothing(
    mode: str, table: str, layer_client: Any, ddb: Any, aggregator: Any
) -> None:
    """The tally comes back to its value (ABA); tallyRev does not: the count is not trusted."""
    other = Likes(table, retry=FAST)
    other.posts.create_post(author_id="a", body="b", post_id="p1", mode=mode)
    for u in ("u1", "u2", "u3"):
        other.toggling.like("p1", u)
    wait_for_tally(ddb, table, "p1", 3)
    corrupt(ddb, table, "p1", 9)  # a real drift, to be repaired only on a trusted count

    def like_and_unlike() -> None:
        other.toggling.like("p1", "zz-new")  # sorts last in its spread key: the count may or may not see it
        other.toggling.unlike("p1", "u1")

    likes = LikesDuring(table, retry=FAST, moment="count", during=like_and_unlike)
    [result] = likes.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert (result.settled, result.reason, result.repaired) == (False, "moving", False)
    assert tally(ddb, table, "p1") == 9 if mode == "standard" else True  # untouched (hot: the aggregator adds its net 0)
    [again] = Likes(table, retry=FAST).audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert again.repaired and tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 3


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_counted_after_the_count_refuses_the_repair(mode: str, table: str, layer_client: Any, ddb: Any, aggregator: Any) -> None:
    """Never overwrite concurrent likes: the repair's condition sees the like that came in."""
    other = Likes(table, retry=FAST)
    other.posts.create_post(author_id="a", body="b", post_id="p1", mode=mode)
    other.toggling.like("p1", "u1")
    wait_for_tally(ddb, table, "p1", 1)
    corrupt(ddb, table, "p1", 7)

    def like_counted() -> None:
        other.toggling.like("p1", "u2")
        wait_for_tally(ddb, table, "p1", 8)  # hot: counted once the aggregator applies it

    likes = LikesDuring(table, retry=FAST, moment="repair", during=like_counted)
    [result] = likes.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert (result.settled, result.drift, result.repaired, result.reason) == (True, 6, False, "moving")
    assert tally(ddb, table, "p1") == 8  # 7 + the new like: nothing overwritten
    [again] = Likes(table, retry=FAST).audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert again.repaired and tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 2


def test_the_audits_route(load_function: Any, table: str, layer_client: Any, ddb: Any) -> None:
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    invoke(app, api_event("PUT", "/posts/p1/likes/u1"))
    corrupt(ddb, table, "p1", 3)
    status, body = invoke(app, api_event("POST", "/audits", {"postIds": ["p1", "nope"], "repair": True}), unhurried())
    assert status == 200
    assert body["audits"] == [
        {"postId": "p1", "stored": 3, "counted": 1, "drift": 2, "settled": True, "repaired": True, "reason": None},
        {"postId": "nope", "stored": None, "counted": None, "drift": None, "settled": False, "repaired": False, "reason": "not_found"},
    ]
    assert tally(ddb, table, "p1") == 1
    assert invoke(app, api_event("POST", "/audits", {"postIds": []}))[0] == 400
    assert invoke(app, api_event("POST", "/audits", {"postIds": ["a b"]}))[0] == 400


# ---------------------------------------------------------------------------- issue 19, item 7
def test_a_repair_whose_answer_was_lost_is_reported_repaired(table: str, layer_client: Any, ddb: Any, faults: Any) -> None:
    """The repair commits, its answer is lost, the re-send's condition fails on the tallyRev the
    first attempt bumped: the refusal's ALL_OLD carries this repair's token, so it was us."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    likes.toggling.like("p1", "u1")
    corrupt(ddb, table, "p1", 8)  # +7
    faults.add("after_commit", operations={"UpdateItem"}, limit=1)  # the repair is the audit's only UpdateItem
    [result] = likes.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert faults.injected["after_commit"] == 1
    assert (result.settled, result.drift, result.repaired, result.reason) == (True, 7, True, None)
    assert tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 1


def test_a_repair_the_sdk_sent_twice_is_reported_repaired(table: str, layer_client: Any, ddb: Any, faults: Any) -> None:
    """The repair commits, then the identical request goes again (an SDK re-send after a lost reply:
    seed 02's pitfall) and the caller sees only the second answer, a refusal on the tallyRev the
    first bumped, with no unknown outcome seen. Its ALL_OLD still carries this repair's fresh token:
    only this repair can have written it (make proof's hot likes row caught this answered ``moving``)."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    likes.toggling.like("p1", "u1")
    corrupt(ddb, table, "p1", 8)  # +7
    faults.add("resend", operations={"UpdateItem"}, limit=1)  # the repair is the audit's only UpdateItem
    [result] = likes.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert faults.injected["resend"] == 1
    assert (result.settled, result.drift, result.repaired, result.reason) == (True, 7, True, None)
    assert tally(ddb, table, "p1") == likes_count(ddb, table, "p1") == 1


def test_a_repair_refused_after_a_lost_answer_of_another_repair_is_not_ours(table: str, layer_client: Any, ddb: Any, faults: Any) -> None:
    """The token tells our write from another's: a concurrent repair (or like) that moved tallyRev
    after our lost attempt is not ours, and the refusal stays ``moving``."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="p1")
    likes.toggling.like("p1", "u1")
    corrupt(ddb, table, "p1", 8)

    overtaken = Likes(table, retry=FAST)
    repair = overtaken.audits._repair  # the audit's part (counters.services.likes.audit)

    def lost_and_overtaken(*a: Any, **k: Any) -> bool:
        faults.add("unavailable", operations={"UpdateItem"}, limit=1)  # lost before it was applied
        Likes(table, retry=FAST).toggling.like("p1", "u2")  # then a like moves tallyRev
        return repair(*a, **k)

    overtaken.audits._repair = lost_and_overtaken  # type: ignore[method-assign]
    [result] = overtaken.audits.audit_posts(["p1"], repair=True, wait_s=WAIT_S)
    assert (result.settled, result.repaired, result.reason) == (True, False, "moving")
    assert tally(ddb, table, "p1") == 9  # 8 + the like: nothing overwritten


class CallClock:
    """The audit's clock, the test's own: every DynamoDB call of the layer's client costs ``cost``
    seconds on it (the time it starts is recorded), a sleep what it asks. The audit's deadline is
    then counted in calls, whatever the machine's speed."""

    def __init__(self, client: Any, cost: float = 0.05) -> None:
        self.client, self.cost, self.now = client, cost, 0.0
        self.started: list[float] = []
        client.meta.events.register_first("before-call.dynamodb", self.call, unique_id="audit-clock")

    def __call__(self) -> float:
        return self.now

    def call(self, **_: Any) -> None:
        self.started.append(self.now)
        self.now += self.cost

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def restart(self) -> None:
        self.now, self.started = 0.0, []

    def detach(self) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", unique_id="audit-clock")


def test_the_audit_answers_before_its_deadline_with_partial_answers(table: str, layer_client: Any) -> None:
    """No call starts at or after the deadline, and the posts reached in time keep their verdicts.
    On a clock of the test's own, advanced by each call: a count of calls, not a stopwatch."""
    likes = Likes(table, retry=FAST)
    ids = posts(likes, n_standard=5, n_hot=0, users=3)
    likes.posts.create_post(author_id="a", body="b", post_id="h0", mode="hot")
    likes.toggling.like("h0", "u1")
    clock = CallClock(layer_client)
    likes.audits.clock, likes.audits.sleep = clock, clock.sleep
    try:
        assert all(r.settled and r.drift == 0 for r in likes.audits.audit_posts(ids))  # with time, every post settles
        needed = len(clock.started)  # first point, counts, second point: the last five are each post's second read
        clock.restart()
        budget = (needed - 2.5) * clock.cost  # two calls short of the whole audit
        results = likes.audits.audit_posts(ids, budget_s=budget)
        starts, took = list(clock.started), clock.now
        # the deadline cut inside a hot post's probes (one per spread key): no probe after it either
        clock.restart()
        [hot] = likes.audits.audit_posts(["h0"], budget_s=3.5 * clock.cost)
        hot_calls = list(clock.started)
    finally:
        clock.detach()
    print(f"\naudit of {len(ids)} posts: {needed} calls; budget {budget:.2f} s ({needed - 2.5} calls): {len(starts)} calls, {took:.2f} s")
    assert starts and all(t < budget for t in starts), "a call started at or after the deadline"
    assert took <= budget + clock.cost  # the last call started before the deadline ends at most one call after it
    answers = [(r.settled, r.reason) for r in results]
    settled = answers.index((False, "deadline"))  # a retry (a read timeout under load) costs a call: 2 to 4 settle
    assert settled >= 1 and answers == [(True, None)] * settled + [(False, "deadline")] * (len(ids) - settled), answers
    assert all(r.drift == 0 for r in results[:settled])
    assert (hot.settled, hot.reason) == (False, "deadline")
    assert hot_calls and all(t < 3.5 * clock.cost for t in hot_calls), hot_calls
    assert len(hot_calls) < 1 + SPREAD  # its read and some of its probes: the rest were not sent


def test_the_audits_route_stops_before_the_function_times_out(load_function: Any, table: str, layer_client: Any) -> None:
    from devstack.runtime import LambdaContext

    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    invoke(app, api_event("POST", "/posts", {"postId": "p1", "authorId": "a", "body": "b"}))
    nearly_out = LambdaContext.for_function("LikesFunction", 512, 3)  # 3 s left: the margin, nothing more
    status, body = invoke(app, api_event("POST", "/audits", {"postIds": ["p1"]}), nearly_out)
    assert status == 200
    assert body["audits"] == [
        {"postId": "p1", "stored": None, "counted": None, "drift": None, "settled": False, "repaired": False, "reason": "deadline"}
    ]
    status, body = invoke(app, api_event("POST", "/audits", {"postIds": ["p1"]}), unhurried())
    assert body["audits"][0]["settled"] is True


def test_the_quick_audit_of_a_hot_post_reports_no_drift_and_no_alarm(
    load_function: Any, table: str, layer_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """No aggregator runs: the hot post's tally is 0, its likes 2. That is lag, not drift."""
    app = load_function("LikesFunction", table, build=lambda s: Likes(s.table_name, retry=FAST))
    for post, mode in (("h1", "hot"), ("s1", "standard")):
        invoke(app, api_event("POST", "/posts", {"postId": post, "authorId": "a", "body": "b", "mode": mode}))
        invoke(app, api_event("PUT", f"/posts/{post}/likes/u1"))
        invoke(app, api_event("PUT", f"/posts/{post}/likes/u2"))
    capsys.readouterr()
    status, body = invoke(app, api_event("GET", "/posts/h1/audit"))
    assert (status, body) == (200, {"postId": "h1", "stored": 0, "counted": 2, "drift": None, "reason": "aggregated"})
    assert "AuditDrift" not in capsys.readouterr().out  # no false alarm on the dashboard
    status, body = invoke(app, api_event("GET", "/posts/s1/audit"))  # a standard post is still compared
    assert (status, body["drift"], body["reason"]) == (200, 0, None)
    assert '"AuditDrift"' in capsys.readouterr().out


def test_two_concurrent_audits_of_one_hot_post_both_settle(table: str, layer_client: Any, ddb: Any, aggregator: Any) -> None:
    """Both audits write their probes before either waits: each lane's applied probe is then the
    later one, which also shows the earlier was applied (probes are numbered per lane)."""
    likes = Likes(table, retry=FAST)
    likes.posts.create_post(author_id="a", body="b", post_id="h0", mode="hot")
    for u in range(4):
        likes.toggling.like("h0", f"u{u}")
    wait_for_tally(ddb, table, "h0", 4)
    both_probed = threading.Barrier(2)  # no timeout: a hang is pytest-timeout's to report
    results: dict[int, Any] = {}

    def audit(n: int) -> None:
        auditor = Likes(table, retry=FAST)
        read, calls = auditor.audits.store.read, [0]  # the audit's reads of META (counters.store.posts.PostStore.read)

        def reading(*a: Any, **k: Any) -> Any:
            calls[0] += 1
            if calls[0] == 2:  # the first wait for the probes: the other audit has probed too
                both_probed.wait()
            return read(*a, **k)

        auditor.audits.store.read = reading  # type: ignore[method-assign]
        results[n] = auditor.audits.audit_posts(["h0"], wait_s=WAIT_S)[0]

    threads = [threading.Thread(target=audit, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [(results[n].settled, results[n].reason, results[n].drift) for n in range(2)] == [(True, None, 0)] * 2
