"""Likes across Regions (issue 21): seeded schedules over a global table, standard and hot, MREC and MRSC.

Each schedule takes a fresh post on one global table per (mode, post mode) (testkit.regions: MREC
with 2 Regions, MRSC with 3): a few users like and unlike it through every Region with the proof's client
faults on each Region's client (after-commit, re-sends, conflicts, throttles, unavailable),
seeded replication delays up to minutes (reordered, some twice), a partition of simulated
minutes, and a client failover (a request re-sent with its own id and time in another Region).
Each Region's aggregator runs over its own stream at random points, sometimes redelivering a
batch. After heal + settle, each Region's aggregator takes in everything left, a batch that
reports a failure redelivered as Lambda does (at most the template's 20 retries), and **every
Region's summed tally must equal the number of users whose like item says liked** (and the
Regions must hold identical items). A standard post on MRSC must be refused (409) with nothing
written.

A group's schedule ``n`` can be replayed alone (:func:`replay`) from where it began in a full run
(:func:`start_of`, ``python -m proof.regions.likes start ...``): what the fault injectors and the
conflict draw had consumed and the aggregators' backlog.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from counters.core.errors import ContentionError, UnsupportedInMode, WrongRegion
from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.primitives.toggle import now_ms
from counters.services.likes import Likes
from counters.services.likes.model import SPREAD
from counters.store.post_items import lane_of
from counters.streams import aggregate, like_aggregator, regional_change
from devstack.streams import subscription
from proof.checker import Report
from proof.regions import MREC_REGIONS, MRSC_REGIONS, detach, global_table, region_faults
from testkit.regions import Delays, GlobalTable, Mode
from testkit.stream_reader import StreamReader

RETRY = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
DELAYS = Delays(tail=0.15, tail_max=600.0)  # a good share of minute-long deliveries
USERS = 4
OPS = 6
REDRIVES = subscription("LikeAggregatorFunction").max_retries
"""A batch that reports a failure is redelivered at most this often at the end of a schedule
(template.yaml: the like aggregator's ``MaximumRetryAttempts``)."""


class _Region:
    def __init__(self, gt: GlobalTable, region: str, mode: GlobalTableMode) -> None:
        self.region, self.gt = region, gt
        ddb = gt.client(region)
        self.likes = Likes(gt.table_name, dynamodb=ddb, retry=RETRY, topology=Topology(mode, region, gt.regions))
        self.aggregator = like_aggregator(gt.table_name, dynamodb=ddb, retry=RETRY, region=region)
        self.reader = StreamReader(gt.streams_client(region), gt.table_name)
        self.pending: list[dict[str, Any]] = []
        self.redelivered = 0  # batches the ends of schedules delivered again after a failure

    def aggregate(self, rng: random.Random, everything: bool = False) -> None:
        """Some (or all) of this Region's unapplied stream records, in order, as one batch; the
        batch is sometimes delivered twice. A contended post keeps its records for the next run."""
        self.pending.extend(self.reader.read())
        take = len(self.pending) if everything else rng.randint(0, len(self.pending))
        batch, rest = self.pending[:take], self.pending[take:]
        failed = False
        for _ in range(2 if rng.random() < 0.3 else 1):  # the handler's own loop (counters.streams.aggregate)
            failed |= aggregate(self.aggregator, batch).failure is not None
        self.pending = (batch if failed else []) + rest  # Lambda restarts the batch: the checkpoints skip what was applied

    def drain(self, rng: random.Random) -> bool:
        """Everything unapplied, then the batch again while it reports a failure, as Lambda redelivers
        it (ReportBatchItemFailures), at most ``REDRIVES`` times; False if records are still unapplied.
        One run is not enough: a contended post (its write, or its Region's tally item's creation,
        out of attempts under the faults) keeps its records for the next run, and the last
        run of a schedule has no next one (seed 96621607056: a like stored, counted by no Region)."""
        for attempt in range(1 + REDRIVES):
            self.redelivered += attempt > 0
            self.aggregate(rng, everything=True)
            if not self.pending:
                return True
        return False


def _truth(gt: GlobalTable, region: str, post: str) -> tuple[int, list[str]]:
    """(users whose like item says liked, every like item as text) in this Region's replica."""
    found = [
        gt.item(region, {"PK": {"S": f"POST#{post}#S{lane_of(f'u{u}', SPREAD)}"}, "SK": {"S": f"LIKE#USER#u{u}"}}) for u in range(USERS)
    ]
    items = [i for i in found if i is not None]
    return sum(i.get("liked", True) is True for i in items), sorted(repr(sorted(i.items())) for i in items)


def _tally(rs: dict[str, _Region], region: str, post: str) -> int:
    """The post's tally as ``GET /posts/{id}`` answers in ``region`` (the sum of its Region items)."""
    for _ in range(8):
        try:
            return int(str(rs[region].likes.posts.get_post(post)["likeTally"]))
        except ContentionError:
            continue
    raise RuntimeError("the tally could not be read")


def _schedule(gt: GlobalTable, regions: dict[str, _Region], post_mode: str, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    names = list(regions)
    post = f"p{uuid.uuid4().hex[:10]}"
    creator = regions[rng.choice(names)]
    for _ in range(8):  # the create itself may meet a fault: re-sent as a client would
        try:
            creator.likes.posts.create_post(author_id="proof", body="b", post_id=post, mode=post_mode)
            break
        except ContentionError:
            continue
        except WrongRegion as refused:  # MREC: a post is created in its id's home Region (docs/regions.md, Creations)
            creator = regions[refused.region]
    else:
        report.notes.append(f"seed {seed}: post not created")
        return
    gt.settle()
    partition_at, heal_at = rng.randrange(OPS), rng.randrange(OPS + 1)
    sent: list[tuple[str, bool, str, int]] = []
    for step in range(OPS):
        if step == partition_at and len(names) == 2:
            gt.partition(*names)
        if step == heal_at:
            gt.heal()
        region = regions[rng.choice(names)]
        if sent and rng.random() < 0.15:  # a failover: an earlier request re-sent in another Region
            user, on, request_id, at = rng.choice(sent)
        else:
            user, on, request_id, at = f"u{rng.randrange(USERS)}", rng.random() < 0.6, uuid.uuid4().hex, now_ms()
            sent.append((user, on, request_id, at))
        report.operations += 1
        try:
            (region.likes.toggling.like if on else region.likes.toggling.unlike)(post, user, request_id=request_id, at=at)
        except ContentionError:
            report.unknown += 1
        if rng.random() < 0.6:  # else the next request runs before anything more is replicated
            gt.advance(rng.choice((0.5, 5.0, 60.0, 300.0)))
        if rng.random() < 0.3:
            rng.choice(list(regions.values())).aggregate(rng)
    gt.heal()
    gt.settle()  # every like version everywhere
    for name, r in regions.items():
        if not r.drain(rng):
            report.breaches += 1
            report.notes.append(f"seed {seed} {post_mode} {name}: stream records still unapplied after {REDRIVES} redeliveries")
    gt.settle()  # the Regions' tally items (no like item moves any more)
    views = {name: _truth(gt, name, post) for name in names}
    if len({repr(v[1]) for v in views.values()}) != 1:
        report.bad_reads += 1
        report.notes.append(f"seed {seed}: Regions did not converge")
    for name, (liked, _) in views.items():
        total = _tally(regions, name, post)
        report.final, report.acknowledged, report.possible = total, liked, liked
        if total > liked:
            report.over += 1
            report.notes.append(f"seed {seed} {post_mode} {name}: tally {total} > liked {liked}")
        elif total < liked:
            report.under += 1
            report.notes.append(f"seed {seed} {post_mode} {name}: tally {total} < liked {liked}")


def _refusal(regions: dict[str, _Region], report: Report) -> None:
    """MRSC: a standard post is refused before anything is written."""
    region = next(iter(regions.values()))
    post = f"s{uuid.uuid4().hex[:10]}"
    try:
        region.likes.posts.create_post(author_id="proof", body="b", post_id=post, mode="standard")
        report.breaches += 1
        report.notes.append("MRSC accepted a standard post")
    except UnsupportedInMode:
        pass


class _Group:
    """One (table mode, post mode) on its own global table: its Regions, their faults, its row."""

    def __init__(self, endpoint: str, seed: int, mode: Mode, post_mode: str) -> None:
        self.started = time.monotonic()
        self.seed, self.mode, self.post_mode = seed, mode, post_mode
        regions = MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS
        self.gt = global_table(endpoint, seed, mode, regions=regions, delays=DELAYS)
        self.faults = region_faults(self.gt, seed)
        self.regions = {r: _Region(self.gt, r, GlobalTableMode(mode.value)) for r in self.gt.regions}
        self.schedules = 0
        self.report = Report(
            f"likes across Regions ({mode.value.upper()}, {post_mode}): summed Region tallies == liked users",
            operations=0,
            faults=0,
            over=0,
            under=0,
            duplicates=0,
            breaches=0,
            bad_reads=0,
            final=0,
            acknowledged=0,
            possible=0,
            documented="exact",
        )

    def schedule(self, n: int) -> None:
        """The group's schedule ``n`` (its seed: ``seed * 1000 + n``)."""
        self.schedules += 1
        _schedule(self.gt, self.regions, self.post_mode, self.seed * 1000 + n, self.report)

    def start(self, n: int) -> Start:
        """Where schedule ``n`` would begin now (after the schedules run so far): see :class:`Start`."""
        backlog = {}
        for name, region in self.regions.items():
            waiting = region.pending + region.reader.read()
            if any(regional_change(r, name) is not None for r in waiting):
                raise RuntimeError(f"{name}'s aggregator has changes left over: a replay cannot stand in for them")
            backlog[name] = len(waiting)
        return Start(
            n,
            faults={name: _consumed(f.rng, self.seed * 31 + i) for i, (name, f) in enumerate(self.faults.items())},
            conflicts=_consumed(self.gt._conflict_rng, self.seed ^ 0x5EED),
            backlog=backlog,
        )

    def resume(self, start: Start) -> None:
        """Put this fresh group where ``start`` says schedule ``start.n`` began."""
        for name, words in start.faults.items():
            _skip(self.faults[name].rng, words)
        _skip(self.gt._conflict_rng, start.conflicts)
        for name, count in start.backlog.items():
            self.regions[name].pending = [dict(FILLER) for _ in range(count)]

    def close(self) -> Report:
        report = self.report
        report.faults = detach(self.faults)
        self.gt.delete()
        spent = time.monotonic() - self.started
        redelivered = sum(r.redelivered for r in self.regions.values())
        report.notes.insert(
            0,
            f"{self.schedules} schedules in {spent:.1f} s; replication {self.gt.stats.as_dict()}; "
            f"{redelivered} batches delivered again at the end of a schedule after a failure",
        )
        if not report.faults:
            report.unexercised.append("client faults")
        if self.mode is Mode.MREC and not self.gt.stats["held_by_partition"]:
            report.unexercised.append("partition")
        return report


def _group(endpoint: str, seed: int, mode: Mode, post_mode: str, schedules: int) -> Report:
    """``schedules`` schedules of one (table mode, post mode) on its own global table."""
    group = _Group(endpoint, seed, mode, post_mode)
    try:
        for n in range(schedules):
            group.schedule(n)
        if mode is Mode.MRSC:
            _refusal(group.regions, group.report)
    finally:
        report = group.close()
    return report


@dataclass(frozen=True)
class Start:
    """Where a group's schedule ``n`` began, all a replay of it alone needs (:func:`replay`): the
    32-bit words each Region's fault injector (``faults``) and the emulator's MRSC conflict draw
    (``conflicts``) had consumed, and how many stream records each Region's aggregator had still to
    take in (``backlog``: the earlier posts' last records; none of them counts for this Region,
    :meth:`_Group.start` checks it, but their number sizes the batches the schedule draws)."""

    n: int
    faults: dict[str, int]
    conflicts: int
    backlog: dict[str, int]


FILLER: dict[str, Any] = {"eventName": "INSERT", "dynamodb": {"Keys": {}, "SequenceNumber": "0"}}
"""A backlog record of a replay: counts for no Region (not a like)."""


def _consumed(rng: random.Random, seed: int) -> int:
    """How many 32-bit words ``rng`` (made as ``random.Random(seed)``) has drawn."""
    fresh, target, words = random.Random(seed), rng.getstate(), 0
    while fresh.getstate() != target:
        fresh.getrandbits(32)
        words += 1
    return words


def _skip(rng: random.Random, words: int) -> None:
    for _ in range(words):
        rng.getrandbits(32)


def start_of(endpoint: str, seed: int, mode: Mode, post_mode: str, n: int) -> Start:
    """Run the group's schedules ``0..n-1`` and say where schedule ``n`` begins."""
    group = _Group(endpoint, seed, mode, post_mode)
    try:
        for i in range(n):
            group.schedule(i)
        return group.start(n)
    finally:
        group.close()


def replay(endpoint: str, seed: int, mode: Mode, post_mode: str, start: Start) -> Report:
    """The group's schedule ``start.n`` alone, as it ran after the ones before it (``start``: what
    :func:`start_of` said, in a run of the same code up to that schedule)."""
    group = _Group(endpoint, seed, mode, post_mode)
    try:
        group.resume(start)
        group.schedule(start.n)
    finally:
        report = group.close()
    return report


def scenarios(endpoint: str, seed: int, schedules: int = 150) -> list[Report]:
    """``schedules`` split over (MREC standard, MREC hot, MRSC hot), each on its own global table;
    one Report per (approach, mode). (Side by side they take as long: DynamoDB Local is the bottleneck.)"""
    groups = ((Mode.MREC, "standard"), (Mode.MREC, "hot"), (Mode.MRSC, "hot"))
    per = max(1, -(-schedules // len(groups)))
    return [_group(endpoint, seed + 100 * i, mode, post_mode, per) for i, (mode, post_mode) in enumerate(groups)]


if __name__ == "__main__":
    # a quick look: python -m proof.regions.likes <endpoint> [schedules]
    # where a group's schedule n begins (for replay): python -m proof.regions.likes start <endpoint> <group seed> <mrec|mrsc> <post mode> <n>
    import sys

    if sys.argv[1] == "start":
        endpoint, group_seed, table_mode, post_mode, n = sys.argv[2:7]
        print(start_of(endpoint, int(group_seed), Mode(table_mode), post_mode, int(n)))
    else:
        for rep in scenarios(sys.argv[1], 7, int(sys.argv[2]) if len(sys.argv) > 2 else 30):
            print(rep.verdict, rep.name, rep.operations, "ops", rep.faults, "faults", rep.over, "over", rep.under, "under", rep.notes[:6])
