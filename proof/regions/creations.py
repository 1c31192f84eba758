"""Creations across Regions (issue 25, item 4): two Regions create one shared identity at once.

Each schedule uses fresh ids. Two clients send their creations at seeded instants inside a burst of
:data:`BURST` simulated seconds (shorter than most replication delays: both Regions write before
they see each other), a third of the schedules with the Regions partitioned from the start; the
proof's client faults are on in every Region. A client told 409 ``wrong_region`` re-sends in the
Region named; one told 503 re-sends the same request. Then heal, settle and check every Region:

* **posts** (MREC): every acknowledged creation (201 or 200) is the post every Region holds; two
  different acknowledged creations of one id are a breach (one vanished);
* **resources** (MREC): likewise for the resource; then clients take 1 unit at a time in both
  Regions until refused: the CONFIRMED units never exceed the stored capacity (no oversell);
* **transfers** (MREC): one Idempotency-Key sent in both Regions (each to the other); after
  receiving, every Region's shares sum to the capacity with nothing in flight (no debit lost);
* **MRSC** (posts and resources): the conditional create sees every Region: one acknowledged
  creation per id, the other 409 ``already_exists``.

docs/regions.md "Creations".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from counters.core.errors import AlreadyExists, ContentionError, CounterError, InsufficientCapacity, WrongRegion
from counters.core.failures import RetryPolicy
from counters.core.regions import GlobalTableMode, Topology
from counters.services.likes import Likes
from counters.services.reservations import Reservations
from proof.checker import Report
from proof.regions import MREC_REGIONS, MRSC_REGIONS, Schedule, Timeline, detach, global_table, region_faults, schedules
from testkit.regions import Delays, GlobalTable, Mode

BURST = 0.1
RESENDS = 8
DELAYS = Delays(tail=0.15, tail_max=600.0)
RETRY = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.01)


def _report(name: str) -> Report:
    return Report(name, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "exact")


def _services(gt: GlobalTable) -> tuple[dict[str, Likes], dict[str, Reservations]]:
    mode = GlobalTableMode(gt.mode.value)
    regions = tuple(sorted(gt.regions))
    likes = {r: Likes(gt.table_name, dynamodb=gt.client(r), retry=RETRY, topology=Topology(mode, r, regions)) for r in gt.regions}
    res = {r: Reservations(gt.table_name, dynamodb=gt.client(r), retry=RETRY, topology=Topology(mode, r, regions)) for r in gt.regions}
    return likes, res


def _send(region: str, call: Callable[[str], Any], report: Report) -> tuple[str, Any]:
    """One client's request: ``("ack", answer)``, ``("refused", error)`` (409 ``already_exists`` or
    ``insufficient_capacity``) or ``("gave up", error)``; re-sent after a 503, and in the Region a
    409 ``wrong_region`` names."""
    error: Exception | None = None
    for _ in range(RESENDS):
        report.operations += 1
        try:
            return "ack", call(region)
        except WrongRegion as refused:
            region = refused.region
        except (AlreadyExists, InsufficientCapacity) as exc:
            return "refused", exc
        except ContentionError as exc:
            error = exc
    return "gave up", error


def _read(call: Callable[[], Any]) -> Any:
    """A check's read, re-sent while the client faults make it busy."""
    for _ in range(RESENDS):
        try:
            return call()
        except ContentionError:
            continue
    return call()


def _burst(gt: GlobalTable, schedule: Schedule, steps: list[Callable[[], None]]) -> bool:
    """Run ``steps`` at seeded instants inside the burst, partitioned from the start in a third of
    the schedules (healed afterwards); settle. Returns whether it partitioned."""
    partitioned = gt.mode is Mode.MREC and schedule.index % 3 == 0  # a third of the schedules, the first included
    if partitioned:
        gt.partition(*gt.regions[:2])
    timeline = Timeline(gt)
    for t, step in zip(schedule.times(len(steps), BURST), steps, strict=True):
        timeline.at(t, step)
    timeline.run()
    if partitioned:
        gt.advance(schedule.rng.uniform(5.0, 120.0))
        gt.heal()
    gt.settle()
    return partitioned


def _posts(gt: GlobalTable, likes: dict[str, Likes], schedule: Schedule, report: Report) -> None:
    post_id = f"c{schedule.index}-{schedule.rng.randrange(10**6)}"
    regions = list(gt.regions)
    schedule.rng.shuffle(regions)
    acked: dict[str, str] = {}

    def create(author: str, region: str) -> Callable[[], None]:
        def step() -> None:
            outcome, _ = _send(region, lambda r: likes[r].posts.create_post(author_id=author, body=author, post_id=post_id), report)
            if outcome == "ack":
                acked[author] = author
            elif outcome == "gave up":
                report.unknown += 1

        return step

    _burst(gt, schedule, [create("alice", regions[0]), create("bob", regions[1])])
    report.acknowledged += len(acked)
    report.final += 1
    if len(acked) > 1:
        report.breaches += 1
        report.notes.append(f"post {post_id}: both creations acknowledged")
    for region in gt.regions:
        stored = _read(lambda r=region: likes[r].posts.get_post(post_id))
        if acked and stored["authorId"] not in acked:
            report.breaches += 1
            report.notes.append(f"post {post_id} in {region}: {stored['authorId']}, acknowledged {sorted(acked)}")


def _resources(gt: GlobalTable, res: dict[str, Reservations], schedule: Schedule, report: Report) -> None:
    rid = f"c{schedule.index}-{schedule.rng.randrange(10**6)}"
    regions = list(gt.regions)
    schedule.rng.shuffle(regions)
    acked: dict[int, str] = {}

    def create(capacity: int, strategy: str, region: str) -> Callable[[], None]:
        def step() -> None:
            outcome, _ = _send(region, lambda r: res[r].create_resource(rid, capacity=capacity, strategy=strategy), report)
            if outcome == "ack":
                acked[capacity] = strategy
            elif outcome == "gave up":
                report.unknown += 1

        return step

    _burst(
        gt,
        schedule,
        [create(4 + schedule.rng.randrange(4), "crt" if gt.mode is Mode.MREC else "set", regions[0]), create(20, "set", regions[1])],
    )
    report.acknowledged += len(acked)
    report.final += 1
    if len(acked) != 1:
        report.breaches += len(acked) > 1
        report.notes.append(f"resource {rid}: {len(acked)} creations acknowledged")
        return
    (capacity,) = acked
    confirmed = 0
    for region in gt.regions:  # take 1 unit at a time in every Region until refused
        for n in range(capacity + 2):
            outcome, _ = _send(region, lambda r, n=n: res[r].reserve(rid, 1, f"{r}-{n}"), report)
            if outcome != "ack":
                break
            confirmed += 1
    gt.settle()
    for region in gt.regions:
        view = _read(lambda r=region: res[r].get_resource(rid))
        if view["capacity"] != capacity:
            report.breaches += 1
            report.notes.append(f"resource {rid} in {region}: capacity {view['capacity']}, acknowledged {capacity}")
    if confirmed > capacity:
        report.over += confirmed - capacity
        report.notes.append(f"resource {rid}: {confirmed} units CONFIRMED against {capacity}")


def _transfers(gt: GlobalTable, res: dict[str, Reservations], schedule: Schedule, report: Report) -> None:
    rid = f"t{schedule.index}-{schedule.rng.randrange(10**6)}"
    a, b = gt.regions[:2]
    outcome, _ = _send(a, lambda r: res[r].create_resource(rid, capacity=10, strategy="set", shares={a: 5, b: 5}), report)
    if outcome != "ack":
        report.unknown += 1
        return
    gt.settle()
    sent: list[int] = []

    def move(source: str, target: str, quantity: int) -> Callable[[], None]:
        def step() -> None:
            done, _ = _send(source, lambda r: res[r].escrow.transfer(rid, target, quantity, "same-key"), report)
            if done == "ack":
                sent.append(quantity)
            else:
                report.unknown += 1

        return step

    _burst(gt, schedule, [move(a, b, 1 + schedule.rng.randrange(5)), move(b, a, 1 + schedule.rng.randrange(5))])
    report.acknowledged += len(sent)
    report.final += 1
    for _ in range(3):  # a receive's faults leave transfers for the next one
        for region in (a, b):
            try:
                res[region].escrow.receive_transfers(rid)
            except CounterError:
                pass
        gt.settle()
    for region in (a, b):
        view = _read(lambda r=region: res[r].get_resource(rid))
        total = sum(int(s["capacity"]) for s in view["regions"].values())
        if total + int(view["inFlight"]) != 10:
            report.under += 1
            report.notes.append(f"transfers of {rid} in {region}: shares {view['regions']}, in flight {view['inFlight']} (of 10)")
        elif view["inFlight"]:
            report.notes.append(f"transfers of {rid} in {region}: {view['inFlight']} still in flight after three receives")


def _group(endpoint: str, seed: int, mode: Mode, name: str, count: int, run: Callable[..., None], which: str) -> Report:
    started = time.monotonic()
    gt = global_table(endpoint, seed, mode, regions=MRSC_REGIONS if mode is Mode.MRSC else MREC_REGIONS, delays=DELAYS)
    faults = region_faults(gt, seed)
    likes, res = _services(gt)
    report = _report(name)
    try:
        for schedule in schedules(seed, count):
            run(gt, likes if which == "likes" else res, schedule, report)
    finally:
        report.faults = detach(faults)
        gt.delete()
    report.notes.insert(0, f"{count} schedules in {time.monotonic() - started:.1f} s; replication {gt.stats.as_dict()}")
    if not report.faults:
        report.unexercised.append("client faults")
    if mode is Mode.MREC and not gt.stats["held_by_partition"]:
        report.unexercised.append("partition")
    return report


def scenarios(endpoint: str, seed: int, schedules: int = 200) -> list[Report]:
    """``schedules`` split over five rows (MREC posts, resources, transfers; MRSC posts, resources)."""
    groups: list[tuple[Mode, str, Callable[..., None], str]] = [
        (Mode.MREC, "creations across Regions (MREC, posts): one id created at once in two Regions, no 201 vanishes", _posts, "likes"),
        (Mode.MREC, "creations across Regions (MREC, resources): one id at once in two Regions, never oversold", _resources, "res"),
        (Mode.MREC, "creations across Regions (MREC, transfers): one key in both Regions, no debit lost", _transfers, "res"),
        (Mode.MRSC, "creations across Regions (MRSC, posts): the conditional create sees every Region", _posts, "likes"),
        (Mode.MRSC, "creations across Regions (MRSC, resources): the conditional create sees every Region", _resources, "res"),
    ]
    per = max(1, -(-schedules // len(groups)))
    return [_group(endpoint, seed + 100 * i, mode, name, per, run, which) for i, (mode, name, run, which) in enumerate(groups)]


if __name__ == "__main__":  # a quick look: python -m proof.regions.creations <endpoint> [schedules]
    import sys

    for rep in scenarios(sys.argv[1], 7, int(sys.argv[2]) if len(sys.argv) > 2 else 20):
        print(rep.verdict, rep.name, rep.operations, "ops", rep.faults, "faults", rep.breaches, "breaches", rep.notes[:6])
