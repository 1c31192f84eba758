"""The proof over the whole API: scenarios sent over HTTP to the local stack, as a client would.

Each scenario starts a :class:`~devstack.stack.LocalStack` (API on a free port, DynamoDB Local,
moto's SQS, the retry worker and the stream poller in worker processes) with
``DEVSTACK_FAULTS`` injecting throttles, conflicts, errors after commit, unavailable and
forced resends on every function's DynamoDB calls and throttles, unavailable, lost answers
and resends on its SQS calls, and with the local pollers delivering queue messages twice or
again while their first delivery still runs (visibility expired), and stream batches twice.

The client behaves as the docs tell clients to (docs/proof.md, docs/retries.md): it re-sends the same request with the same
``Idempotency-Key`` on a 5xx, a 429, a 409 ``idempotency_key_in_flight`` or a connection error
(atomic and occ resources: only on 503 ``contention`` or that 409, their 500 ``outcome_unknown``
is final), follows every 202's ``Location``
until the operation is final, and sends every request a second time once answered (a client
retry / duplicate). Then the stored items are read directly (a Scan with a plain client) and
checked:

* **undocumented 5xx**: any 5xx that is not 503 ``contention`` or, for atomic/occ resources,
  500 ``outcome_unknown`` (every 500 ``internal_error``, every 502/504 counts);
* **202s**: how many, how long each took to be final (p50/max), unresolved ones, and wrong
  ones: ``APPLIED`` iff the stored change carries this operation's id (``requestId`` /
  ``releasedBy``), ``DUPLICATE`` iff the change is stored by another request, ``REJECTED``
  with a documented reason and no change of its own;
* **stranded**: a resource's ``reserved`` minus the sum of its CONFIRMED records' quantities
  (0 for exact strategies; atomic/occ within [0, quantities of their UNKNOWN/PENDING records]);
* **duplicates**: two posts for one key, two orders for one key, a like counted twice
  (``likeTally`` against the ``LIKE#`` items that are likes, not tombstones), an entry or a reservation applied twice;
* **lost**: an acknowledged change that is not stored (or stored with another value).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from devstack.dynamodb_local import dynamodb_client
from devstack.sqs import DeliveryFaults
from devstack.stack import LocalStack
from proof.hot import LIKE_PREFIX, is_liked, like_owner, likes_by_post
from proof.linearizability import FAIL, OK, BoundedCounter, LikeSet, Recorder, SumRegister, Verdict, check
from testkit.answers import body_of, drifts

DYNAMODB_FAULTS = {"after_commit": 0.03, "resend": 0.02, "conflict": 0.06, "throttle": 0.05, "unavailable": 0.03}
INLINE_RETRY_ATTEMPTS = "2"  # a small in-line budget: contention (202, deferred through SQS) is common
SQS_FAULTS = {"after_commit": 0.08, "resend": 0.05, "throttle": 0.08, "unavailable": 0.06}
DELIVERY = {"duplicate": 0.15, "late": 0.10, "stream_duplicate": 0.25}
CONFLICTING = ["TransactWriteItems", "TransactGetItems", "UpdateItem", "PutItem", "DeleteItem"]
FUNCTIONS = [
    "LikesFunction",
    "ReservationsFunction",
    "LedgerFunction",
    "OrdersFunction",
    "OperationsFunction",
    "RetryWorkerFunction",
    "OrderPointerFunction",
    "LikeAggregatorFunction",
]
# A forced resend is an SDK retry. The atomic strategy's guarantee presumes SDK retries are off
# (its client refuses otherwise; the double application under them has its own test), and the
# reservations function runs atomic's UpdateItem: no forced resends of UpdateItem there.
RESERVATIONS_RESEND = ["TransactWriteItems", "TransactGetItems", "PutItem", "DeleteItem", "GetItem", "Query"]
SEARCH_BUDGET = 30.0
"""Seconds the linearizability search may spend on one row's history before it says ``unknown``."""
HANG_SECONDS = 1800.0
"""A hang guard, not a verdict: a 202 is judged by the work left (:meth:`Client.resolve`: still
PENDING once the retry queue is empty is unresolved, however fast or slow the machine); only a
queue that never empties (a hang) is given up on after this long."""
AUDIT_RESENDS = 400
"""How often ``POST /audits`` is re-sent on its documented 503 ``contention`` ("audit it again"), and
audited again while a post is not settled. An audit of the likes scenarios' posts makes about
``AUDIT_WRITES`` probe writes and ``AUDIT_READS`` reads. With the in-line budget of
``INLINE_RETRY_ATTEMPTS`` attempts under ``DYNAMODB_FAULTS`` most audits answered 503 (about 0.86),
and 20 re-sends failed the run about once in 20 (issue 28: a CI run under load); with 400 the
chance that every one answers 503 is below 1e-20 ([`audit_failure_bound`][proof.http.audit_failure_bound], computed
with the in-line budget; tests/unit/test_proof_http_budget.py). An audit's calls now take
``AUDIT_ATTEMPTS`` attempts each (counters.services.likes.audit), so the bound is a loose upper one:
without that, an audit of a post grown to 32 lanes (``likes-grow``, 64 probes a point) almost never
finished."""
AUDIT_WRITES, AUDIT_READS = 48, 40


def audit_failure_bound(resends: int = AUDIT_RESENDS) -> float:
    """An upper bound on the chance that ``resends`` audits in a row each answer 503: each call fails
    when all of its in-line attempts fault (writes meet every fault kind; reads only throttling and
    unavailability)."""
    attempts = int(INLINE_RETRY_ATTEMPTS)
    write = sum(DYNAMODB_FAULTS.values()) ** attempts
    read = (DYNAMODB_FAULTS["throttle"] + DYNAMODB_FAULTS["unavailable"]) ** attempts
    fails = 1 - (1 - write) ** AUDIT_WRITES * (1 - read) ** AUDIT_READS
    return float(fails**resends)


def fault_spec() -> dict[str, list[Any]]:
    """DEVSTACK_FAULTS for every function: DynamoDB and SQS calls of the layer."""
    spec: dict[str, list[Any]] = {}
    for function in FUNCTIONS:
        rules: list[Any] = []
        for kind, rate in DYNAMODB_FAULTS.items():
            options: dict[str, Any] = {"rate": rate}
            if kind == "conflict":
                options["operations"] = CONFLICTING
            if kind == "resend" and function == "ReservationsFunction":
                options["operations"] = RESERVATIONS_RESEND
            rules.append([kind, options])
        rules += [[kind, {"rate": rate, "services": ["sqs"]}] for kind, rate in SQS_FAULTS.items()]
        spec[function] = rules
    return spec


# ----------------------------------------------------------------------------- measurements
@dataclass
class HttpReport:
    name: str
    documented: str = "exact"  # exact | under (atomic/occ: within their documented bounds)
    requests: int = 0
    faults_ddb: int = 0
    faults_sqs: int = 0
    faults_delivery: int = 0
    undocumented: Counter[str] = field(default_factory=Counter)
    deferred_seconds: list[float] = field(default_factory=list)
    unresolved: int = 0
    wrong: list[str] = field(default_factory=list)
    stranded: int = 0
    stranded_violation: int = 0
    duplicates: int = 0
    lost: int = 0
    bad_reads: int = 0
    off_contract: list[str] = field(default_factory=list)
    """Answers docs/openapi.json does not describe, its objects closed (testkit.answers)."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    linearizable: Verdict | None = None
    """The row's recorded history (invocation and final answer of each request, reads interleaved)
    against its model ([`proof.linearizability`][proof.linearizability]); ``None``: none recorded."""

    @property
    def undocumented_5xx(self) -> int:
        return sum(self.undocumented.values())

    @property
    def verdict(self) -> str:
        broken = (
            self.undocumented_5xx
            or self.unresolved
            or self.wrong
            or self.stranded_violation
            or self.duplicates
            or self.lost
            or self.bad_reads
            or self.off_contract
            or (self.documented == "exact" and self.stranded)
            or (self.linearizable is not None and self.linearizable.result == "NOT LINEARIZABLE")
        )
        return "VIOLATED" if broken else "holds"

    def p(self, q: float) -> str:
        if not self.deferred_seconds:
            return "-"
        values = sorted(self.deferred_seconds)
        return f"{values[min(len(values) - 1, int(q * len(values)))]:.1f}"


def table(reports: list[HttpReport]) -> str:
    lines = [
        "| scenario (HTTP) | documented | requests | faults ddb / sqs / delivery | undocumented 5xx | 202s | 202 final p50 / max s"
        " | unresolved 202 | wrong 202 | stranded | duplicates | lost | bad reads | linearizability | s | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r.name} | {r.documented} | {r.requests} | {r.faults_ddb} / {r.faults_sqs} / {r.faults_delivery} | {r.undocumented_5xx}"
            f" | {len(r.deferred_seconds)} | {r.p(0.5)} / {r.p(1.0)} | {r.unresolved} | {len(r.wrong)} | {r.stranded} | {r.duplicates}"
            f" | {r.lost} | {r.bad_reads} | {r.linearizable.cell() if r.linearizable else '–'} | {r.seconds:.0f} | {r.verdict} |"
        )
    return "\n".join(lines)


def details(reports: list[HttpReport], limit: int = 8) -> str:
    """What made a row fail (and notes), for the results file."""
    out = []
    for r in reports:
        items = [f"undocumented {k}: {v}" for k, v in r.undocumented.items()] + r.wrong[:limit] + r.notes
        items += [f"answer off docs/openapi.json: {d}" for d in dict.fromkeys(r.off_contract)][:limit]
        if len(r.wrong) > limit:
            items.append(f"... {len(r.wrong) - limit} more wrong 202s")
        if items:
            out.append(f"- **{r.name}**: " + "; ".join(items))
    return "\n".join(out)


# ----------------------------------------------------------------------------- the client
@dataclass
class Deferred:
    """A 202 and how it ended."""

    operation_id: str
    final: dict[str, Any] | None
    seconds: float


class Client:
    """An HTTP client as the docs ask for: same request, same key, re-sent until answered."""

    def __init__(self, url: str, pool: int = 64, queue_depth: Callable[[], int] | None = None) -> None:
        """``queue_depth``: the retry queue's messages, visible or in flight (how a 202 is judged)."""
        self.url = url
        self.queue_depth = queue_depth
        self.session = requests.Session()
        self.session.mount("http://", requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=pool))

    def send(
        self,
        report: HttpReport,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        inexact: bool = False,
        attempts: int = 20,
    ) -> requests.Response | None:
        """The final answer (< 500, or the documented 500 of an inexact strategy), or None if
        never answered. ``inexact``: atomic/occ, whose ``outcome_unknown`` is final and which
        are re-sent only after a 503 contention, a 409 idempotency_key_in_flight or a 429."""
        for attempt in range(attempts):
            try:
                response = self.session.request(method, f"{self.url}{path}", json=json_body, headers=headers, timeout=60)
            except requests.RequestException as exc:
                report.requests += 1
                report.undocumented[f"connection error {type(exc).__name__}"] += 1
                if inexact:
                    return None
                time.sleep(min(1.0, 0.05 * 2**attempt))
                continue
            report.requests += 1
            report.off_contract += drifts(method, path, response.status_code, body_of(response.content))
            if response.status_code == 429:
                time.sleep(min(1.0, 0.05 * 2**attempt))
                continue
            if response.status_code == 409 and _error(response) == "idempotency_key_in_flight":
                time.sleep(min(1.0, 0.05 * 2**attempt))  # the key's first request is still running: retry it later
                continue
            if response.status_code < 500:
                return response
            error = _error(response)
            if response.status_code == 503 and error == "contention":
                time.sleep(min(1.0, 0.02 * 2**attempt))
                continue
            if inexact and response.status_code == 500 and error == "outcome_unknown":
                return response  # documented: may or may not hold; never re-sent
            report.undocumented[f"{method} {response.status_code} {error}"] += 1
            if inexact:
                return response  # unknown outcome: atomic/occ are not re-sent
            time.sleep(min(1.0, 0.02 * 2**attempt))
        return None

    def resolve(self, report: HttpReport, response: requests.Response) -> Deferred:
        """Poll a 202's Location until the operation is no longer PENDING. The verdict is bounded by
        work, not by a clock (as tests/conftest.py's ``settled``): the API stored the command before
        it answered 202, so once the retry queue is empty (every message handled and deleted, or
        moved to the DLQ) the record is read one last time, and still PENDING then is unresolved."""
        started = time.monotonic()
        operation_id = response.json()["operationId"]
        location = response.headers["Location"]

        def final() -> Deferred | None:
            polled = self.send(report, "GET", location)
            if polled is not None and polled.status_code == 200 and polled.json().get("status") != "PENDING":
                seconds = time.monotonic() - started
                report.deferred_seconds.append(seconds)
                return Deferred(operation_id, polled.json(), seconds)
            return None

        while (done := final()) is None:
            if self.queue_depth is not None and self.queue_depth() == 0:
                if (done := final()) is not None:
                    return done
                why = "still PENDING with the retry queue empty"
                break
            if time.monotonic() - started > HANG_SECONDS:
                why = f"still PENDING after {HANG_SECONDS:.0f} s with the retry queue not empty (a hang)"
                break
            time.sleep(0.25)
        else:
            return done
        report.unresolved += 1
        report.wrong.append(f"operation {operation_id} {why}")
        return Deferred(operation_id, None, time.monotonic() - started)


def _error(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:40]
    return str(body.get("error") or body.get("message") or "")[:60] if isinstance(body, dict) else ""


# ----------------------------------------------------------------------------- the stack
@dataclass
class Env:
    stack: LocalStack
    client: Client
    ddb: Any
    table: str
    seed: int
    scale: float
    clients: int
    report_dir: Path

    def n(self, base: int, minimum: int = 2) -> int:
        return max(minimum, int(base * self.scale))

    def scan(self) -> list[dict[str, Any]]:
        from counters.store.items import from_item

        items = []
        for page in self.ddb.get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True):
            items += [from_item(i) for i in page["Items"]]
        return items

    def faults(self) -> tuple[int, int, int]:
        """(DynamoDB faults, SQS faults, delivery faults) injected so far."""
        ddb, sqs = injected(self.report_dir)
        delivery = sum(p.duplicated + p.expired for p in self.stack.pollers)
        delivery += self.stack.streams.duplicated if self.stack.streams else 0
        return ddb, sqs, delivery

    def parallel(self, tasks: list[Callable[[], Any]]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=self.clients) as pool:
            return [f.result() for f in [pool.submit(t) for t in tasks]]

    def drained(self, seconds: float = HANG_SECONDS) -> bool:
        """The retry queue empty (its worker always ends a message: deleted, or moved to the DLQ
        after maxReceiveCount); ``seconds`` only guards against a hang."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stack.queue_depth("RetryQueue") == 0:
                return True
            time.sleep(0.25)
        return False


def injected(report_dir: Path) -> tuple[int, int]:
    """(DynamoDB faults, SQS faults) the functions' workers reported into ``report_dir``
    (``DEVSTACK_FAULTS_REPORT``: a JSON file per worker)."""
    ddb = sqs = 0
    for path in report_dir.glob("*.json"):
        by = json.loads(path.read_text()).get("by_service", {})
        ddb += sum(by.get("dynamodb", {}).get("injected", {}).values())
        sqs += sum(by.get("sqs", {}).get("injected", {}).values())
    return ddb, sqs


@contextmanager
def faulty_stack(
    dynamodb_endpoint: str, sqs_endpoint: str, *, seed: int, scale: float, clients: int, params: dict[str, str] | None = None
) -> Iterator[Env]:
    """A LocalStack with every fault on, for one scenario (its own table and queues)."""
    report_dir = Path(tempfile.mkdtemp(prefix="proof-faults-"))
    env = {"DEVSTACK_FAULTS": json.dumps(fault_spec()), "DEVSTACK_FAULTS_REPORT": str(report_dir)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the worker processes read it when they start
    table_name = f"proof-http-{uuid.uuid4().hex[:8]}"
    stack = LocalStack(
        dynamodb_endpoint,
        table_name,
        port=0,
        concurrency=4,
        sqs_endpoint=sqs_endpoint,
        visibility_override=2,
        delivery_faults=DeliveryFaults(duplicate=DELIVERY["duplicate"], late=DELIVERY["late"], seed=seed),
        queue_pollers=2,
        stream_duplicates=DELIVERY["stream_duplicate"],
        params={"InlineRetryAttempts": INLINE_RETRY_ATTEMPTS, **(params or {})},
    )
    ddb = dynamodb_client(dynamodb_endpoint)
    try:
        stack.start()
        yield Env(
            stack,
            Client(stack.api.url, pool=clients * 2, queue_depth=lambda: stack.queue_depth("RetryQueue")),
            ddb,
            table_name,
            seed,
            scale,
            clients,
            report_dir,
        )
    finally:
        stack.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            ddb.delete_table(TableName=table_name)
        except Exception:  # noqa: BLE001 - best effort: DynamoDB Local goes away with the run
            pass
        shutil.rmtree(report_dir, ignore_errors=True)


def _finish(env: Env, report: HttpReport, started: float) -> None:
    if not env.drained():
        report.wrong.append("RetryQueue did not drain")
    dlq = env.stack.queue_depth("RetryDLQ")
    if dlq:
        report.notes.append(f"{dlq} commands in RetryDLQ")
    report.seconds = time.monotonic() - started


def _check_deferred(report: HttpReport, what: str, deferred: Deferred, problem: str | None) -> None:
    if deferred.final is not None and problem:
        report.wrong.append(f"{what}: operation {deferred.operation_id} {deferred.final.get('status')}: {problem}")


def _provenance(deferred: Deferred, stored: dict[str, Any] | None, what: str) -> str | None:
    """What is wrong with a deferred request's final status, given the item it writes (which
    carries the ``requestId`` of the request that wrote it): APPLIED must be its own item,
    DUPLICATE another request's, and these requests are never REJECTED."""
    status = (deferred.final or {}).get("status")
    mine = stored is not None and stored.get("requestId") == deferred.operation_id
    if status == "APPLIED" and not mine:
        return f"but the {what} is not stored with its id"
    if status == "DUPLICATE" and (stored is None or mine):
        return f"but no other request's {what} is stored"
    if status == "REJECTED":
        return f"{(deferred.final or {}).get('result')}"
    return None


def _twice(send: Callable[[], requests.Response | None]) -> list[requests.Response | None]:
    """A request, then the same request again once answered (a client retry / duplicate)."""
    return [send(), send()]


# ----------------------------------------------------------------------------- scenarios
def likes(env: Env) -> list[HttpReport]:
    """Posts created with an Idempotency-Key; likes by distinct users, then unlikes of a subset
    (each phase resolved before the next: docs/retries.md's known limit orders them)."""
    report = HttpReport("likes: posts with Idempotency-Key, like, unlike")
    started = time.monotonic()
    rng = random.Random(env.seed)
    c = env.client
    post_keys = [f"post-key-{i}" for i in range(4)]

    def create(key: str) -> Callable[[], list[requests.Response | None]]:
        body = {"authorId": "author", "body": f"body of {key}"}
        return lambda: _twice(lambda: c.send(report, "POST", "/posts", json_body=body, headers={"Idempotency-Key": key}))

    post_ids: dict[str, set[str]] = {}
    for key, answers in zip(post_keys, env.parallel([create(k) for k in post_keys]), strict=True):
        for answer in answers:
            if answer is None or answer.status_code not in (200, 201):
                report.wrong.append(f"POST /posts key {key}: {answer.status_code if answer is not None else 'no answer'}")
                continue
            post_ids.setdefault(key, set()).add(answer.json()["postId"])
    report.duplicates += sum(len(ids) - 1 for ids in post_ids.values())  # one key answered with two posts
    posts = sorted({i for ids in post_ids.values() for i in ids})
    if not posts:  # nothing to like: the creations' answers are already in report.wrong
        _finish(env, report, started)
        return [report]
    pairs = [(rng.choice(posts), f"u{i}") for i in range(env.n(110))]
    undone = pairs[: env.n(30)]
    deferred: list[tuple[str, str, str, Deferred]] = []
    calls = Recorder()  # a partition per post (standard: its GET is strongly consistent), a set of users

    def toggle(method: str, post: str, user: str) -> Callable[[], None]:
        def run() -> None:
            handle = calls.invoke(post, "like" if method == "PUT" else "unlike", user)
            told: Any = None
            for answer in _twice(lambda: c.send(report, method, f"/posts/{post}/likes/{user}")):
                if answer is None:
                    report.wrong.append(f"{method} {post}/{user}: never answered")
                elif answer.status_code == 202:
                    d = c.resolve(report, answer)
                    deferred.append((method, post, user, d))
                    status = (d.final or {}).get("status")
                    if status in ("APPLIED", "DUPLICATE"):
                        told = OK
                    elif status == "REJECTED" and told is None:
                        told = FAIL
                elif answer.status_code != 200:
                    report.wrong.append(f"{method} {post}/{user}: {answer.status_code} {answer.text[:80]}")
                else:
                    told = OK
            calls.complete(handle, told)

        return run

    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for post in posts:
                handle = calls.invoke(post, "tally")
                answer = c.send(report, "GET", f"/posts/{post}")
                if answer is not None and answer.status_code == 200:
                    calls.complete(handle, int(answer.json()["likeTally"]))
                else:
                    calls.drop(handle)
            time.sleep(0.05)

    reading = threading.Thread(target=reader)
    reading.start()

    def check_phase(method: str, phase: list[tuple[str, str, str, Deferred]]) -> None:
        env.drained()
        likes_now = {like_owner(i): i for i in env.scan() if like_owner(i) and is_liked(i)}
        for _, post, user, d in phase:
            item = likes_now.get((post, user))
            status = (d.final or {}).get("status")
            mine = item is not None and item.get("requestId") == d.operation_id
            problem = None
            if method == "PUT":
                if status == "APPLIED" and not mine:
                    problem = "but its like is not stored with its id" if item is None else "but the stored like is another request's"
                elif status == "DUPLICATE" and (item is None or mine):
                    problem = "but no earlier like is stored" if item is None else "but the stored like is its own"
                elif status == "REJECTED":
                    problem = "the post exists"
            elif status in ("APPLIED", "DUPLICATE") and item is not None:
                problem = "but the like is still stored"
            elif status == "REJECTED":
                problem = f"{(d.final or {}).get('result')}"
            _check_deferred(report, f"{method} {post}/{user}", d, problem)

    env.parallel([toggle("PUT", p, u) for p, u in pairs])
    check_phase("PUT", list(deferred))
    deferred.clear()
    env.parallel([toggle("DELETE", p, u) for p, u in undone])
    stop.set()
    reading.join()
    check_phase("DELETE", list(deferred))
    _finish(env, report, started)

    items = env.scan()
    expected = set(pairs) - set(undone)
    stored_likes = {like_owner(i) for i in items if like_owner(i) and is_liked(i)}
    report.lost += len(expected - stored_likes)
    report.duplicates += len(stored_likes - expected)  # an unlike that did not hold, or a like from nowhere
    stored_posts = [i for i in items if i["SK"] == "META" and i["PK"].startswith("POST#")]
    report.duplicates += max(0, len(stored_posts) - len(post_keys))
    for post in stored_posts:
        counted = sum(1 for p, _ in stored_likes if p == post["postId"])
        handle = calls.invoke(post["postId"], "tally")  # as stored once every request and retry ended
        calls.complete(handle, int(post["likeTally"]))
        if int(post["likeTally"]) != counted:
            report.duplicates += abs(int(post["likeTally"]) - counted)
            report.notes.append(f"post {post['postId']}: likeTally {post['likeTally']} but {counted} likes stored")
    report.linearizable = check(LikeSet(), calls.history(), budget=SEARCH_BUDGET)
    report.faults_ddb, report.faults_sqs, report.faults_delivery = env.faults()
    return [report]


def likes_hot(env: Env, grow: dict[str, tuple[int, ...]] | None = None) -> list[HttpReport]:
    """Two hot posts; each user runs a script of likes and unlikes (like; like, unlike; like,
    unlike, like; a lone unlike) one request after the other (re-sent on a 5xx, every 202 polled
    until final, every answered request sent once more), many users at once. The aggregator (its
    DynamoDB calls faulted like every function's) keeps the tallies from the stream, whose batches
    the local poller delivers twice at times. Then: each (post, user)'s state is its last
    request's, each post's ``likeTally`` equals its liked items once the stream is drained, every
    202 ended APPLIED or DUPLICATE with the state asked for (its request was the user's latest).

    A third post starts standard and an admin switches it to hot, then back, while its users'
    scripts run (``PUT /posts/{id}/mode``, re-sent on a 5xx). At the end ``POST /audits`` must find
    every post settled without drift; then one tally is corrupted in the table and the audit's
    repair must bring it back to its liked items.

    ``grow`` (the ``likes-grow`` row, ``LikesMaxSpread`` 128): each named post's spread is doubled to
    each size in turn, by progress, mid-traffic (one conditional write on META, as a throttled
    LikesFunction would; the functions' DynamoDB Local never throttles). Then the functions'
    cached views go stale, the aggregator queues the sweeps and the retry worker settles the
    posts under the same faults; at the end each grown post must be settled at its spread, every
    user whose item lives in an older lane pointed to it (no settled like could make a second
    item), one item per user, and the audits hold on 32 and 128 lanes (256 probes a point; past 64
    lanes counted on a lane group's item)."""
    title = "likes: hot posts, like/unlike/re-like scripts, stream aggregator, a mode switch, audits"
    report = HttpReport(
        title + (", spreads grown mid-storm (8 -> 16 -> 32, and on to 128: a lane group), swept by the retry worker" if grow else "")
    )
    started = time.monotonic()
    rng = random.Random(env.seed)
    c = env.client
    posts = ["hot-1", "hot-2", "switched"]
    for post in posts:
        body = {"postId": post, "authorId": "author", "body": f"body of {post}", "mode": "standard" if post == "switched" else "hot"}
        for answer in _twice(lambda body=body: c.send(report, "POST", "/posts", json_body=body)):
            if answer is None or answer.status_code not in (200, 201):
                report.wrong.append(f"POST /posts {post}: {answer.status_code if answer is not None else 'no answer'}")
    scripts = [["PUT"], ["PUT", "DELETE"], ["PUT", "DELETE", "PUT"], ["DELETE"], ["PUT", "PUT"]]
    plan = [(rng.choice(posts), f"u{i}", rng.choices(scripts, [3, 3, 3, 1, 1])[0]) for i in range(env.n(90))]
    last: dict[tuple[str, str], str] = {}
    lock = threading.Lock()

    def user(post: str, user_id: str, script: list[str]) -> Callable[[], None]:
        def run() -> None:
            for method in script:
                told = None
                for answer in _twice(lambda method=method: c.send(report, method, f"/posts/{post}/likes/{user_id}")):
                    if answer is None:
                        report.wrong.append(f"{method} {post}/{user_id}: never answered")
                    elif answer.status_code == 200:
                        told = answer.json()["liked"]
                    elif answer.status_code == 202:
                        d = c.resolve(report, answer)
                        status = (d.final or {}).get("status")
                        liked = ((d.final or {}).get("result") or {}).get("liked")
                        if d.final is not None and (status not in ("APPLIED", "DUPLICATE") or liked != (method == "PUT")):
                            report.wrong.append(f"{method} {post}/{user_id}: operation {d.operation_id} {status} {d.final.get('result')}")
                        told = liked
                    else:
                        report.wrong.append(f"{method} {post}/{user_id}: {answer.status_code} {answer.text[:80]}")
                if told is not None and told != (method == "PUT"):
                    report.wrong.append(f"{method} {post}/{user_id}: answered liked={told}, yet it was the user's latest request")
            with lock:
                last[(post, user_id)] = script[-1]

        return run

    def switcher() -> None:
        for k, mode in enumerate(("hot", "standard"), start=1):
            while len(last) < k * len(plan) // 3:  # mid-traffic, by progress
                time.sleep(0.01)
            answer = c.send(report, "PUT", "/posts/switched/mode", json_body={"mode": mode})
            if answer is None or answer.status_code != 200 or answer.json().get("mode") != mode:
                report.wrong.append(f"PUT /posts/switched/mode {mode}: {answer.status_code if answer is not None else 'no answer'}")
            else:
                switches[mode] += 1

    def grower() -> None:
        from counters.services.likes import Likes

        steps = [(post, size) for post, sizes in (grow or {}).items() for size in sizes]
        admin = Likes(env.table, dynamodb=env.ddb, max_spread=max((s for _, s in steps), default=8))
        for k, (post, size) in enumerate(steps, start=1):
            while len(last) < k * len(plan) // (len(steps) + 1):  # mid-traffic, by progress
                time.sleep(0.01)
            info = admin.posts.fresh(post)
            while (info.spread or 0) < size:  # a LikesFunction may grow it too (its injected throttles)
                admin.posts.grow(post, info, 2 * (info.spread or 8))
                info = admin.posts.fresh(post)
            grown[post] = info.spread or 0

    switches: Counter[str] = Counter()
    grown: dict[str, int] = {}
    env.parallel([switcher] + ([grower] if grow else []) + [user(p, u, s) for p, u, s in plan])
    env.drained()
    from counters.store.post_items import GROUP_SK

    deadline = time.monotonic() + 90
    while True:  # the aggregator trails the writes: wait until every tally equals its liked items
        grouped, doubled = likes_by_post(env.scan())
        tallies: Counter[str] = Counter()  # META's and, past 64 lanes, each lane group's item (the sum GET shows)
        for i in env.scan():
            if i.get("SK") in ("META", GROUP_SK) and i.get("postId") in posts:
                tallies[i["postId"]] += int(i.get("likeTally", 0))
        liked = {p: sum(1 for i in grouped.get(p, {}).values() if is_liked(i)) for p in posts}
        if tallies == liked or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    report.duplicates += len(doubled) + sum(abs(tallies.get(p, 0) - liked[p]) for p in posts)
    for post in posts:
        report.notes.append(f"{post}: likeTally {tallies.get(post)}, liked items {liked[post]}")
    for (post, user_id), method in last.items():
        item = grouped.get(post, {}).get(user_id)
        if (item is not None and is_liked(item)) != (method == "PUT"):
            report.lost += 1
            report.notes.append(f"{post}/{user_id}: last request {method}, stored {item and item.get('liked')}")
    report.notes.append(f"switched to hot {switches['hot']}, back to standard {switches['standard']}")
    _audit_and_repair(env, report, posts, liked)
    if grow:
        _settled_growth(env, report, posts, grown)
    _finish(env, report, started)
    report.faults_ddb, report.faults_sqs, report.faults_delivery = env.faults()
    report.notes.append(f"{len(plan)} users, {sum(len(s) for _, _, s in plan)} requests in their scripts")
    aggregator: Counter[str] = Counter()
    for path in env.report_dir.glob("LikeAggregatorFunction-*.json"):
        aggregator.update(json.loads(path.read_text()).get("injected", {}))
    stream = env.stack.streams.duplicated if env.stack.streams else 0
    report.notes.append(f"aggregator's DynamoDB faults: {dict(aggregator) or 'none'}; stream batches delivered twice: {stream}")
    return [report]


def _settled_growth(env: Env, report: HttpReport, posts: list[str], grown: dict[str, int]) -> None:
    """Every post whose spread grew (by the row, or by a LikesFunction meeting injected throttles)
    settled at its spread by the retry worker's sweep, and every user of an older lane pointed to
    (:func:`proof.hot._unpointed`), one item each. The aggregator queues a sweep when its batches
    meet a post unsettled, again after 100 more such batches of a process (a sweep that ended in
    the DLQ): while one is not settled once the queue is empty, a new user's like gives it those
    batches. The pointers are checked at a point judged by the work done, not by time: an audit
    (its probes applied in every lane: the stream poller delivers a shard's batches one after the
    other, so every earlier batch's examination has run), then the retry queue empty (the
    examinations it deferred have run)."""
    from proof.hot import _unpointed

    deadline, nudges = time.monotonic() + HANG_SECONDS, 0  # a hang guard: the sweep is judged by the work left
    while True:
        metas = {i["postId"]: i for i in env.scan() if i.get("SK") == "META" and i.get("postId") in posts}
        unsettled = {p for p in posts if int(metas[p].get("spread", 8)) > 8 and metas[p].get("settled") != metas[p].get("spread")}
        if not unsettled or time.monotonic() > deadline:
            break
        for post in sorted(unsettled):
            nudges += 1
            env.client.send(report, "PUT", f"/posts/{post}/likes/nudge-{nudges}")
        env.drained()
        time.sleep(1.0)  # paces the nudges only: the loop ends on the work left
    for post in sorted(unsettled):
        report.wrong.append(f"{post}: spread {metas[post].get('spread')}, not settled (settled {metas[post].get('settled')})")
    _audits(env, report, posts, repair=False)  # the barrier (docstring)
    env.drained()
    _, doubled = likes_by_post(env.scan())
    report.duplicates += len(doubled)
    problems = _unpointed(env.ddb, env.table, posts)
    report.wrong += problems
    for problem in problems:  # what the table holds for that user, to read the failure from
        post, user = problem.split(":", 1)[0].split("/", 1)
        held = [i for i in env.scan() if str(i.get("PK", "")).startswith(f"POST#{post}#") and str(i.get("SK")) == f"{LIKE_PREFIX}{user}"]
        report.notes.append(f"{post}/{user} holds: {held}")
    spreads = {p: int(metas[p].get("spread", 8)) for p in posts}
    pointers = sum(1 for i in env.scan() if "livesIn" in i)
    report.notes.append(
        f"spreads {spreads} (the row grew {grown}), all settled after {nudges} nudging likes; {pointers} pointers, "
        f"every moved user pointed to ({len(problems)} not)"
    )


def _audits(
    env: Env, report: HttpReport, posts: list[str], repair: bool, seen: list[dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """``POST /audits`` until every post is settled (a faulted aggregator may be behind at first) and
    no answer is ``busy``, ``moving`` or ``deadline`` (a repair or a probe out of its retry budget, raced, or out of time: the
    documented answer is to audit again). ``seen`` collects every answer on the way."""
    audits: dict[str, dict[str, Any]] = {}
    for _ in range(AUDIT_RESENDS):
        answer = env.client.send(report, "POST", "/audits", json_body={"postIds": posts, "repair": repair}, attempts=AUDIT_RESENDS)
        if answer is None or answer.status_code != 200:
            report.wrong.append(f"POST /audits: {answer.status_code if answer is not None else 'no answer'}")
            return audits
        audits = {a["postId"]: a for a in answer.json()["audits"]}
        if seen is not None:
            seen += audits.values()
        if all(a["settled"] and a.get("reason") not in ("busy", "deadline", "moving") for a in audits.values()):
            break
    return audits


def _audit_and_repair(env: Env, report: HttpReport, posts: list[str], liked: dict[str, int]) -> None:
    """The stream drained: every post settles without drift; a tally corrupted in the table is
    found and repaired to its liked items (checked in the table: META's and, past 64 lanes, its lane
    groups' items). A repair that answers ``busy`` is audited again: the next audit repairs it (or
    finds it repaired, drift 0, if the busy one applied)."""
    from counters.store.post_items import GROUP_SK

    for post, audit in _audits(env, report, posts, repair=True).items():
        if not audit["settled"] or audit["drift"] != 0 or audit["repaired"]:
            report.wrong.append(f"audit of {post} after the storm: {audit}")
    victim = posts[0]
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": f"POST#{victim}"}, "SK": {"S": "META"}},
        UpdateExpression="SET likeTally = :n",
        ExpressionAttributeValues={":n": {"N": str(liked[victim] + 7)}},
    )
    seen: list[dict[str, Any]] = []
    audit = _audits(env, report, [victim], repair=True, seen=seen).get(victim) or {}
    stored = sum(int(i["likeTally"]) for i in env.scan() if i.get("postId") == victim and i.get("SK") in ("META", GROUP_SK))
    found = any(a.get("drift") == 7 for a in seen)
    repaired = audit.get("repaired") or (audit.get("drift") == 0 and any(a.get("reason") in ("busy", "moving") for a in seen))
    if not found or not repaired or stored != liked[victim]:
        report.wrong.append(f"repair of {victim}: audits {seen}, likeTally {stored}, liked items {liked[victim]}")
    report.notes.append(f"audits: every post settled, drift 0; a tally corrupted by +7 found and repaired to {stored}")


def reservation_cases(shards: int = 4) -> list[tuple[str, str, int, str]]:
    """(label, strategy, shards, documented): every registered approach, then each shardable one over
    ``shards``; as the stack runs them (its settings' defaults: atomic's policy ``under``)."""
    from counters.primitives.approaches import NAMES, approach_class, names

    cases = [(n, n, 1, approach_class(n).promise()) for n in NAMES]
    return cases + [(f"{n} x{shards} shards", n, shards, approach_class(n).promise()) for n in names(shardable=True)]


def reservations(env: Env, cases: list[tuple[str, str, int, str]] | None = None) -> list[HttpReport]:
    """One resource per strategy, capacity 3/4 of the demand; every reservation sent twice with its
    key; then a third of the confirmed ones released (twice) on the exact strategies."""
    from counters.services.reservations import reservation_id

    cases = cases or reservation_cases()
    started = time.monotonic()
    c = env.client
    reports = {label: HttpReport(f"reservations: {label}", documented=documented) for label, _, _, documented in cases}
    rng = random.Random(env.seed)
    demand = {label: [(f"k-{i}", rng.randint(1, 3)) for i in range(env.n(22))] for label, *_ in cases}
    capacity = {label: sum(q for _, q in demand[label]) * 3 // 4 for label in demand}
    for label, strategy, shards, _ in cases:
        body = {"resourceId": _rid(label), "capacity": capacity[label], "strategy": strategy, "shards": shards}
        created = c.send(reports[label], "POST", "/resources", json_body=body)
        # a create is not idempotent: a 5xx after commit, re-sent, is a 409 for the same resource
        if created is None or created.status_code not in (201, 409):
            reports[label].wrong.append(f"create: {created.status_code if created is not None else 'no answer'}")

    acked: dict[str, dict[str, int]] = {label: {} for label in demand}  # key -> quantity acknowledged
    unknown: dict[str, set[str]] = {label: set() for label in demand}
    answers: dict[tuple[str, str], list[str]] = {}  # what each key's client was told, in order (for the notes)
    deferred: list[tuple[str, str, str, Deferred]] = []  # (label, kind, key, deferred)
    calls = Recorder()  # one partition per resource: each intent one call, invoked before its first send

    def reserve(label: str, key: str, quantity: int, inexact: bool) -> Callable[[], None]:
        report = reports[label]
        path = f"/resources/{_rid(label)}/reservations"

        def run() -> None:
            handle = calls.invoke(label, "reserve", quantity)
            refused = False
            for answer in _twice(
                lambda: c.send(report, "POST", path, json_body={"quantity": quantity}, headers={"Idempotency-Key": key}, inexact=inexact)
            ):
                told = "none" if answer is None else str(answer.status_code)
                if answer is not None and answer.status_code == 202:
                    told += f" op {answer.json().get('operationId')}"
                answers.setdefault((label, key), []).append(told)
                if answer is None or answer.status_code >= 500:
                    unknown[label].add(key)
                elif answer.status_code in (200, 201):
                    acked[label][key] = quantity
                elif answer.status_code == 202:
                    d = c.resolve(report, answer)
                    deferred.append((label, "reserve", key, d))
                    if d.final and d.final["status"] in ("APPLIED", "DUPLICATE"):
                        acked[label][key] = quantity
                    elif d.final and d.final["status"] == "REJECTED":
                        refused = True
                elif answer.status_code != 409:  # 409: sold out / slots full, definite
                    report.wrong.append(f"reserve {key}: {answer.status_code} {answer.text[:80]}")
                else:
                    refused = True
            # applied once if any answer said so; refused if one said so and none applied; else unknown
            calls.complete(handle, OK if key in acked[label] else FAIL if refused else None)

        return run

    tasks = [reserve(label, k, q, documented != "exact") for label, *_, documented in cases for k, q in demand[label]]
    random.Random(env.seed + 1).shuffle(tasks)
    stop = threading.Event()
    strong = [label for label, _, shards, _ in cases if shards == 1]  # an unsharded resource's GET is strongly consistent

    def reader() -> None:
        while not stop.is_set():
            for label in strong:
                handle = calls.invoke(label, "read")
                answer = c.send(reports[label], "GET", f"/resources/{_rid(label)}")
                if answer is not None and answer.status_code == 200:
                    calls.complete(handle, int(answer.json()["reserved"]))
                else:
                    calls.drop(handle)  # a read without an answer tells nothing
            time.sleep(0.05)

    reading = threading.Thread(target=reader)
    reading.start()
    env.parallel(tasks)

    released: dict[str, set[str]] = {label: set() for label in demand}

    def release(label: str, key: str) -> Callable[[], None]:
        report = reports[label]
        path = f"/resources/{_rid(label)}/reservations/{reservation_id(_rid(label), key)}"

        def run() -> None:
            handle = calls.invoke(label, "release", acked[label][key])
            done = False
            for answer in _twice(lambda: c.send(report, "DELETE", path)):
                if answer is None:
                    report.wrong.append(f"release {key}: never answered")
                elif answer.status_code == 202:
                    d = c.resolve(report, answer)
                    deferred.append((label, "release", key, d))
                    done = done or bool(d.final and d.final["status"] in ("APPLIED", "DUPLICATE"))
                elif answer.status_code != 200:
                    report.wrong.append(f"release {key}: {answer.status_code} {answer.text[:80]}")
                else:
                    done = True
            calls.complete(handle, OK if done else None)

        return run

    tasks = []
    for label, *_, documented in cases:
        if documented == "exact":
            chosen = sorted(acked[label])[::3]
            released[label] = set(chosen)
            tasks += [release(label, key) for key in chosen]
    env.parallel(tasks)
    stop.set()
    reading.join()
    env.drained()

    items = env.scan()
    for label, _strategy, _shards, documented in cases:
        report, rid = reports[label], _rid(label)
        counters = [i for i in items if i["PK"] == f"RES#{rid}" and i["SK"] == "META" or i["PK"].startswith(f"RES#{rid}#")]
        records = {i["idempotencyKey"]: i for i in items if i["PK"].startswith("RSV#") and i.get("resourceId") == rid}
        reserved = sum(int(i.get("reserved", 0)) for i in counters)
        handle = calls.invoke(label, "read")  # the counters as stored once every request and retry ended
        calls.complete(handle, reserved)
        confirmed = sum(int(r["quantity"]) for r in records.values() if r["status"] == "CONFIRMED")
        unsure = sum(int(r["quantity"]) for r in records.values() if r["status"] in ("UNKNOWN", "PENDING"))
        report.stranded = reserved - confirmed
        for item in counters:
            if int(item.get("available", 0)) < 0 or int(item.get("reserved", 0)) < 0:
                report.wrong.append(f"{item['PK']} out of bounds: reserved {item.get('reserved')} available {item.get('available')}")
        if reserved > capacity[label]:
            report.wrong.append(f"reserved {reserved} above capacity {capacity[label]}")
        if documented != "exact" and not 0 <= report.stranded <= unsure:
            report.stranded_violation = 1
            report.notes.append(f"stranded {report.stranded} outside [0, {unsure}] (quantities of UNKNOWN/PENDING records)")
        if documented != "exact":
            report.notes.append(f"reserved {reserved}, confirmed {confirmed}, UNKNOWN/PENDING {unsure}, {len(unknown[label])} keys unknown")
        elif report.stranded:  # the evidence: every counter item and record, and what each client was told
            report.notes.append(
                "counters: "
                + ", ".join(f"{i['PK']}/{i['SK']} reserved {i.get('reserved')} available {i.get('available')}" for i in counters)
            )
            for key, record in sorted(records.items()):
                report.notes.append(
                    f"{key}: {record['status']} x{record['quantity']} allocation {record.get('allocation')} "
                    f"requestId {record.get('requestId')}; told {answers.get((label, key))}"
                )
            for (lb, key), told in sorted(answers.items()):
                if lb == label and key not in records:
                    report.notes.append(f"{key} (no record): asked {dict(demand[label])[key]}, told {told}")
        for key, quantity in acked[label].items():
            record = records.get(key)
            want = "RELEASED" if key in released[label] else "CONFIRMED"
            if record is None or int(record["quantity"]) != quantity or record["status"] != want:
                report.lost += 1
                report.notes.append(f"key {key} acknowledged ({quantity}) but stored {_brief(record)}, expected {want}")
        for key, record in records.items():
            if key not in acked[label] and record["status"] == "CONFIRMED" and documented == "exact":
                report.lost += 1  # stored but its client was told otherwise (409/never)
                report.notes.append(f"key {key} confirmed in the table but its client was never told so")
    for label, kind, key, d in deferred:
        if any(n.startswith("counters: ") for n in reports[label].notes):
            reports[label].notes.append(f"202 {kind} {key}: {d.operation_id} -> {d.final}")
        record = next((i for i in items if i.get("idempotencyKey") == key and i.get("resourceId") == _rid(label)), None)
        status = (d.final or {}).get("status")
        own = "requestId" if kind == "reserve" else "releasedBy"
        mine = record is not None and record.get(own) == d.operation_id
        problem = None
        if status == "APPLIED" and not mine:
            problem = f"but the record's {own} is {record.get(own) if record else None}"
        elif status == "DUPLICATE" and (record is None or mine or (kind == "release" and record["status"] != "RELEASED")):
            problem = f"but the record is {_brief(record)}"
        elif status == "REJECTED":
            error = ((d.final or {}).get("result") or {}).get("error")
            if kind == "release" or error not in ("insufficient_capacity", "reservation_slots_full") or mine:
                problem = f"{error}, record {_brief(record)}"
        _check_deferred(reports[label], f"{kind} {key}", d, problem)
    # the one-sided models: exact, atomic under and occ each apply a call at most once (never above
    # what was acknowledged plus what was ambiguous); a refusal on one item means it did not fit then
    history = calls.history()
    for label, _strategy, shards, _ in cases:
        model = BoundedCounter(capacity[label], strict_fail=shards == 1)
        reports[label].linearizable = check(model, [call for call in history if call.key == label], budget=SEARCH_BUDGET)
    faults = env.faults()
    out = list(reports.values())
    _finish(env, out[0], started)
    for report in out:
        report.seconds = out[0].seconds
    out[0].faults_ddb, out[0].faults_sqs, out[0].faults_delivery = faults
    out[0].notes.append("faults and seconds are for all reservation rows together (one stack)")
    return out


def _rid(label: str) -> str:
    return "r-" + label.split(" (")[0].replace(" ", "-")


def _brief(record: dict[str, Any] | None) -> str:
    if record is None:
        return "nothing"
    return f"{record.get('status')} x{record.get('quantity')} by {record.get('requestId')}"


def ledgers(env: Env) -> list[HttpReport]:
    """Appends with ULID keys to two ledgers (each sent twice), balances read meanwhile."""
    from counters.primitives.ledger import new_key
    from proof.checker import History

    report = HttpReport("ledgers: append with ULID keys, balance reads")
    started = time.monotonic()
    c = env.client
    rng = random.Random(env.seed)
    names = ["acct-1", "acct-2"]
    histories = {name: History(base=0) for name in names}
    appends = [(rng.choice(names), rng.choice([-3, -2, -1, 1, 2, 3, 5])) for _ in range(env.n(180))]
    acked: dict[str, tuple[str, int]] = {}
    deferred: list[tuple[str, str, Deferred]] = []
    lock = threading.Lock()
    calls = Recorder()  # a partition per ledger: each append one call (its two sends), the balance reads

    def append(ledger: str, amount: int) -> Callable[[], None]:
        def run() -> None:
            key = new_key()  # minted on the first attempt, re-sent unchanged
            op = histories[ledger].invoke(key, amount)
            handle = calls.invoke(ledger, "append", amount)
            status = "unknown"
            for answer in _twice(
                lambda: c.send(report, "POST", f"/ledgers/{ledger}/entries", json_body={"amount": amount}, headers={"Idempotency-Key": key})
            ):
                if answer is None:
                    continue
                if answer.status_code in (200, 201):
                    status = "ok"
                elif answer.status_code == 202:
                    d = c.resolve(report, answer)
                    with lock:
                        deferred.append((ledger, key, d))
                    if d.final and d.final["status"] in ("APPLIED", "DUPLICATE"):
                        status = "ok"
                else:
                    report.wrong.append(f"append {key}: {answer.status_code} {answer.text[:80]}")
            if status == "ok":
                with lock:
                    acked[key] = (ledger, amount)
            histories[ledger].complete(op, status)
            calls.complete(handle, OK if status == "ok" else None)

        return run

    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for ledger in names:
                t0 = time.monotonic()
                handle = calls.invoke(ledger, "read")
                answer = c.send(report, "GET", f"/ledgers/{ledger}")
                if answer is not None and answer.status_code == 200:
                    histories[ledger].read(int(answer.json()["balance"]), t0)
                    calls.complete(handle, int(answer.json()["balance"]))
                else:
                    calls.drop(handle)
            time.sleep(0.1)

    reading = threading.Thread(target=reader)
    reading.start()
    env.parallel([append(ledger, amount) for ledger, amount in appends])
    stop.set()
    reading.join()
    env.drained()
    items = env.scan()
    entries = {i["SK"].split("-", 1)[1]: i for i in items if i["SK"].startswith("ENTRY#")}
    for key, (ledger, amount) in acked.items():
        entry = entries.get(key)
        if entry is None or int(entry["amount"]) != amount or entry["PK"] != f"LEDGER#{ledger}":
            report.lost += 1
    report.duplicates += len(set(entries) - set(acked))  # an entry nobody was told about (or twice)
    for ledger in names:
        handle = calls.invoke(ledger, "read")
        answer = c.send(report, "GET", f"/ledgers/{ledger}")
        balance = int(answer.json()["balance"]) if answer is not None and answer.status_code == 200 else None
        if balance is None:
            calls.drop(handle)
        else:
            calls.complete(handle, balance)
        stored = sum(int(e["amount"]) for e in entries.values() if e["PK"] == f"LEDGER#{ledger}")
        want = sum(a for lg, a in acked.values() if lg == ledger)
        if balance != want or stored != want:
            report.notes.append(f"{ledger}: balance {balance}, stored sum {stored}, acknowledged sum {want}")
            report.lost += abs((balance or 0) - want)
        checked = histories[ledger].check(ledger, want, documented="exact")
        report.bad_reads += checked.bad_reads
    for ledger, key, d in deferred:
        _check_deferred(report, f"append {ledger} {key}", d, _provenance(d, entries.get(key), "entry"))
    report.notes.append(f"{sum(len(h.reads) for h in histories.values())} balance reads checked")
    report.linearizable = check(SumRegister(), calls.history(), budget=SEARCH_BUDGET)  # a sum register per ledger
    _finish(env, report, started)
    report.faults_ddb, report.faults_sqs, report.faults_delivery = env.faults()
    return [report]


def orders(env: Env, mode: str) -> list[HttpReport]:
    """Orders with an Idempotency-Key each (sent twice): unique ids, one order per key, no holes
    (gapless), the LAST_ORDER pointer (stream, batches duplicated) ends at the greatest id."""
    report = HttpReport(f"orders: {mode} ids")
    started = time.monotonic()
    c = env.client
    keys = [f"order-{i}" for i in range(env.n(110 if mode == "fast" else 60))]
    answered: dict[str, set[int]] = {}
    deferred: list[tuple[str, Deferred]] = []
    lock = threading.Lock()

    def place(key: str) -> Callable[[], None]:
        body = {"customerId": "c1", "items": [{"sku": f"sku-{key}", "quantity": 1}]}

        def run() -> None:
            for answer in _twice(lambda: c.send(report, "POST", "/orders", json_body=body, headers={"Idempotency-Key": key})):
                order_id = None
                if answer is None:
                    report.wrong.append(f"order {key}: never answered")
                elif answer.status_code in (200, 201):
                    order_id = int(answer.json()["orderId"])
                elif answer.status_code == 202:
                    d = c.resolve(report, answer)
                    with lock:
                        deferred.append((key, d))
                    if d.final and d.final["status"] in ("APPLIED", "DUPLICATE"):
                        order_id = int(d.final["result"]["orderId"])
                else:
                    report.wrong.append(f"order {key}: {answer.status_code} {answer.text[:80]}")
                if order_id is not None:
                    with lock:
                        answered.setdefault(key, set()).add(order_id)

        return run

    env.parallel([place(k) for k in keys])
    env.drained()
    items = env.scan()
    stored = [i for i in items if i["PK"].startswith("ORDER#")]
    records = {i["PK"][len("ORDERKEY#") :]: i for i in items if i["PK"].startswith("ORDERKEY#")}
    per_key = Counter(i["idempotencyKey"] for i in stored)
    report.duplicates += sum(n - 1 for n in per_key.values())  # two orders for one key
    report.duplicates += sum(len(ids) - 1 for ids in answered.values())  # one key answered with two ids
    ids = sorted(int(i["orderId"]) for i in stored)
    report.lost += len(set(keys) - set(per_key))
    for key, got in answered.items():
        record = records.get(key)
        if record is None or {int(record["orderId"])} != got:
            report.lost += 1
            report.notes.append(f"key {key} answered {sorted(got)}, key record {record and record.get('orderId')}")
    if mode == "gapless" and ids != list(range(1, len(ids) + 1)):
        holes = sorted(set(range(1, max(ids, default=0) + 1)) - set(ids))
        report.wrong.append(f"gapless ids have holes: {holes[:10]}")
    for key, d in deferred:
        _check_deferred(report, f"order {key}", d, _provenance(d, records.get(key), "key record"))
    latest = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the pointer follows the stream
        answer = c.send(report, "GET", "/orders/latest")
        latest = answer.json().get("orderId") if answer is not None and answer.status_code == 200 else None
        if latest == max(ids, default=None):
            break
        time.sleep(0.5)
    if latest != max(ids, default=None):
        report.wrong.append(f"LAST_ORDER pointer at {latest}, greatest order id {max(ids, default=None)}")
    report.notes.append(f"{len(ids)} orders, ids {ids[0] if ids else '-'}..{ids[-1] if ids else '-'}, pointer {latest}")
    _finish(env, report, started)
    report.faults_ddb, report.faults_sqs, report.faults_delivery = env.faults()
    return [report]


def operations_row(reports: list[HttpReport]) -> HttpReport:
    """Every 202 of every scenario: resolved, and to the right final status."""
    row = HttpReport("operations: every 202 of the rows above")
    for r in reports:
        row.deferred_seconds += r.deferred_seconds
        row.unresolved += r.unresolved
        row.wrong += [w for w in r.wrong if "operation " in w]
    row.requests = sum(r.requests for r in reports)
    row.faults_ddb = sum(r.faults_ddb for r in reports)
    row.faults_sqs = sum(r.faults_sqs for r in reports)
    row.faults_delivery = sum(r.faults_delivery for r in reports)
    row.seconds = sum(r.seconds for r in reports if not r.name.startswith("reservations: ")) + max(
        (r.seconds for r in reports if r.name.startswith("reservations: ")), default=0
    )
    if row.deferred_seconds:
        row.notes.append(f"{len(row.deferred_seconds)} operations, mean {statistics.mean(row.deferred_seconds):.1f} s to final")
    return row


SCENARIOS: dict[str, tuple[dict[str, str], Callable[[Env], list[HttpReport]]]] = {
    "likes": ({}, likes),
    "likes-hot": ({}, likes_hot),
    "likes-grow": ({"LikesMaxSpread": "128"}, lambda env: likes_hot(env, grow={"hot-1": (16, 32), "hot-2": (16, 32, 64, 128)})),
    "reservations": ({}, reservations),
    "ledgers": ({}, ledgers),
    "orders-fast": ({"SequenceMode": "fast"}, lambda env: orders(env, "fast")),
    "orders-gapless": ({"SequenceMode": "gapless"}, lambda env: orders(env, "gapless")),
}


@contextmanager
def output_to(path: Path | None) -> Iterator[None]:
    """Send this process's (and its worker processes') stdout/stderr to ``path``: the functions'
    JSON logs and metrics would bury the table."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def run(
    names: list[str],
    dynamodb_endpoint: str,
    sqs_endpoint: str,
    *,
    seed: int,
    scale: float = 1.0,
    clients: int = 16,
    log: Path | None = None,
) -> list[HttpReport]:
    reports: list[HttpReport] = []
    with output_to(log):
        for name in names:
            params, scenario = SCENARIOS[name]
            with faulty_stack(dynamodb_endpoint, sqs_endpoint, seed=seed, scale=scale, clients=clients, params=params) as env:
                reports += scenario(env)
    if reports:
        reports.append(operations_row(reports))
    return reports


def describe() -> str:
    ddb = ", ".join(f"{k} {v:.0%}" for k, v in DYNAMODB_FAULTS.items())
    sqs = ", ".join(f"{k} {v:.0%}" for k, v in SQS_FAULTS.items())
    return (
        f"HTTP scenarios: every function's DynamoDB calls faulted ({ddb}; no forced resend of the reservations function's UpdateItem: "
        f"atomic), its SQS calls ({sqs}); queue batches delivered twice {DELIVERY['duplicate']:.0%}, again while the first delivery "
        f"runs {DELIVERY['late']:.0%}; stream batches twice {DELIVERY['stream_duplicate']:.0%}; InlineRetryAttempts {INLINE_RETRY_ATTEMPTS}, "
        "visibility 2 s."
    )
