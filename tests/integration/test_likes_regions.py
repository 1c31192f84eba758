"""Likes on a global table (issue 21): a tally per Region, summed on read, exact after convergence.

Two or three Regions of testkit.regions' global table (one DynamoDB Local, a database per
Region; MREC replication with last writer wins, seeded delays, partitions; MRSC one store seen
from three Regions). Each Region's aggregator reads its own Region's stream (NEW_AND_OLD_IMAGES)
through testkit.stream_reader, as on AWS. docs/likes.md "Global tables".
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from counters.core.errors import UnsupportedInMode
from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.toggle import now_ms
from counters.services.likes import Likes
from counters.store import aggregates, post_streams
from counters.store.expr import Cond, Path
from counters.streams import LikeAggregator, aggregate, like_aggregator
from proof.regions import likes as proof_likes
from testkit.faults import FaultInjector
from testkit.regions import Delays, GlobalTable, Mode
from testkit.stream_reader import StreamReader

FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.01)
A, B, C = "eu-west-1", "us-east-1", "us-west-2"


class Region:
    """One Region's likes service, aggregator and stream reader."""

    def __init__(self, gt: GlobalTable, region: str, mode: GlobalTableMode) -> None:
        self.region = region
        ddb = gt.client(region)
        self.likes = Likes(gt.table_name, dynamodb=ddb, retry=FAST, topology=Topology(mode, region, gt.regions))
        self.aggregator: LikeAggregator = like_aggregator(gt.table_name, dynamodb=ddb, retry=FAST, region=region)
        self.reader = StreamReader(gt.streams_client(region), gt.table_name)
        self.log: list[dict[str, Any]] = []

    def aggregate(self, redeliver: bool = False) -> None:
        """This Region's new stream records through its aggregator (``redeliver``: every batch twice)."""
        self.log.extend(self.reader.read())
        for start in range(0, len(self.log), 7):  # batches of 7, from the start: everything is redelivered
            for _ in range(2 if redeliver else 1):  # the handler's own loop
                for applied in aggregate(self.aggregator, self.log[start : start + 7]).applied:
                    assert applied.result.outcome.value in ("applied", "duplicate"), applied.result


@pytest.fixture
def mrec(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    gt = GlobalTable(dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", (A, B), Mode.MREC, 7, Delays(tail=0.2)).create()
    yield gt
    gt.delete()


@pytest.fixture
def mrsc(dynamodb_endpoint: str) -> Iterator[GlobalTable]:
    gt = GlobalTable(dynamodb_endpoint, f"tally-gt-{uuid.uuid4().hex[:8]}", (A, B, C), Mode.MRSC, 7).create()
    yield gt
    gt.delete()


def regions(gt: GlobalTable) -> dict[str, Region]:
    mode = GlobalTableMode.MRSC if gt.mode is Mode.MRSC else GlobalTableMode.MREC
    return {r: Region(gt, r, mode) for r in gt.regions}


def create_post(rs: dict[str, Region], **options: Any) -> None:
    """Create a post in its id's home Region (MREC creates an id there only; MRSC: any Region,
    here the first); the tests settle before they like it anywhere."""
    rs[rs[A].likes.policy.home_of(options["post_id"])].likes.posts.create_post(**options)


def settle(gt: GlobalTable, rs: dict[str, Region], redeliver: bool = False) -> None:
    """Replication delivered everywhere and every Region's aggregator caught up (twice: the
    aggregators' own writes are replicated too)."""
    gt.heal()
    for _ in range(2):
        gt.settle()
        for r in rs.values():
            r.aggregate(redeliver)
    gt.settle()
    assert gt.converged()


def liked(gt: GlobalTable, region: str, post: str) -> int:
    """The truth: like items of the post in this Region's replica that say liked."""
    return sum(1 for i in gt.items(region) if i["PK"].startswith(f"POST#{post}#S") and i["SK"].startswith("LIKE#") and i.get("liked", True))


def tally(rs: dict[str, Region], region: str, post: str) -> int:
    return int(rs[region].likes.posts.get_post(post)["likeTally"])


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_40_concurrent_likes_20_through_each_region_count_40(mrec: GlobalTable, mode: str) -> None:
    """The issue's measurement: 40 likes of one post, 20 through each Region, all changed:true;
    one META tally used to overwrite the other (20). Per-Region tallies: 40 in both Regions."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode=mode)
    mrec.settle()

    def like(n: int) -> bool:
        return rs[A if n % 2 else B].likes.toggling.like("p", f"u{n}").changed

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(like, range(40)))
    settle(mrec, rs)
    for region in (A, B):
        assert liked(mrec, region, "p") == 40
        assert tally(rs, region, "p") == 40


@pytest.mark.parametrize("mode", ["standard", "hot"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["replicated-first", "partitioned"])
@pytest.mark.parametrize("where", [(A, B), (B, A)], ids=["like-A-unlike-B", "like-B-unlike-A"])
def test_a_like_in_one_region_and_a_later_unlike_in_the_other_count_zero(
    mrec: GlobalTable, mode: str, partitioned: bool, where: tuple[str, str]
) -> None:
    """The later request wins everywhere after convergence and is counted once: 0. Replicated
    first, the unlike flips the other Region's like; partitioned, it writes a tombstone that wins
    by write time over the like arriving after the heal."""
    rs = regions(mrec)
    first, second = where
    create_post(rs, author_id="a", body="b", post_id="p", mode=mode)
    create_post(rs, author_id="a", body="b2", post_id="q", mode=mode)
    mrec.settle()
    if partitioned:
        mrec.partition(A, B)
    assert rs[first].likes.toggling.like("p", "u1").changed
    rs[first].likes.toggling.like("q", "u2")  # another like that stays: the sum is exact, not just zero
    mrec.advance(1)
    if not partitioned:
        mrec.settle()
    rs[second].likes.toggling.unlike("p", "u1")
    mrec.advance(1)
    for r in rs.values():
        r.aggregate()
    mrec.heal()
    settle(mrec, rs)
    for region in (A, B):
        assert liked(mrec, region, "p") == 0 and tally(rs, region, "p") == 0
        assert liked(mrec, region, "q") == 1 and tally(rs, region, "q") == 1


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_re_sent_in_the_other_region_after_a_failover_counts_once(mrec: GlobalTable, mode: str) -> None:
    """A client fails over and re-sends the same request (its id and time) in B, before and after
    A's like reached B: the like is counted once after convergence."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode=mode)
    mrec.settle()
    mrec.partition(A, B)
    at = now_ms()
    assert rs[A].likes.toggling.like("p", "u1", request_id="r1", at=at).changed
    assert rs[B].likes.toggling.like("p", "u1", request_id="r1", at=at).changed  # B has not seen it
    mrec.heal()
    settle(mrec, rs)
    assert rs[B].likes.toggling.like("p", "u1", request_id="r1", at=at).changed  # its own request: a duplicate
    settle(mrec, rs)
    for region in (A, B):
        assert liked(mrec, region, "p") == 1 and tally(rs, region, "p") == 1


@pytest.mark.parametrize("mode", ["standard", "hot"])
def test_a_like_sent_again_in_the_other_region_makes_the_version_its_own_and_counts_once(mrec: GlobalTable, mode: str) -> None:
    """A liked in A, seen in B, liked again in B (a newer request): B's version replaces A's
    everywhere, so B counts it (+1) and A takes its own off (-1) when B's version reaches it."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode=mode)
    mrec.settle()
    rs[A].likes.toggling.like("p", "u1")
    mrec.settle()
    assert not rs[B].likes.toggling.like("p", "u1").changed  # already liked: a newer stamp, written by B
    settle(mrec, rs)
    for region in (A, B):
        assert liked(mrec, region, "p") == 1 and tally(rs, region, "p") == 1
    assert {i.get("writerRegion") for i in mrec.items(A) if i["SK"].startswith("LIKE#")} == {B}


def counting_replicated_deltas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break the guard: a record written in another Region counts its own delta here too."""
    original = post_streams.regional_streamed

    def broken(keys: Any, new: Any, old: Any, region: str) -> Any:
        found = original(keys, new, old, region)
        if found is not None and new and "delta" in new:
            return post_streams.Streamed(found.post_id, found.lane, int(new["delta"]["N"]))
        return found

    monkeypatch.setattr(post_streams, "regional_streamed", broken)
    import counters.streams

    monkeypatch.setattr(counters.streams, "regional_streamed", broken)


@pytest.mark.parametrize("broken", [False, True], ids=["guarded", "guard-removed"])
def test_an_aggregator_never_counts_a_replicated_record(mrec: GlobalTable, monkeypatch: pytest.MonkeyPatch, broken: bool) -> None:
    """A hot like in A reaches B's stream with its delta +1; B's aggregator must not count it
    (A's did). With the guard removed, both count it: 2 for one like."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode="hot")
    mrec.settle()
    rs[A].likes.toggling.like("p", "u1")
    if broken:
        counting_replicated_deltas(monkeypatch)
    settle(mrec, rs)
    counted = tally(rs, B, "p")
    assert (counted == 2) if broken else (counted == 1)


def without_the_checkpoint_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    def unguarded(seq: Path, first: str) -> Cond:
        return seq.missing() | seq.exists()

    monkeypatch.setattr(aggregates, "lane_not_applied", unguarded)


@pytest.mark.parametrize("broken", [False, True], ids=["checkpointed", "checkpoint-removed"])
def test_the_standard_mode_correction_counts_once_under_redelivery(
    mrec: GlobalTable, monkeypatch: pytest.MonkeyPatch, broken: bool
) -> None:
    """Standard mode: A's like is counted in A's transaction; B's later unlike replaces A's liked
    version in A's replica, and A's aggregator takes it off A's tally (-1) from A's stream. Every
    batch delivered twice, then the whole stream again: -1 once."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode="standard")
    create_post(rs, author_id="a", body="b", post_id="keep", mode="standard")
    mrec.settle()
    rs[A].likes.toggling.like("p", "u1")
    rs[A].likes.toggling.like("keep", "u1")
    rs[A].likes.toggling.like("keep", "u2")
    mrec.settle()
    rs[B].likes.toggling.unlike("p", "u1")
    if broken:
        without_the_checkpoint_condition(monkeypatch)
    settle(mrec, rs, redeliver=True)
    rs[A].aggregate(redeliver=True)
    counted = [tally(rs, region, "keep") + tally(rs, region, "p") for region in (A, B)]
    assert counted != [2, 2] if broken else counted == [2, 2]


def test_mrsc_posts_are_hot_and_exact_through_three_regions(mrsc: GlobalTable) -> None:
    """MRSC: no transactions, so a standard post is refused (409) and hot posts count in every
    Region's aggregator over the shared stream, each its own Region's writes only."""
    rs = regions(mrsc)
    with pytest.raises(UnsupportedInMode):
        create_post(rs, author_id="a", body="b", post_id="s", mode="standard")
    create_post(rs, author_id="a", body="b", post_id="p", mode="hot")
    names = [A, B, C]
    for n in range(30):
        rs[names[n % 3]].likes.toggling.like("p", f"u{n % 12}")
        if n % 4 == 0:
            rs[names[(n + 1) % 3]].likes.toggling.unlike("p", f"u{(n + 5) % 12}")
    settle(mrsc, rs, redeliver=True)
    for region in names:
        assert tally(rs, region, "p") == liked(mrsc, region, "p") > 0


def test_mode_switch_and_audit_are_refused_on_a_global_table(mrec: GlobalTable) -> None:
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode="standard")
    with pytest.raises(UnsupportedInMode):
        rs[A].likes.posts.switch_mode("p", "hot")
    with pytest.raises(UnsupportedInMode):
        rs[A].likes.audits.audit("p")
    with pytest.raises(UnsupportedInMode):
        rs[A].likes.audits.audit_posts(["p"])


def test_a_post_stored_before_spread_takes_no_like_on_a_global_table(mrec: GlobalTable) -> None:
    """A post stored before ``spread`` counts on META, one item every Region would write in place:
    on a global table its like is refused (409) before anything is written."""
    rs = regions(mrec)
    create_post(rs, author_id="a", body="b", post_id="p", mode="standard")
    mrec.settle()
    home = rs[A].likes.policy.home_of("p")
    key = {"PK": {"S": "POST#p"}, "SK": {"S": "META"}}
    mrec.client(home).update_item(TableName=mrec.table_name, Key=key, UpdateExpression="REMOVE spread")  # as stored before spread
    mrec.settle()
    for region in (A, B):
        with pytest.raises(UnsupportedInMode, match="stored before spread"):
            rs[region].likes.toggling.like("p", "u1")
    mrec.settle()
    for region in (A, B):
        assert not [i for i in mrec.items(region) if i["SK"].startswith("LIKE#")]
        assert all(i.get("likeTally", 0) == 0 for i in mrec.items(region) if i["PK"] == "POST#p")


# --------------------------------------------------------------------------- the proof's schedules
ISSUE_28_START = proof_likes.Start(56, faults={A: 3974, B: 4364, C: 4496}, conflicts=72, backlog={A: 6, B: 4, C: 2})
"""Where the MRSC hot group of ``python -m proof --seed 96621407 --regions likes`` (group seed
96621607: seed + 200) began its schedule 56 (seed 96621607056), as ``python -m proof.regions.likes
start <endpoint> 96621607 mrsc hot 56`` says (the same before and after the fix: no earlier
schedule of the group needed a redelivery)."""


def test_issue_28_mrsc_schedule_96621607056_counts_every_stored_like(dynamodb_endpoint: str) -> None:
    """Issue 28: that schedule, replayed alone from where it began. Its last aggregator run in
    us-west-2 met contention (its tally item's creation out of attempts: a throttle, a 500 after
    commit, two 500s) and kept its batch for a next run the proof never made: a like stored as
    liked, counted by no Region (tally 2 < liked 3 in all three). Lambda redelivers such a batch;
    the proof now does too."""
    report = proof_likes.replay(dynamodb_endpoint, 96621607, Mode.MRSC, "hot", ISSUE_28_START)
    assert (report.over, report.under, report.breaches, report.bad_reads) == (0, 0, 0, 0), report.notes
    assert report.verdict == "holds"


class _NoSecondDelivery(random.Random):
    """The proof's draws, never redelivering a batch that went through (``random()`` >= 0.3)."""

    def random(self) -> float:
        return 0.9


def test_the_proofs_last_aggregator_run_redelivers_a_batch_that_met_contention(mrsc: GlobalTable) -> None:
    """The guard the issue-28 schedule needed, without a seed: a like in us-west-2, whose
    aggregator's first delivery runs out of attempts (every UpdateItem 500 before sending):
    the end of a schedule delivers the batch again until it is applied, and the like is counted."""
    rs = {r: proof_likes._Region(mrsc, r, GlobalTableMode.MRSC) for r in mrsc.regions}
    rs[A].likes.posts.create_post(author_id="a", body="b", post_id="p")  # MRSC: hot
    assert rs[C].likes.toggling.like("p", "u1").changed
    injector = FaultInjector(mrsc.client(C)).add("unavailable", operations={"UpdateItem"}, limit=proof_likes.RETRY.max_attempts)
    try:
        drained = rs[C].drain(_NoSecondDelivery())
    finally:
        injector.detach()
    assert injector.injected["unavailable"] == proof_likes.RETRY.max_attempts  # the first delivery met contention
    assert drained and not rs[C].pending
    for region in mrsc.regions:
        assert proof_likes._tally(rs, region, "p") == 1
