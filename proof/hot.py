"""Hot posts in the proof: like storms whose tally the stream aggregator keeps, under faults and a
perturbed stream.

* :class:`StreamHarness` plays Lambda's event source mapping for the LikeAggregatorFunction: it
  reads DynamoDB Local's stream with the local stack's poller (the template's subscription and
  filter) into a log, and invokes **the real handler** (functions/like_aggregator/app.py) with
  windows of that log, perturbed: a window delivered twice in a row (``duplicate``), an older
  window delivered again after newer ones (``late``), a window restarted from an earlier record
  (``restart``, as after a reported failure or a bisect), the handler dying after its first
  post's UpdateItem committed (``crash``; Lambda then re-drives the batch whole or bisected:
  ``bisect``), and the handler's own ``batchItemFailures`` honoured (``reported``). The
  aggregator's client has its own fault injector. Windows always start at or before Lambda's
  checkpoint (the first record not yet processed): what Lambda guarantees, and what the
  aggregator relies on.
* After every delivery it checks each post's ``likeTally`` against the log: the sum of the deltas
  of the records at or below the post's stored checkpoint of each spread key (``bad reads``: the
  tally is exact as of its checkpoints, at every moment, not only at the end).
* :class:`Intents` records every like/unlike with its stamp (request time, request id: the order
  the toggle uses) and what its caller was told; :meth:`Intents.check` holds each (post, user)'s
  final state to the latest request whose stamp is known to be recorded.

Scenarios (registered in :mod:`proof.scenarios`): ``likes-hot`` (a storm on two hot posts),
``likes-order`` (replays older than a later request, both modes), ``likes-switch`` (a storm on a
post switched standard -> hot -> standard) and
``likes-grow`` (a storm while the posts' spread grows, with a writer whose view of it is stale).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proof.checker import Report

ROOT = Path(__file__).resolve().parent.parent
FN = "LikeAggregatorFunction"
LIKE_PREFIX = "LIKE#USER#"
# The aggregator's own UpdateItem calls (few: one per post per delivery) are faulted more often
# than the writers' so that every kind fires a few times per scenario.
AGGREGATOR_FAULTS = {"after_commit": 0.12, "resend": 0.1, "conflict": 0.06, "throttle": 0.1, "unavailable": 0.06}
# Stream perturbations, per delivery.
PERTURB = {"duplicate": 0.25, "late": 0.2, "restart": 0.25, "crash": 0.18, "contention": 0.12, "bisect": 0.6}
MIN_EACH = 3  # every fault kind and perturbation must have happened this often, or the run proved little
WINDOW = 10  # records per delivery at most (the template says 500: small windows make more deliveries, more perturbed)


@dataclass(frozen=True)
class Kit:
    """What the scenarios take from the proof's runner (proof/scenarios.py): a fresh table, the usual
    fault injector on the layer's client, a thread pool, a client without faults."""

    new_table: Callable[[Any], str]
    with_faults: Callable[[int], Any]
    run_parallel: Callable[[list[Callable[[], None]], int], None]
    plain_client: Callable[[], Any]


# ----------------------------------------------------------------------------- table shapes
def like_owner(item: dict[str, Any]) -> tuple[str, str] | None:
    """(post id, user id) of a like item, in either layout: ``POST#<id>`` (standard posts, older
    layout) or ``POST#<id>#S<n>`` (hot posts, and new posts in both modes); ``None`` for anything
    else. Hot and new like items carry ``postId``; older ones are parsed from the key."""
    from counters.store.post_items import parse_hot_pk

    sk = str(item.get("SK", ""))
    pk = str(item.get("PK", ""))
    if not sk.startswith(LIKE_PREFIX) or not pk.startswith("POST#") or "livesIn" in item:  # a pointer is no like item
        return None
    user = str(item.get("userId") or sk[len(LIKE_PREFIX) :])
    if item.get("postId"):
        return str(item["postId"]), user
    parsed = parse_hot_pk(pk)
    return (parsed[0] if parsed else pk[len("POST#") :]), user


def is_liked(item: dict[str, Any]) -> bool:
    """A like item that counts: no ``liked`` attribute (written before tombstones) or ``liked`` true."""
    return item.get("liked", True) is True


def likes_by_post(items: list[dict[str, Any]]) -> tuple[dict[str, dict[str, dict[str, Any]]], list[str]]:
    """Like items (plain dicts, :func:`counters.core.client.from_item`) grouped by post, then user;
    and a list of problems: one (post, user) with two items (two layouts at once)."""
    grouped: dict[str, dict[str, dict[str, Any]]] = {}
    problems = []
    for item in items:
        owner = like_owner(item)
        if owner is None:
            continue
        post, user = owner
        if user in grouped.setdefault(post, {}):
            problems.append(f"{post}/{user}: two like items ({grouped[post][user]['PK']} and {item['PK']})")
        grouped[post][user] = item
    return grouped, problems


def scan(ddb: Any, table: str) -> list[dict[str, Any]]:
    from counters.store.items import from_item

    items = []
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items += [from_item(i) or {} for i in page["Items"]]
    return items


def meta(ddb: Any, table: str, post: str) -> dict[str, Any]:
    from counters.store.items import from_item

    raw = ddb.get_item(TableName=table, Key={"PK": {"S": f"POST#{post}"}, "SK": {"S": "META"}}, ConsistentRead=True).get("Item")
    return from_item(raw) or {}


def counted_items(ddb: Any, table: str, post: str) -> list[dict[str, Any]]:
    """META and, past 64 lanes, the post's lane groups' items (each counts its own lanes; the post's
    tally is their sum: docs/likes.md "Lane groups"), each read strongly consistent."""
    from counters.store.items import from_item, to_item
    from counters.store.post_items import group_key, groups_of

    first = meta(ddb, table, post)
    found = [first]
    for group in groups_of(int(first.get("spread", 0))):
        raw = ddb.get_item(TableName=table, Key=to_item(group_key(post, group)), ConsistentRead=True).get("Item")
        found.append(from_item(raw) or {})
    return found


# ----------------------------------------------------------------------------- the aggregator
class Crash(RuntimeError):
    """The aggregator's process died mid-batch (raised after a post's write committed)."""


def aggregator_module() -> Any:
    """functions/like_aggregator/app.py (testkit.functions: imported once; it reads nothing at import)."""
    from testkit.functions import handler_module, template_function

    return handler_module(template_function(FN, "unused"))


_MODULE: Any = None


def function_environment(table: str) -> contextlib.AbstractContextManager[dict[str, str]]:
    """The function's environment from template.yaml (Powertools reads it per call), restored after."""
    from testkit.functions import environment, template_function

    return environment(template_function(FN, table))


@dataclass
class StreamHarness:
    """Lambda's event source mapping for the aggregator, perturbed (see the module doc)."""

    table: str
    endpoint: str
    ddb: Any  # a plain client, for the checks
    rng: random.Random
    posts: list[str]  # the posts whose tally is checked after every delivery (hot all along)
    client: Any  # the aggregator's own client (a fault injector is attached here)
    perturb: dict[str, float] = field(default_factory=lambda: dict(PERTURB))
    window: int = WINDOW
    log: list[dict[str, Any]] = field(default_factory=list)
    position: int = 0  # Lambda's checkpoint: every record below it was processed
    windows: list[tuple[int, int]] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    bad_reads: int = 0
    problems: list[str] = field(default_factory=list)
    changes: list[Any] = field(default_factory=list)  # hot_change() of each record of the log (None: not a count)

    def __post_init__(self) -> None:
        global _MODULE
        from counters.core.failures import RetryPolicy
        from counters.streams import like_aggregator
        from devstack.streams import StreamPoller, subscriptions
        from testkit.faults import FaultInjector

        self.faults = FaultInjector(self.client, seed=self.rng.randrange(2**32))
        for kind, rate in AGGREGATOR_FAULTS.items():
            self.faults.add(kind, rate=rate, operations={"UpdateItem"}, at_least=MIN_EACH)  # the floor by construction
        self.aggregator = like_aggregator(
            self.table, dynamodb=self.client, retry=RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)
        )
        self._crash_after: int | None = None
        original = self.aggregator.apply_parent

        def apply_parent(parent: str, changes: list[Any], **kwargs: Any) -> Any:
            applied = original(parent, changes, **kwargs)
            if self._crash_after is not None:
                self._crash_after -= 1
                if self._crash_after <= 0:
                    self._crash_after = None
                    raise Crash(f"the aggregator died after {parent}'s write")
            return applied

        self.aggregator.apply_parent = apply_parent  # type: ignore[method-assign]  # the real write, then maybe death
        self._env = function_environment(self.table)
        env = self._env.__enter__()
        if _MODULE is None:
            _MODULE = aggregator_module()  # after the environment: Powertools reads its namespace at import
        self.module = _MODULE
        settings = self.module.function.settings_type.from_env(env)
        self.module.function.configure(settings, self.aggregator)
        subs = [s for s in subscriptions() if s.function == FN]
        self.poller = StreamPoller(self.table, self.endpoint, {FN: self._capture}, subs)

    def close(self) -> None:
        self.faults.detach()
        self.module.function.configure(None)
        self._env.__exit__(None, None, None)

    def _capture(self, event: dict[str, Any]) -> tuple[str, Any]:
        from counters.streams import hot_change

        self.log.extend(event["Records"])
        self.changes.extend(hot_change(r) for r in event["Records"])
        return "ok", {"batchItemFailures": []}

    # -- delivering ------------------------------------------------------------------------
    def _invoke(self, start: int, end: int, *, crash: bool = False, contention: bool = False) -> dict[str, Any] | None:
        """The real handler on log[start:end]; ``None`` if it died. ``contention``: the first post's
        write is throttled for its whole retry budget (the handler reports its first record)."""
        from devstack.runtime import LambdaContext
        from testkit.faults import Rule

        self._crash_after = 1 if crash else None
        self.counts["deliveries"] += 1
        forced = Rule("throttle", frozenset({"UpdateItem"}), 1.0, self.aggregator.retry.max_attempts)
        if contention:
            self.faults.rules.insert(0, forced)
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # the EMF metrics it prints
                warnings.filterwarnings("ignore", message="No application metrics to publish")  # a death before any
                return self.module.lambda_handler({"Records": self.log[start:end]}, LambdaContext.for_function(FN, 512, 30))
        except Crash:
            self.counts["crash"] += 1
            return None
        finally:
            self._crash_after = None
            if contention:
                self.faults.rules.remove(forced)
            self.verify()

    def _consume(self, start: int, end: int, answer: dict[str, Any]) -> None:
        """Move the checkpoint as Lambda does with ReportBatchItemFailures."""
        failed = [f["itemIdentifier"] for f in answer.get("batchItemFailures") or []]
        if not failed:
            self.position = max(self.position, end)
            return
        self.counts["reported"] += 1
        seqs = [r["dynamodb"]["SequenceNumber"] for r in self.log[start:end]]
        if failed[0] not in seqs:
            self.problems.append(f"batchItemFailures named {failed[0]}, not a record of the batch")
            return
        self.position = start + seqs.index(failed[0])  # every record before it is processed

    def _draw(self, kind: str, counted: str | None = None) -> bool:
        """A perturbation's draw: forced while ``counted`` (default ``kind``) is below ``MIN_EACH``
        (the power floor by construction, whatever the seed), then at its rate."""
        forced = self.counts.get(counted or kind, 0) < MIN_EACH
        return self.rng.random() < self.perturb[kind] or forced

    def step(self) -> bool:
        """One delivery (and its perturbations); False when nothing is left to deliver."""
        if self.position >= len(self.log):
            return False
        rng = self.rng
        if self.windows and self._draw("late"):
            old = rng.choice(self.windows[-12:])
            self.counts["late"] += 1
            self._invoke(*old)  # a stale copy of an older batch: its answer changes nothing
        start = self.position
        if start > 0 and self._draw("restart"):
            start = rng.randint(max(0, start - self.window), start - 1)  # from an earlier record
            self.counts["restart"] += 1
        end = min(len(self.log), max(start + rng.randint(1, self.window), self.position + 1))
        self.windows.append((start, end))
        if self._draw("crash"):
            self._invoke(start, end, crash=True)
            if end - start > 1 and self._draw("bisect"):  # BisectBatchOnFunctionError: halves, in order
                self.counts["bisect"] += 1
                mid = (start + end) // 2
                self.windows.append((start, mid))
                answer = self._invoke(start, mid)
                if answer is None:
                    return True
                self._consume(start, mid, answer)
                if self.position < mid:
                    return True
                start = mid
            # else re-driven whole, below
        contention = self._draw("contention", "reported")
        answer = self._invoke(start, end, contention=contention)
        if answer is None:
            return True
        self._consume(start, end, answer)
        counted = any(c is not None for c in self.changes[start:end])  # a window of creations that count nothing writes no tally
        if contention and counted and not answer.get("batchItemFailures"):
            self.problems.append(f"records {start}..{end}: the first post's write gave up, yet no batchItemFailures")
        if self._draw("duplicate"):
            self.counts["duplicate"] += 1
            self._invoke(start, end)  # delivered again right after, whole
        return True

    def poll(self) -> int:
        before = len(self.log)
        self.poller.poll_once()
        return len(self.log) - before

    def run(self, stop: threading.Event) -> None:
        """Deliver while the storm runs; after ``stop``, until the stream has nothing new."""
        quiet = 0
        while True:
            new = self.poll()
            while self.step():
                pass
            if stop.is_set():
                quiet = quiet + 1 if new == 0 else 0
                if quiet >= 2:
                    return
            else:
                time.sleep(0.02)

    def finish(self, late: int = 5) -> None:
        """Drain, then a few more late copies of old windows (nothing may change)."""
        stop = threading.Event()
        stop.set()
        self.run(stop)
        for _ in range(late):
            if self.windows:
                self.counts["late"] += 1
                self._invoke(*self.rng.choice(self.windows))

    # -- checking --------------------------------------------------------------------------
    def verify(self) -> None:
        """Every post's tally is the sum of the log's deltas at or below its stored checkpoints."""
        from counters.primitives.aggregator import padded

        for post in self.posts:
            items = counted_items(self.ddb, self.table, post)  # a lane is checkpointed on one item only
            checkpoints = {lane: str(seq) for item in items for lane, seq in (item.get("aggSeq") or {}).items()}
            want = sum(
                c.delta
                for c in self.changes
                if c is not None and c.parent == post and c.lane in checkpoints and padded(c.seq) <= checkpoints[c.lane]
            )
            tally = sum(int(item.get("likeTally", 0)) for item in items)
            if tally != want:
                self.bad_reads += 1
                if len(self.problems) < 10:
                    self.problems.append(
                        f"{post}: likeTally {tally} (over {len(items)} items) but the log up to its checkpoints sums to {want}"
                    )

    def power(self) -> dict[str, int]:
        faults = {f"aggregator {k}": self.faults.injected.get(k, 0) for k in AGGREGATOR_FAULTS}
        stream = {k: self.counts.get(k, 0) for k in STREAM_KINDS}
        return {**faults, **stream}

    def describe(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.injected.items()))
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return f"stream: {len(self.log)} records, {counts}; aggregator client faults: {faults or 'none'}"


# ----------------------------------------------------------------------------- intents
@dataclass
class Intent:
    post: str
    user: str
    liked: bool
    at: int
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    status: str = "unknown"  # ok | stale | unknown (the first definite answer is kept)
    answers: list[str] = field(default_factory=list)
    expected: str | None = None  # the order scenario knows each answer in advance

    @property
    def stamp(self) -> tuple[int, str]:
        return (self.at, self.request_id)


class Intents:
    """Every like/unlike with its stamp, and what its caller was told."""

    def __init__(self, likes: Any, *others: Any) -> None:
        """``likes``, and ``others``: more processes; each send goes through one of them at random."""
        self.processes = [likes, *others]
        self.all: list[Intent] = []
        self._lock = threading.Lock()
        self._rng = random.Random(len(self.processes))

    def new(self, post: str, user: str, liked: bool, at: int | None = None) -> Intent:
        from counters.primitives.toggle import now_ms

        intent = Intent(post, user, liked, now_ms() if at is None else at)
        with self._lock:
            self.all.append(intent)
        return intent

    def send(self, intent: Intent, *, attempts: int = 8, via: Any = None) -> str:
        """Send until answered (re-sends are the same request: same id, same time); the answer.
        ``via``: this process, not one drawn at random."""
        for _ in range(attempts):
            with self._lock:
                likes = via if via is not None else self._rng.choice(self.processes)
            try:
                change = (likes.toggling.like if intent.liked else likes.toggling.unlike)(
                    intent.post, intent.user, request_id=intent.request_id, at=intent.at
                )
            except Exception:  # noqa: BLE001 - contention, a lost answer, a 500: unknown to the caller; re-sent
                continue
            answer = "stale" if change.result.reason == "stale" else "ok"
            intent.answers.append(answer)
            if intent.status == "unknown":
                intent.status = answer
            return answer
        intent.answers.append("unknown")
        return "unknown"

    def check(self, grouped: dict[str, dict[str, dict[str, Any]]]) -> tuple[int, list[str]]:
        """(pairs whose final state is not the latest recorded request's, what they were).

        A definite answer bounds the latest recorded stamp from below: ``ok`` (applied, restamped,
        its own earlier write, or the same state already set by a newer request) by its own stamp,
        ``stale`` strictly (a newer request decided). The final state must be that of an intent
        stamped at or above the greatest bound (strictly above a stale bound); with no definite
        answer, any intent's state or no item at all."""
        by_pair: dict[tuple[str, str], list[Intent]] = {}
        for intent in self.all:
            by_pair.setdefault((intent.post, intent.user), []).append(intent)
        wrong, notes = 0, []
        for (post, user), intents in by_pair.items():
            item = grouped.get(post, {}).get(user)
            final = item is not None and is_liked(item)
            bound: tuple[tuple[int, str], bool] | None = None  # (stamp, strict)
            for i in intents:
                if i.status in ("ok", "stale"):
                    candidate = (i.stamp, i.status == "stale")
                    if bound is None or candidate > bound:
                        bound = candidate
            if bound is None:
                allowed = {i.liked for i in intents} | {False}
            else:
                stamp, strict = bound
                allowed = {i.liked for i in intents if i.stamp > stamp or (i.stamp == stamp and not strict)}
            if final not in allowed:
                wrong += 1
                if len(notes) < 8:
                    story = ", ".join(
                        f"{'like' if i.liked else 'unlike'}@{i.at}:{i.status}" for i in sorted(intents, key=lambda i: i.stamp)
                    )
                    notes.append(f"{post}/{user} ends {'liked' if final else 'unliked'} after {story}")
        return wrong, notes

    def unexpected(self) -> tuple[int, list[str]]:
        """Intents whose answer differs from the one the order scenario predicted."""
        wrong = [i for i in self.all if i.expected is not None and i.status != i.expected]
        notes = [
            f"{i.post}/{i.user} {'like' if i.liked else 'unlike'}@{i.at}: answered {i.answers}, expected {i.expected}" for i in wrong[:8]
        ]
        return len(wrong), notes


# ----------------------------------------------------------------------------- scenarios
def _writer(name: str, **options: Any) -> Any:
    from counters.core.failures import RetryPolicy
    from counters.services.likes import Likes

    return Likes(name, retry=RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01), **options)


WRITER_KINDS = ("after_commit", "resend", "conflict", "throttle", "unavailable")


def floored(injector: Any) -> Any:
    """The writers' fault rules with the power floor by construction: each kind fires on its first
    opportunities until it has fired ``MIN_EACH`` times, then at its rate (never short by the seed)."""
    for rule in injector.rules:
        rule.at_least = max(rule.at_least, MIN_EACH)
    return injector


STREAM_KINDS = ("duplicate", "late", "restart", "crash", "bisect", "reported")


def _report(
    label: str,
    ddb: Any,
    name: str,
    posts: list[str],
    intents: Intents,
    harness: StreamHarness | None,
    writer_faults: Counter[str],
    *,
    extra_power: dict[str, int] | None = None,
    minimum: dict[str, int] | None = None,
    expect_answers: bool = False,
) -> Report:
    """Tally == liked items per post (over/under-count); two like items for one (post, user)
    (duplicates); a pair's final state not the latest recorded request's, or an answer not the
    predicted one (breaches); a tally not the log's sum at its checkpoints after a delivery (bad
    reads); power: every fault kind and perturbation happened at least ``MIN_EACH`` times."""
    grouped, doubled = likes_by_post(scan(ddb, name))
    over = under = final = liked_total = 0
    notes: list[str] = []
    for post in posts:
        tally = sum(int(item.get("likeTally", 0)) for item in counted_items(ddb, name, post))
        liked = sum(1 for item in grouped.get(post, {}).values() if is_liked(item))
        final += tally
        liked_total += liked
        over += max(0, tally - liked)
        under += max(0, liked - tally)
        notes.append(f"{post}: likeTally {tally}, liked items {liked}")
    wrong, stories = intents.check(grouped)
    surprises, surprise_notes = intents.unexpected() if expect_answers else (0, [])
    by_pair: dict[tuple[str, str], list[Intent]] = {}
    for intent in intents.all:
        by_pair.setdefault((intent.post, intent.user), []).append(intent)
    power = {f"writer {k}": writer_faults.get(k, 0) for k in WRITER_KINDS}
    injected = sum(writer_faults.values())
    if harness is not None:
        power.update(harness.power())
        injected += sum(harness.faults.injected.values()) + sum(harness.counts.get(k, 0) for k in STREAM_KINDS)
    power.update(extra_power or {})
    report = Report(
        name=label,
        operations=len(intents.all),
        faults=injected,
        over=over,
        under=under,
        duplicates=len(doubled),
        breaches=wrong + surprises,
        bad_reads=harness.bad_reads if harness else 0,
        final=final,
        acknowledged=sum(1 for mine in by_pair.values() if _must_be_liked(mine)),
        possible=sum(1 for mine in by_pair.values() if any(i.liked for i in mine)),
        documented="exact",
        unknown=sum(1 for i in intents.all if i.status == "unknown"),
    )
    report.notes += notes
    answers = Counter(i.status for i in intents.all)
    report.notes.append("answers: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())) + f"; {liked_total} liked items")
    report.notes.append("power: " + ", ".join(f"{k} {v}" for k, v in power.items()))
    if harness is not None:
        report.notes.append(harness.describe())
        report.notes += harness.problems
    report.notes += doubled[:5] + stories + surprise_notes
    report.unexercised = [k for k, v in power.items() if v < (minimum or {}).get(k, MIN_EACH)]
    return report


def _must_be_liked(mine: list[Intent]) -> bool:
    """The latest definitely answered request of a pair is a like, and nothing newer is unknown."""
    mine = sorted(mine, key=lambda i: i.stamp)
    answered = [i for i in mine if i.status == "ok"]
    return bool(answered) and answered[-1].liked and all(i.liked for i in mine if i.stamp > answered[-1].stamp)


def _storm_plan(rng: random.Random, posts: list[str], users: int) -> list[tuple[str, str, list[bool]]]:
    """Per (post, user) a script of like (True) / unlike (False): like; like, unlike; like, unlike,
    like (a re-like); a lone unlike (a tombstone); like, like; like, unlike, like, unlike."""
    scripts = [[True], [True, False], [True, False, True], [False], [True, True], [True, False, True, False]]
    weights = [3, 3, 3, 1, 1, 1]
    return [(post, f"u{u}", rng.choices(scripts, weights)[0]) for post in posts for u in range(users)]


def _storm(
    kit: Kit,
    intents: Intents,
    plan: list[tuple[str, str, list[bool]]],
    rng: random.Random,
    clients: int,
    between: Callable[[int], None] | None = None,
) -> None:
    """Every step of every script as its own task (a user's steps may run at once: their stamps
    order them), each re-sent until answered and once more: at once, or (3 in 10) late, after
    the storm, older than what followed it. ``between(n)`` runs after the n-th of 3 thirds."""
    tasks: list[tuple[str, str, bool]] = [(post, user, liked) for post, user, script in plan for liked in script]
    rng.shuffle(tasks)
    late: list[Intent] = []
    lock = threading.Lock()

    def task(post: str, user: str, liked: bool, redeliver_late: bool) -> Callable[[], None]:
        def run() -> None:
            intent = intents.new(post, user, liked)
            intents.send(intent)
            if redeliver_late:
                with lock:
                    late.append(intent)
            else:
                intents.send(intent)  # a client retry / redelivery of an answered request

        return run

    def replay(intent: Intent) -> Callable[[], None]:
        return lambda: intents.send(intent) and None

    chunks = 3 if between else 1
    size = -(-len(tasks) // chunks)
    for n in range(chunks):
        part = tasks[n * size : (n + 1) * size]
        kit.run_parallel([task(p, u, liked, rng.random() < 0.3) for p, u, liked in part], clients)
        if between and n < chunks - 1:
            between(n)
    rng.shuffle(late)
    kit.run_parallel([replay(i) for i in late], clients)  # deferred replays


class _Feeding:
    """The harness delivering in a thread while the storm runs; its error is raised on ``join``."""

    def __init__(self, harness: StreamHarness) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(harness,), name="aggregator")
        self.thread.start()

    def _run(self, harness: StreamHarness) -> None:
        try:
            harness.run(self.stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc

    def join(self) -> None:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error


def likes_hot_scenario(ddb: Any, seed: int, clients: int, size: int, *, kit: Kit) -> list[Report]:
    """A storm of likes, unlikes and re-likes on two hot posts under the usual faults, while the
    aggregator is fed a perturbed stream; then drained."""
    name = kit.new_table(ddb)
    posts = ["h1", "h2"]
    setup = _writer(name)
    for post in posts:
        setup.posts.create_post(author_id="proof", body="hot", post_id=post, mode="hot")
    rng = random.Random(seed)
    harness = StreamHarness(name, os.environ["AWS_ENDPOINT_URL_DYNAMODB"], ddb, random.Random(seed + 1), posts, kit.plain_client())
    injector = floored(kit.with_faults(seed))
    intents = Intents(_writer(name))
    feeding = _Feeding(harness)
    try:
        _storm(kit, intents, _storm_plan(rng, posts, max(20, size // 3)), rng, clients)
    finally:
        injector.detach()
        feeding.join()
    harness.finish()
    report = _report("likes, hot posts (stream aggregator, perturbed stream)", ddb, name, posts, intents, harness, injector.injected)
    harness.close()
    ddb.delete_table(TableName=name)
    return [report]


def _order_script(rng: random.Random) -> tuple[str, list[tuple[bool, int]], list[int]]:
    """(kind, [(liked, stamp offset)], delivery order as indexes; an index again is a redelivery)."""
    kind = rng.choice(["like after unlike", "like deferred", "unlike deferred", "random"])
    if kind == "like after unlike":  # like@1 replayed after unlike@2: stale, never liked
        return kind, [(True, 1), (False, 2)], [1, 0]
    if kind == "like deferred":  # like@0, like@1 deferred, unlike@2, then like@1's replay: stale
        return kind, [(True, 0), (True, 1), (False, 2)], [0, 2, 1]
    if kind == "unlike deferred":  # like@0, unlike@1 deferred, like@2, then unlike@1's replay: stale
        return kind, [(True, 0), (False, 1), (True, 2)], [0, 2, 1]
    n = rng.randint(2, 5)
    script = [(rng.random() < 0.6, k) for k in range(n)]
    order = list(range(n))
    rng.shuffle(order)
    order += rng.sample(range(n), rng.randint(0, 2))  # redeliveries, late
    return kind, script, order


def expected_answers(script: list[tuple[bool, int]], order: list[int]) -> list[str]:
    """The toggle's answers to one user's requests delivered one at a time in ``order``: the
    latest stamp wins; an older request asking for the state already there is ``ok``
    (already set), for the other state ``stale``."""
    recorded: tuple[int, bool] | None = None  # (stamp offset, state)
    answers = []
    for index in order:
        liked, at = script[index]
        if recorded is None or at > recorded[0]:
            recorded = (at, liked)
            answers.append("ok")
        elif at == recorded[0] or liked == recorded[1]:
            answers.append("ok")
        else:
            answers.append("stale")
    return answers


def likes_order_scenario(ddb: Any, seed: int, clients: int, size: int, *, kit: Kit) -> list[Report]:
    """The latest request wins, in both modes: each user's requests carry stamps (received
    earlier) and are delivered one at a time in another order (a deferred like replayed after the
    same user's later unlike, ...) under the usual faults; every answer is predicted (``stale``
    for a replay overtaken by the other state) and the tally is exact."""
    from counters.primitives.toggle import now_ms

    reports = []
    for mode in ("standard", "hot"):
        name = kit.new_table(ddb)
        posts = ["o1", "o2"]
        setup = _writer(name)
        for post in posts:
            setup.posts.create_post(author_id="proof", body="order", post_id=post, mode=mode)
        rng = random.Random(seed + (7 if mode == "hot" else 0))
        harness = None
        if mode == "hot":
            # a smaller stream than likes-hot's (one write per request): smaller windows, as many deliveries
            harness = StreamHarness(
                name, os.environ["AWS_ENDPOINT_URL_DYNAMODB"], ddb, random.Random(seed + 2), posts, kit.plain_client(), window=5
            )
        injector = floored(kit.with_faults(seed))
        intents = Intents(_writer(name))
        kinds: Counter[str] = Counter()
        users = [(post, f"u{u}") for post in posts for u in range(max(20, size // 3))]
        plans = {pair: _order_script(rng) for pair in users}
        kinds.update(kind for kind, _, _ in plans.values())
        base = now_ms() - 60_000  # requests received a minute ago, replayed now

        def user_task(post: str, user: str) -> Callable[[], None]:
            _, script, order = plans[(post, user)]

            def run() -> None:
                made = [intents.new(post, user, liked, base + at) for liked, at in script]
                for index, want in zip(order, expected_answers(script, order), strict=True):
                    if made[index].expected is None:
                        made[index].expected = want  # its first answer is the one kept
                    intents.send(made[index])

            return run

        feeding = _Feeding(harness) if harness else None
        try:
            kit.run_parallel([user_task(post, user) for post, user in users], clients)
        finally:
            injector.detach()
            if feeding:
                feeding.join()
        if harness:
            harness.finish()
        stale = sum(1 for i in intents.all if i.status == "stale")
        report = _report(
            f"likes, latest request wins ({mode}; replays older than a later request)",
            ddb,
            name,
            posts,
            intents,
            harness,
            injector.injected,
            extra_power={"stale replays": stale},
            expect_answers=True,
        )
        report.notes.append(
            "scripts: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) + f"; {stale} answered stale, as predicted"
        )
        if harness:
            harness.close()
        reports.append(report)
        ddb.delete_table(TableName=name)
    return reports


RESENDS = 12  # attempts a scenario's own control call (a switch, a growth) gets before the run fails


def _answered(call: Callable[[], Any], what: str, events: Counter[str]) -> None:
    """Send ``call`` until it answers, at most ``RESENDS`` times: an error leaves its outcome unknown to
    the caller, who sends it again (``events["unanswered attempts"]``); the answer counts one ``what``."""
    for _ in range(RESENDS):
        try:
            call()
        except Exception:  # noqa: BLE001 - unknown to the caller: re-sent
            events["unanswered attempts"] += 1
            continue
        events[what] += 1
        return
    raise RuntimeError(f"{what}: never answered in {RESENDS} attempts")


def likes_switch_scenario(ddb: Any, seed: int, clients: int, size: int, *, kit: Kit) -> list[Report]:
    """A storm on a post created ``standard``, switched to ``hot`` after a third of it and back to
    ``standard`` after two thirds (each switch re-sent until answered, then once more), beside a
    post hot all along (batches carry two posts), the aggregator fed throughout."""
    from counters.services.likes import Likes

    name = kit.new_table(ddb)
    posts = ["m1", "m2"]
    setup = _writer(name)
    setup.posts.create_post(author_id="proof", body="switch", post_id="m1", mode="standard")
    setup.posts.create_post(author_id="proof", body="hot", post_id="m2", mode="hot")
    rng = random.Random(seed)
    # after every delivery only m2's tally is held to the log: m1 also counts in its standard phases
    harness = StreamHarness(name, os.environ["AWS_ENDPOINT_URL_DYNAMODB"], ddb, random.Random(seed + 3), ["m2"], kit.plain_client())
    injector = floored(kit.with_faults(seed))
    # Two writers' processes: their cached mode of m1 goes stale at each switch, one for the layer's
    # default (longer than the storm: it writes hot on m1 after the switch back), one for 200 ms.
    intents = Intents(_writer(name), _writer(name, mode_ttl_ms=200))
    switcher = _writer(name)  # a third process switches
    switches: Counter[str] = Counter()

    def switch(n: int) -> None:
        mode = "hot" if n == 0 else "standard"
        _answered(lambda: switcher.posts.switch_mode("m1", mode), f"to {mode}", switches)
        with contextlib.suppress(Exception):
            switcher.posts.switch_mode("m1", mode)  # once more: a re-sent switch changes nothing

    feeding = _Feeding(harness)
    try:
        _storm(kit, intents, _storm_plan(rng, posts, max(20, size // 3)), rng, clients, between=switch)
    finally:
        injector.detach()
        feeding.join()
    harness.finish()
    report = _report(
        "likes, a post switched standard -> hot -> standard mid-storm",
        ddb,
        name,
        posts,
        intents,
        harness,
        injector.injected,
        extra_power={
            "switches": switches["to hot"] + switches["to standard"],
            "m1 flips counted by the aggregator": sum(1 for c in harness.changes if c is not None and c.parent == "m1"),
        },
        minimum={"switches": 2},
    )
    report.notes.append("switches: " + ", ".join(f"{k} {v}" for k, v in sorted(switches.items())))
    report.notes.append(f"m1 ends {Likes(name).posts.get_post('m1').get('mode')}")
    harness.close()
    ddb.delete_table(TableName=name)
    return [report]


def _movers(post_spread: int, count: int, prefix: str) -> list[str]:
    """Users whose lane at ``post_spread`` is not their lane at half of it (their chain has two lanes)."""
    from counters.store.post_items import lane_of

    found = (f"{prefix}{n}" for n in range(100_000))
    return [u for u in found if lane_of(u, post_spread) != lane_of(u, post_spread // 2)][:count]


def _unpointed(ddb: Any, name: str, posts: list[str]) -> list[str]:
    """On each settled post, the users whose item is not in their lane of the spread and whose lane
    holds no pointer to it: a settled like would create a second item there, unexamined."""
    from counters.store.post_items import lane_of, parse_hot_pk

    items = scan(ddb, name)
    meta = {str(item["PK"])[len("POST#") :]: item for item in items if item.get("SK") == "META"}
    pointers = {(str(item["PK"]), str(item["SK"])): int(item["livesIn"]) for item in items if "livesIn" in item}
    problems = []
    for item in items:
        owner, parsed = like_owner(item), parse_hot_pk(str(item.get("PK", "")))
        if owner is None or parsed is None or owner[0] not in posts:
            continue
        post, user = owner
        spread = int(meta[post].get("spread", 8))
        if int(meta[post].get("settled", 0)) != spread or int(parsed[1][1:]) == lane_of(user, spread):
            continue
        if pointers.get((f"POST#{post}#S{lane_of(user, spread)}", str(item["SK"]))) != int(parsed[1][1:]):
            problems.append(f"{post}/{user}: item in {parsed[1]}, no pointer to it in S{lane_of(user, spread)} (settled {spread})")
    return problems


def likes_grow_scenario(ddb: Any, seed: int, clients: int, size: int, *, kit: Kit) -> list[Report]:
    """ "spread grows mid-storm": the ``likes-hot`` storm on a hot post whose spread is grown 8 -> 16
    -> 32 -> 64 -> 128 between its thirds (past 64 lanes counted on a lane group's item), beside a
    post created ``standard`` that is switched to ``hot``, grown to 128 and switched back (its
    unlikes of likes the group counted then take META's part below 0); the aggregator fed a perturbed stream throughout. Three writers' processes:
    the layer's mode TTL, 200 ms, and one whose cached view of both posts (spread 8, g2 standard)
    never expires, so it writes under the old spread all along. After each growth, users whose chain
    has two lanes are liked by a process that knows the new spread and then liked or unliked (a
    tombstone) by the stale one: two items for one user, which the aggregator must find and merge
    (the lowest lane kept with the latest request's state). The end: one item per user, tallies
    exact, the latest request wins."""
    from counters.services.likes import Likes
    from counters.services.likes.merging import Merges

    name = kit.new_table(ddb)
    posts = ["g1", "g2"]
    setup = _writer(name)
    setup.posts.create_post(author_id="proof", body="grows", post_id="g1", mode="hot")
    setup.posts.create_post(author_id="proof", body="switches and grows", post_id="g2", mode="standard")
    rng = random.Random(seed)
    harness = StreamHarness(name, os.environ["AWS_ENDPOINT_URL_DYNAMODB"], ddb, random.Random(seed + 5), ["g1"], kit.plain_client())
    for kind, rate in AGGREGATOR_FAULTS.items():  # the merge's calls too: its transaction, and its reads (busy or down)
        reads = {"GetItem", "BatchGetItem"} if kind in ("throttle", "unavailable") else set()
        harness.faults.add(kind, rate=rate, operations={"TransactWriteItems", *reads}, at_least=MIN_EACH)
    stale = _writer(name, mode_ttl_ms=10**12, max_spread=64)
    for post in posts:
        stale.posts.info(post)  # read once, before any growth and any fault: its view for the whole storm
    injector = floored(kit.with_faults(seed))
    intents = Intents(_writer(name, max_spread=64), _writer(name, mode_ttl_ms=200, max_spread=64), stale)
    grower = _writer(name, max_spread=64)  # grows and switches; knows the spread it grew to
    sweeper = Merges(name)
    events: Counter[str] = Counter()
    forced: list[tuple[str, str]] = []

    def grow(post: str, to: int) -> None:
        def call() -> None:
            grower.posts.known.pop(post, None)  # a fresh read: the spread only grows, take it as found
            info = grower.posts.info(post)
            if (info.spread or 0) < to:
                grower.posts.grow(post, info, to)
            if (grower.posts.info(post).spread or 0) < to:
                raise RuntimeError("not grown yet")

        _answered(call, "growths", events)
        # the retry worker's sweep (the aggregator queues it on AWS): pointers put mid-storm, the
        # post settled, and from then on the writers that read it settled read no older lane
        _answered(lambda: sweeper.settle(post, to), "sweeps", events)

    def stale_duplicates(post: str, spread: int, n: int) -> None:
        """Users created in their new lane by ``grower``, then written by the stale process in their
        old lane (a later stamp): two items each, for the aggregator to merge."""
        for user in _movers(spread, 3, f"{post}s{n}x"):
            first = intents.new(post, user, True)
            intents.send(first, via=grower)
            second = intents.new(post, user, rng.random() < 0.5)
            intents.send(second, via=stale)
            forced.append((post, user))

    def between(n: int) -> None:
        if n == 0:
            grow("g1", 16)
            _answered(lambda: grower.posts.switch_mode("g2", "hot"), "switches", events)
            stale_duplicates("g1", 16, n)
        else:
            grow("g1", 32)
            grow("g2", 16)
            stale_duplicates("g1", 32, n)
            stale_duplicates("g2", 16, n)
            for size in (64, 128):  # past 64 lanes: lanes 64..127 counted on a lane group's item
                grow("g1", size)
                grow("g2", size // 2)
            grow("g2", 128)
            stale_duplicates("g1", 128, n)  # the new items in lanes 64..127: counted on the group's item
            stale_duplicates("g2", 128, n)
            # then standard: its unlikes of likes the group counted take META's part below 0
            _answered(lambda: grower.posts.switch_mode("g2", "standard"), "switches", events)

    feeding = _Feeding(harness)
    try:
        _storm(kit, intents, _storm_plan(rng, posts, max(20, size // 3)), rng, clients, between=between)
    finally:
        injector.detach()
        feeding.join()
    harness.finish()
    spreads = {post: Likes(name).posts.info(post).spread for post in posts}
    merges = sum(int(item.get("merged", 0)) for item in scan(ddb, name) if like_owner(item))  # ADDed on each kept item
    report = _report(
        "likes, spread grows mid-storm (a stale writer, mode switches)",
        ddb,
        name,
        posts,
        intents,
        harness,
        injector.injected,
        extra_power={"growths": events["growths"], "switches": events["switches"], "stale-view pairs": len(forced), "merges": merges},
        minimum={"growths": 3, "switches": 2, "sweeps": 3},
    )
    unpointed = _unpointed(ddb, name, posts)
    report.breaches += len(unpointed)
    report.notes += unpointed[:8]
    report.notes.append(f"spreads at the end: {spreads}; " + ", ".join(f"{k} {v}" for k, v in sorted(events.items())))
    counted_on = {post: [int(item.get("tallyRev", 0)) for item in counted_items(ddb, name, post)[1:]] for post in posts}
    report.notes.append(f"changes counted on lane groups' items (tallyRev of G1..): {counted_on}")
    harness.close()
    ddb.delete_table(TableName=name)
    return [report]
