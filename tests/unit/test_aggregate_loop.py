"""counters.streams.aggregate: the like aggregator's one loop over a batch (the handler's and the proof's).

What it reports decides what Lambda redelivers: a post whose tally write met contention, and an
examination that met contention and could not be deferred, each report their lowest record; an
examination deferred to the retry queue, a sweep queued, and everything applied report nothing.
No DynamoDB here: the tally write and the merges are stand-ins, the records' parsing is the layer's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from counters.core.commands import Command
from counters.core.outcome import Outcome, Result
from counters.primitives.aggregator import Applied, Change
from counters.services.likes.merging import Examined
from counters.store.post_streams import Created
from counters.store.posts import like_checkpoints
from counters.streams import LikeAggregator, aggregate


def like(post: str, user: str, seq: str, delta: int = 1, event: str = "INSERT", writer: str = "") -> dict[str, Any]:
    image = {"delta": {"N": str(delta)}, "liked": {"BOOL": delta > 0}}
    if writer:
        image["writerRegion"] = {"S": writer}
    keys = {"PK": {"S": f"POST#{post}#S0"}, "SK": {"S": f"LIKE#USER#{user}"}}
    return {"eventName": event, "dynamodb": {"Keys": keys, "NewImage": {**keys, **image}, "SequenceNumber": seq}}


class Merges:
    """Examines every creation with the outcome its user is given; records what the loop did."""

    def __init__(self, outcomes: dict[str, Outcome], sweeps: list[Command] | None = None) -> None:
        self.outcomes, self.pending, self.marked = outcomes, sweeps or [], []  # type: list[Command]

    def examine(self, created: Iterable[Created]) -> list[Examined]:
        return [Examined(c, self.outcomes.get(c.user_id, Outcome.DUPLICATE)) for c in created]

    def deferred(self, post_id: str, user_ids: Iterable[str]) -> Command:
        return Command("merge-likes", {"postId": post_id, "userIds": [*user_ids]})

    def sweeps(self) -> list[Command]:
        return self.pending

    def sent(self, command: Command) -> None:
        self.marked.append(command)


class Aggregator(LikeAggregator):
    """The real parsing of records; each post's write answers the outcome it is given."""

    def __init__(self, outcomes: dict[str, Outcome], merges: Merges | None = None, region: str = "") -> None:
        super().__init__(like_checkpoints("t", region=region), merges=merges, region=region)  # type: ignore[arg-type]
        self.outcomes, self.seen = outcomes, []  # type: dict[str, Outcome], list[Change]

    def apply(self, changes: Iterable[Change]) -> list[Applied]:
        by_post: dict[str, list[Change]] = {}
        for change in changes:
            self.seen.append(change)
            by_post.setdefault(change.parent, []).append(change)
        return [Applied(p, Result(self.outcomes.get(p, Outcome.APPLIED)), changes=cs) for p, cs in by_post.items()]


def test_a_contended_post_reports_its_lowest_record_and_an_applied_one_nothing() -> None:
    agg = Aggregator({"p2": Outcome.CONTENTION})
    records = [like("p1", "u1", "300"), like("p2", "u1", "2000"), like("p2", "u2", "999"), like("p1", "u3", "5")]
    done = aggregate(agg, records)
    assert done.failure == "999"  # compared as sequence numbers, not as text ("2000" < "999")
    assert [a.parent for a in done.applied] == ["p1", "p2"]
    assert aggregate(Aggregator({}), records).failure is None


def test_a_contended_examination_is_deferred_and_reported_only_when_the_queue_refuses() -> None:
    records = [like("p1", "u1", "10"), like("p1", "u2", "11"), like("p1", "u3", "12", delta=0)]
    outcomes = {"u2": Outcome.CONTENTION, "u3": Outcome.APPLIED}
    queued: list[Command] = []
    taken = aggregate(Aggregator({}, Merges(outcomes)), records, lambda c: queued.append(c) is None)
    assert taken.failure is None and [c.payload for c in queued] == [{"postId": "p1", "userIds": ["u2"]}]
    assert [c.user_id for c in taken.merged] == ["u3"]  # a tombstone's creation (delta 0) is examined too
    refused = aggregate(Aggregator({}, Merges(outcomes)), records)  # no queue
    assert refused.failure == "11"


def test_a_sweep_is_marked_sent_only_when_the_queue_took_it() -> None:
    sweep = Command("settle-likes", {"postId": "p1", "spread": 16})
    kept = Merges({}, [sweep])
    aggregate(Aggregator({}, kept), [like("p1", "u1", "1")], lambda c: True)
    assert kept.marked == [sweep]
    dropped = Merges({}, [sweep])
    assert aggregate(Aggregator({}, dropped), [like("p1", "u1", "1")]).failure is None and dropped.marked == []


def test_a_region_reads_its_own_stream_and_runs_no_merges() -> None:
    """On a global table the records are read as that Region's changes (a replicated version never
    counts its own delta there), whatever the handler is told: the aggregator knows its Region."""
    agg = Aggregator({}, region="eu-west-1")
    aggregate(agg, [like("p1", "u1", "1", writer="eu-west-1"), like("p1", "u2", "2", writer="us-east-1")])
    assert [(c.seq, c.delta) for c in agg.seen] == [("1", 1)]
    assert agg.merges is None
