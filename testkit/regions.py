"""A local DynamoDB global table: 2-3 Regions on ONE DynamoDB Local, replicated as MREC, or one
store seen from 3 Regions as MRSC (docs/regions-emulator.md lists every rule, the AWS page it
follows and its conformance test in tests/integration/test_regions_emulator.py).

**Regions.** DynamoDB Local started without ``-sharedDb`` keeps one database per (access key,
region name) pair, so a Region is a client with that ``region_name`` on the same endpoint: each
Region has its own table and its own stream.

**MREC** (AWS: "Global tables - how it works", V2globaltables_HowItWorks). :meth:`GlobalTable.pump`
reads every Region's stream; each record of a LOCAL write gets a version (its write time, the
simulated :attr:`GlobalTable.clock` when pump saw it, tie-broken by a per-emulator sequence) and one
delivery per other Region, each with its own seeded delay (:class:`Delays`: mostly milliseconds to
seconds, a tail up to minutes), so records of one item or of one transaction arrive in any order,
and some are delivered twice. A delivery applies last-writer-wins per item: the destination keeps
it only if its version is strictly newer than the version it holds; then the WHOLE new image is
put (or the item deleted for a REMOVE). Partitioned pairs hold their deliveries until healed.
Replicated writes appear in the destination's stream, as on AWS; pump recognises them (it knows
what it wrote and, from ``ReturnValues=ALL_OLD``, whether a record was produced at all) and does
not replicate them again.

**MRSC** ("Key facts about MRSC" in bp-global-table-design): every Region's client reaches one
table; botocore event hooks refuse the transaction APIs and ``UpdateTimeToLive`` and inject
``ReplicatedWriteConflictException`` when a write to an item arrives from one Region while a write
to it from another Region is in flight (:class:`Conflicts`). One stream, the same for every Region.

**Writer rules** (issue 25): every item family of the layer declares who may write it in each
mode (``counters.store.writers``). :class:`WriterCheck` maps each LOCAL write (MREC: every record
pump reads that the emulator did not write itself; MRSC: every write a Region's client sends, or,
over HTTP, every write each Region's function workers log: :mod:`testkit.write_log`) to its
family by its key and checks the writing Region against the family's rule; a write against its
rule, or a key no family declares, is a violation: pump (and settle, advance) raises
:class:`WriterRuleViolation`, which the proof reports as a VIOLATED row. ``writers=False`` turns
the check off for tables that hold no layer items (the emulator's own conformance tests, the
plain-``ADD`` hazard, the benches).

Honest limits (also in the docs): a write's time is when pump saw it (granularity: the gap
between pumps; call pump after every operation of a deterministic schedule); in live mode a local
write can race a replicated apply of the same item (the apply may overwrite it for a moment: the
next pump sees the local write's record followed by the older replicated one and re-applies the
newer version, so the Regions still converge, but a reader in between sees the older image,
which AWS would not show). Not modelled: replication of table settings, TTL timing, the
``aws:rep:*`` attributes, witness Regions, quorum loss in MRSC, per-Region capacity and latency.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import json
import math
import os
import random
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from counters.core.regions import GlobalTableMode, home_of
from counters.store.writers import Kind, WriterRule, family_of
from counters.store.writers import rules as writer_rules
from devstack.dynamodb_local import create_table
from devstack.template import read_stack

LIVE_APPLY_TRIES = 4
"""Live mode: how often an apply that met a local write it had not seen is judged again before it
is put back in the queue for a moment."""
Image = dict[str, Any]  # an item in DynamoDB JSON ({"PK": {"S": ...}})
KeyId = str  # an item's key, canonical JSON

TRANSACTIONS = ("TransactWriteItems", "TransactGetItems")
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
UNAVAILABLE_IN_MRSC = ("TransactWriteItems", "TransactGetItems", "UpdateTimeToLive")
SHARD_REFRESH = 1.0
SETTLE_ROUNDS = 100
"""settle() delivers everything pending, then pumps: a new round only when a write landed meanwhile
(another thread); more rounds than this means writes that replicate forever (a bug)."""


class Mode(StrEnum):
    MREC = "mrec"
    MRSC = "mrsc"


@dataclass(frozen=True)
class Delays:
    """Seeded replication delays (seconds of simulated time) and duplicate deliveries.

    Most delays are log-normal around ``median`` clamped to [``low``, ``high``] (milliseconds to
    seconds, AWS: "typically within a second", no SLA); a ``tail`` share is uniform in
    [``high``, ``tail_max``] (minutes). ``duplicate``: the share of deliveries sent twice."""

    low: float = 0.005
    median: float = 0.4
    sigma: float = 1.2
    high: float = 8.0
    tail: float = 0.03
    tail_max: float = 240.0
    duplicate: float = 0.05

    @classmethod
    def fixed(cls, seconds: float, duplicate: float = 0.0) -> Delays:
        """Every delivery takes exactly ``seconds`` (conformance tests)."""
        return cls(low=seconds, median=seconds, sigma=0.0, high=seconds, tail=0.0, tail_max=seconds, duplicate=duplicate)

    def draw(self, rng: random.Random) -> float:
        if self.tail and rng.random() < self.tail:
            return rng.uniform(self.high, self.tail_max)
        if self.sigma <= 0:
            return self.median
        return min(self.high, max(self.low, rng.lognormvariate(math.log(self.median), self.sigma)))


@dataclass(frozen=True)
class Conflicts:
    """MRSC: a write to an item from Region R while a write to it from another Region is in flight
    (less than ``window`` simulated seconds ago) fails with ReplicatedWriteConflictException at
    the seeded ``rate`` (not applied; retryable)."""

    window: float = 0.05
    rate: float = 0.3


class SimClock:
    """Simulated time in seconds (epoch-like: starts at the wall time it was made, then moves only
    by :meth:`advance` / :meth:`set`). Live mode makes it follow the wall clock from where it is."""

    def __init__(self, start: float | None = None) -> None:
        self._t = time.time() if start is None else start
        self._anchor: float | None = None
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            if self._anchor is None:
                return self._t
            return self._t + (time.monotonic() - self._anchor)

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("time does not go back")
        with self._lock:
            self._t += seconds
            return self._t

    def set(self, t: float) -> None:
        """Move forward to ``t`` (never back)."""
        with self._lock:
            if self._anchor is None:
                self._t = max(self._t, t)

    def live(self, on: bool) -> None:
        with self._lock:
            if on and self._anchor is None:
                self._anchor = time.monotonic()
            elif not on and self._anchor is not None:
                self._t += time.monotonic() - self._anchor
                self._anchor = None


@dataclass(frozen=True, order=True)
class Version:
    """An item version's place in last-writer-wins: write time, then the emulator's sequence."""

    time: float
    seq: int
    origin: str = field(compare=False)


@dataclass(order=True)
class Delivery:
    due: float
    seq: int
    source: str = field(compare=False)
    target: str = field(compare=False)
    key: KeyId = field(compare=False)
    version: Version = field(compare=False)
    image: Image | None = field(compare=False)  # None: a delete
    held: bool = field(default=False, compare=False)


@dataclass
class Stats:
    """What the replicator did (attribute or ``stats["name"]``)."""

    local_records: int = 0  # stream records of local writes, stamped and scheduled
    replicated: int = 0  # deliveries applied (LWW won)
    dropped_lww: int = 0  # deliveries not applied: an equal or newer version was there
    duplicates: int = 0  # deliveries scheduled twice
    held_by_partition: int = 0  # deliveries that waited for a heal
    repairs: int = 0  # live-mode races repaired (a replicated apply overwrote a newer local write)
    raced: int = 0  # live mode: an apply whose destination changed since pump read it (a local write not yet seen): re-judged
    conflicts: int = 0  # MRSC: ReplicatedWriteConflictException injected
    refused: int = 0  # MRSC: transaction / TTL calls refused

    def __getitem__(self, name: str) -> int:
        return int(getattr(self, name))

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def mend(value: dict[str, Any]) -> dict[str, Any]:
    """An AttributeValue with DynamoDB Local's stream quirk undone: its stream shows an empty map as
    ``{}`` (no type), which PutItem refuses ("Supplied AttributeValue is empty")."""
    if not value:
        return {"M": {}}
    if "M" in value:
        return {"M": {k: mend(v) for k, v in value["M"].items()}}
    if "L" in value:
        return {"L": [mend(v) for v in value["L"]]}
    return value


def mend_image(image: Image) -> Image:
    """A stream record's image as the item it is (:func:`mend` on every attribute)."""
    return {name: mend(value) for name, value in image.items()}


def key_id(keys: Image) -> KeyId:
    return json.dumps(keys, sort_keys=True, separators=(",", ":"))


_deserializer = TypeDeserializer()


def plain(value: Any) -> Any:
    """DynamoDB JSON -> plain Python (numbers as int when integral, else float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, set):
        return {plain(v) for v in value}
    return value


def to_plain(image: Image) -> dict[str, Any]:
    return {k: plain(_deserializer.deserialize(v)) for k, v in image.items()}


def _canon(value: Any) -> Any:
    """A DynamoDB JSON value with set members sorted (a set's order means nothing)."""
    if isinstance(value, dict):
        return {k: sorted(v) if k in ("SS", "NS") else sorted(v, key=repr) if k == "BS" else _canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canon(v) for v in value]
    return value


def _same(a: Image | None, b: Image | None) -> bool:
    """The same item version (``None``: no item)."""
    return a == b or (a is not None and b is not None and _canon(a) == _canon(b))


def _by_ttl(record: dict[str, Any]) -> bool:
    """A delete made by DynamoDB's Time to Live (the service's, not a Region's write)."""
    identity = record.get("userIdentity") or {}
    return bool(identity.get("type") == "Service" and identity.get("principalId") == "dynamodb.amazonaws.com")


def _body(request_dict: dict[str, Any]) -> dict[str, Any]:
    """A before-call event's request as the API's JSON (``Key``, ``Item``, ``RequestItems``)."""
    try:
        body = json.loads(request_dict.get("body") or b"{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _fake_error(status: int, code: str, message: str) -> tuple[Any, dict[str, Any]]:
    http = type("FakeHttp", (), {"status_code": status, "headers": {}, "content": b"", "raw": None})()
    return http, {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": 0}}


class WriterRuleViolation(AssertionError):
    """A local write against its family's writer rule, or to a key no family declares
    (:class:`WriterCheck`)."""


class WriterCheck:
    """Checks every local write against its item family's declared writer rule
    (``counters.store.writers``; module doc, "Writer rules").

    * per Region: the Region the key (or its ``region_attribute``) names wrote it; a share created
      with the resource may be created by the id's home;
    * home Region: one Region writes every such item of the table (``home_region``; unset: the first
      Region seen writing one);
    * home of the id: :func:`counters.core.regions.home_of` of the id wrote it;
    * created once: the Region that first wrote the item is the only one that writes it again;
    * any Region: no check (the family says how a conflict is detected);
    * refused: never written in this mode.
    """

    def __init__(self, mode: Mode, regions: tuple[str, ...], home_region: str = "", declarations: list[WriterRule] | None = None) -> None:
        self.mode = GlobalTableMode(mode.value)
        self.regions = tuple(sorted(regions))
        self.home_region = home_region
        self.declarations = writer_rules() if declarations is None else declarations
        self.violations: list[str] = []
        self.reported = 0
        self.checked = 0
        self._first: dict[tuple[str, str], str] = {}  # (family, item key) -> the Region that first wrote it
        self._home = home_region

    def write(self, region: str, keys: dict[str, Any], image: dict[str, Any] | None, *, created: bool | None) -> None:
        """One local write by ``region`` of the item ``keys`` (plain values; ``image``: the item's
        new image, or its old one for a delete, when known; ``created``: the write made the item)."""
        self.checked += 1
        pk, sk = str(keys.get("PK", "")), str(keys.get("SK", ""))
        found = family_of(pk, sk, self.declarations)
        if found is None:
            self.violations.append(f"{region} wrote PK={pk!r} SK={sk!r}, a key no item family declares (counters/store/*.py TABLE)")
            return
        family, parts = found
        rule = family.rule(self.mode)
        against = f"{region} wrote {family.item} PK={pk!r} SK={sk!r}"
        if rule.kind is Kind.REFUSED:
            self.violations.append(f"{against}: refused on {self.mode.upper()} by its writer rule")
        elif rule.kind is Kind.PER_REGION:
            named = family.writer(parts, image)
            if created and rule.created_at_home and region == home_of(parts[family.home_id], self.regions):
                return
            if named is not None and named != region:
                self.violations.append(f"{against}: a per-Region item of {named}")
        elif rule.kind is Kind.HOME:
            self._home = self._home or region
            if region != self._home:
                self.violations.append(f"{against}: only the home Region {self._home} writes it")
        elif rule.kind is Kind.HOME_OF_ID:
            home = home_of(parts[family.home_id], self.regions)
            if region != home:
                self.violations.append(f"{against}: only its id's home {home} writes it")
        elif rule.kind is Kind.ONCE:
            first = self._first.setdefault((family.item, f"{pk}\n{sk}"), region)
            if region != first:
                self.violations.append(f"{against}: created once, by {first}, and written only there")

    def check(self) -> None:
        """Raise :class:`WriterRuleViolation` for the violations not reported yet."""
        if len(self.violations) > self.reported:
            new = self.violations[self.reported :]
            self.reported = len(self.violations)
            raise WriterRuleViolation(f"{len(new)} write(s) against their writer rule: " + "; ".join(new[:5]))


class GlobalTable:
    """One table replicated across ``regions`` of the DynamoDB Local at ``endpoint``."""

    def __init__(
        self,
        endpoint: str,
        table_name: str,
        regions: tuple[str, ...] = ("eu-west-1", "us-east-1"),
        mode: Mode = Mode.MREC,
        seed: int = 0,
        delays: Delays | None = None,
        *,
        conflicts: Conflicts | None = None,
        clock: SimClock | None = None,
        access_key: str | None = None,
        track_writes: bool = False,
        writers: bool = True,
        home_region: str = "",
    ) -> None:
        if len(set(regions)) != len(regions) or not 2 <= len(regions) <= 3:
            raise ValueError("a global table here has 2 or 3 distinct Regions")
        if mode is Mode.MRSC and len(regions) != 3:
            raise ValueError("MRSC needs exactly 3 Regions (AWS: 3 replicas, or 2 replicas and a witness)")
        self.endpoint = endpoint
        self.table_name = table_name
        self.regions = tuple(regions)
        self.mode = Mode(mode)
        self.delays = delays or Delays()
        self.conflicts = conflicts or Conflicts()
        self.clock = clock or SimClock()
        self.stats = Stats()
        self.rng = random.Random(seed)
        self._conflict_rng = random.Random(seed ^ 0x5EED)
        self.track_writes = track_writes
        """Pump reads only the streams of Regions whose :meth:`client` sent a write since the last
        pump (a faster proof). Only when every write goes through :meth:`client`: a write by any
        other client would be seen late (at the next full read: settle, or a write in its Region)."""
        self._dirty: set[str] = set()
        self.writers = WriterCheck(self.mode, self.regions, home_region) if writers else None
        """Every local write checked against its family's writer rule (:class:`WriterCheck`);
        ``None``: a table that holds no layer items."""
        self._access_key = access_key or os.environ.get("AWS_ACCESS_KEY_ID", "local")
        self._secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "local")
        self._lock = threading.RLock()
        self._seq = itertools.count(1)
        self._clients: dict[str, Any] = {}
        self._streams_clients: dict[str, Any] = {}
        self._admin: dict[str, Any] = {}
        self._admin_streams: dict[str, Any] = {}
        self._key_names: tuple[str, ...] = ()
        # MREC replication state
        self._arn: dict[str, str] = {}
        self._iterators: dict[tuple[str, str], str | None] = {}  # (region, shard) -> iterator
        self._last_seq: dict[tuple[str, str], str] = {}
        self._shards: dict[str, tuple[float, list[dict[str, Any]]]] = {}  # region -> (read at, shards)
        self._current: dict[tuple[str, KeyId], tuple[Version, Image | None]] = {}  # (region, item) -> the version it holds
        self._expected: dict[tuple[str, KeyId], deque[Image | None]] = {}  # replicated writes not yet seen in the stream
        self._pending: list[Delivery] = []  # heap by (due, seq)
        self._held: list[Delivery] = []
        self._partitions: set[frozenset[str]] = set()
        # MRSC state
        self._inflight: dict[KeyId, tuple[str, float]] = {}  # item -> (Region, until)
        # live mode
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.live_errors: list[str] = []
        self.others_write = False
        """Set by :meth:`start`: processes other than this one write the tables (the local stack's
        functions), so an apply is conditioned on the item being as pump last saw it."""

    @property
    def random_sources(self) -> tuple[random.Random, random.Random]:
        """The emulator's seeded sources: replication (delays, duplicates) and MRSC conflicts (a
        schedule replayed alone moves them to where a run had them: proof/regions/orders.py)."""
        return self.rng, self._conflict_rng

    # ------------------------------------------------------------------ clients
    @property
    def store_region(self) -> str:
        """MRSC: the one region name every Region's client uses (the first Region)."""
        return self.regions[0]

    def _raw_client(self, service: str, region: str) -> Any:
        from counters.core.client import CLIENT_CONFIG, CLIENT_LOCK, botocore_session

        with CLIENT_LOCK:  # botocore sessions are not thread-safe; the layer's shares one data loader
            return botocore_session().create_client(
                service,
                region_name=region,
                endpoint_url=self.endpoint,
                aws_access_key_id=self._access_key,
                aws_secret_access_key=self._secret,
                config=CLIENT_CONFIG,
            )

    def _check_region(self, region: str) -> None:
        if region not in self.regions:
            raise KeyError(f"{region!r} is not a Region of this table ({', '.join(self.regions)})")

    def _physical(self, region: str) -> str:
        return self.store_region if self.mode is Mode.MRSC else region

    def client(self, region: str) -> Any:
        """The DynamoDB client of ``region`` (SDK retries off, as the layer's). MRSC: the shared
        store behind the MRSC guard. Attach a FaultInjector to it freely: replication uses its own."""
        self._check_region(region)
        with self._lock:
            if region not in self._clients:
                made = self._raw_client("dynamodb", self._physical(region))
                made.meta.events.register("before-call.dynamodb", self._mark_dirty(region), unique_id=f"dirty-{id(self)}-{region}")
                if self.mode is Mode.MRSC:
                    made.meta.events.register("before-call.dynamodb", self._mrsc_guard(region), unique_id=f"mrsc-guard-{id(self)}-{region}")
                self._clients[region] = made
            return self._clients[region]

    def _mark_dirty(self, region: str) -> Any:
        def before_call(model: Any, **_: Any) -> None:
            if model.name in WRITES or model.name in ("BatchWriteItem", "TransactWriteItems"):
                self._dirty.add(region)

        return before_call

    def streams_client(self, region: str) -> Any:
        """The DynamoDB Streams client of ``region`` (MRSC: the one stream, for every Region)."""
        self._check_region(region)
        with self._lock:
            if region not in self._streams_clients:
                self._streams_clients[region] = self._raw_client("dynamodbstreams", self._physical(region))
            return self._streams_clients[region]

    def reader(self, region: str) -> Any:
        """A DynamoDB client of ``region`` that no fault injector touches (a local stream consumer's
        ``DescribeTable``; its stream client is made from it)."""
        self._check_region(region)
        return self._admin_client(region)

    def _admin_client(self, region: str) -> Any:
        if region not in self._admin:
            self._admin[region] = self._raw_client("dynamodb", self._physical(region))
        return self._admin[region]

    def _admin_streams_client(self, region: str) -> Any:
        if region not in self._admin_streams:
            self._admin_streams[region] = self._raw_client("dynamodbstreams", self._physical(region))
        return self._admin_streams[region]

    @contextlib.contextmanager
    def layer(self, region: str) -> Iterator[Any]:
        """Make ``region``'s client the layer's process-wide client (``counters.core.client``)
        inside the block; restores the previous one after. Yields the client."""
        from counters.core import client as dynamo

        made = self.client(region)
        if os.environ.get(dynamo.GUARD_ENV) == "1" and not getattr(made, "_tally_guarded", False):
            dynamo.guard(made.meta.events, "dynamodb")
            made._tally_guarded = True  # noqa: SLF001 - our own marker
        with dynamo.CLIENT_LOCK:
            previous = dynamo._dynamodb  # noqa: SLF001 - the layer's one client slot
            dynamo._dynamodb = made  # noqa: SLF001
        try:
            yield made
        finally:
            with dynamo.CLIENT_LOCK:
                dynamo._dynamodb = previous  # noqa: SLF001

    # ------------------------------------------------------------------ table
    def create(self) -> GlobalTable:
        """The template's table in every Region (MRSC: once, without TTL: MRSC has none)."""
        stack = read_stack(self.table_name)
        self._key_names = tuple(k["AttributeName"] for k in stack.table["KeySchema"])
        if self.mode is Mode.MRSC:
            stack = dataclasses.replace(stack, table_extras={k: v for k, v in stack.table_extras.items() if k != "TimeToLiveSpecification"})
            create_table(self._admin_client(self.store_region), stack)
            return self
        for region in self.regions:
            ddb = self._admin_client(region)
            create_table(ddb, stack)
            table = ddb.describe_table(TableName=self.table_name)["Table"]
            view = table.get("StreamSpecification", {}).get("StreamViewType")
            if view not in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
                raise ValueError(f"MREC replication needs the stream's new images; the template's StreamViewType is {view}")
            self._arn[region] = table["LatestStreamArn"]
        return self

    def delete(self) -> None:
        """Stop live mode and drop the table in every Region."""
        self.stop()
        for region in {self._physical(r) for r in self.regions}:
            with contextlib.suppress(Exception):
                self._admin_client(region).delete_table(TableName=self.table_name)

    def items(self, region: str) -> list[dict[str, Any]]:
        """Every item of ``region``'s table, plain Python values, sorted by key."""
        self._check_region(region)
        ddb = self._admin_client(region)
        found: list[Image] = []
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        while True:
            page = ddb.scan(**kwargs)
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        found.sort(key=lambda image: key_id({k: image[k] for k in self._key_names or ("PK", "SK") if k in image}))
        return [to_plain(image) for image in found]

    def item(self, region: str, key: Image) -> dict[str, Any] | None:
        """One item of ``region`` (``key`` in DynamoDB JSON), plain values; a strongly consistent
        read through the emulator's own client (never faulted)."""
        self._check_region(region)
        got = self._admin_client(region).get_item(TableName=self.table_name, Key=key, ConsistentRead=True).get("Item")
        return to_plain(got) if got else None

    def converged(self) -> bool:
        """Every Region holds identical items."""
        if self.mode is Mode.MRSC:
            return True
        first = self.items(self.regions[0])
        return all(self.items(region) == first for region in self.regions[1:])

    # ------------------------------------------------------------------ MREC replication
    def pump(self, *, full: bool = False) -> int:
        """Read every Region's new stream records; stamp and schedule each LOCAL write (returns how
        many). Call it after every operation of a deterministic schedule. With ``track_writes``,
        only the Regions written through :meth:`client` since the last pump (``full``: all)."""
        read = self._pump(full)
        self.check_writers()
        return read

    def _pump(self, full: bool) -> int:
        """:meth:`pump` without raising for writer-rule violations (live mode reports them apart,
        never holding replication back)."""
        if self.mode is Mode.MRSC:
            return 0
        with self._lock:
            before = self.stats.local_records
            dirty, self._dirty = self._dirty, set()
            for region in self.regions:
                if full or not self.track_writes or region in dirty:
                    self._read_stream(region)
            return self.stats.local_records - before

    def check_writers(self) -> None:
        """Raise :class:`WriterRuleViolation` for local writes against their family's writer rule
        that no earlier call reported (pump calls it)."""
        if self.writers is not None:
            self.writers.check()

    def _read_stream(self, region: str) -> None:
        streams = self._admin_streams_client(region)
        arn = self._arn[region]
        # DescribeStream is a call per pump and Region: the shard list is re-read at most every
        # SHARD_REFRESH wall seconds, or at once when a shard has closed.
        cached = self._shards.get(region)
        if cached is None or time.monotonic() - cached[0] > SHARD_REFRESH:
            cached = (time.monotonic(), streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"])
            self._shards[region] = cached
        shards = cached[1]
        last_of_key: dict[KeyId, tuple[bool, Image | None]] = {}  # this pump: each item's last record (replicated?, image)
        for shard in sorted(shards, key=lambda s: s["SequenceNumberRange"]["StartingSequenceNumber"]):
            position = (region, shard["ShardId"])
            if position not in self._iterators:
                self._iterators[position] = streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            while self._iterators.get(position):
                try:
                    page = streams.get_records(ShardIterator=self._iterators[position], Limit=1000)
                except (streams.exceptions.ExpiredIteratorException, streams.exceptions.TrimmedDataAccessException):
                    # an iterator kept across other work can expire or point before the trim horizon:
                    # resume after the last record read (TRIM_HORIZON if none was)
                    where: dict[str, str] = {"ShardIteratorType": "TRIM_HORIZON"}
                    if position in self._last_seq:
                        where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": self._last_seq[position]}
                    self._iterators[position] = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], **where)[
                        "ShardIterator"
                    ]
                    continue
                self._iterators[position] = page.get("NextShardIterator")
                if self._iterators[position] is None:
                    self._shards.pop(region, None)  # a closed shard: its children are new shards
                records = page.get("Records", [])
                for record in records:
                    self._last_seq[position] = record["dynamodb"]["SequenceNumber"]
                    self._on_record(region, record, last_of_key)
                if not records:
                    break
        self._repair(region, last_of_key)

    def _on_record(self, region: str, record: dict[str, Any], last_of_key: dict[KeyId, tuple[bool, Image | None]]) -> None:
        data = record["dynamodb"]
        key = key_id(data["Keys"])
        new_image = data.get("NewImage")
        image = None if record["eventName"] == "REMOVE" or new_image is None else mend_image(new_image)
        expected = self._expected.get((region, key))
        if expected and _same(expected[0], image):
            expected.popleft()  # our own replicated write: not re-replicated
            if not expected:
                del self._expected[(region, key)]
            last_of_key[key] = (True, image)
            return
        if self.writers is not None and not _by_ttl(record):
            old = data.get("OldImage")
            plain_image = to_plain(image) if image is not None else to_plain(mend_image(old)) if old else None
            self.writers.write(region, to_plain(data["Keys"]), plain_image, created=record["eventName"] == "INSERT")
        now = self.clock.now()
        version = Version(now, next(self._seq), region)
        self._current[(region, key)] = (version, image)
        last_of_key[key] = (False, image)
        self.stats.local_records += 1
        for target in self.regions:
            if target == region:
                continue
            copies = 2 if self.delays.duplicate and self.rng.random() < self.delays.duplicate else 1
            due = now
            for _ in range(copies):
                due += self.delays.draw(self.rng)
                heapq.heappush(self._pending, Delivery(due, next(self._seq), region, target, key, version, image))
            self.stats.duplicates += copies - 1

    def _repair(self, region: str, last_of_key: dict[KeyId, tuple[bool, Image | None]]) -> None:
        """An item whose last record is a replicated apply that is not the version the Region
        holds: a local write raced the apply (it landed after pump read the stream, before the
        apply), so the apply overwrote a newer version. Put the newer version back."""
        for key, (replicated, image) in last_of_key.items():
            if not replicated or self._expected.get((region, key)):
                continue
            current = self._current.get((region, key))
            if current is not None and not _same(current[1], image):
                self.stats.repairs += 1
                self._write(region, key, current[1])

    def _write(self, region: str, key: KeyId, image: Image | None) -> None:
        """Put (or delete) in ``region`` through the replicator's own client; expect its stream
        record only if the write changed the item (DynamoDB writes none for a no-op)."""
        ddb = self._admin_client(region)
        if image is None:
            old = ddb.delete_item(TableName=self.table_name, Key=json.loads(key), ReturnValues="ALL_OLD").get("Attributes")
            changed = old is not None
        else:
            old = ddb.put_item(TableName=self.table_name, Item=image, ReturnValues="ALL_OLD").get("Attributes")
            changed = not _same(old, image)
        if changed:
            self._expected.setdefault((region, key), deque()).append(image)

    def _partitioned(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._partitions

    def _deliver_due(self, until: float) -> int:
        """Apply every delivery due by ``until`` in (due, seq) order; partitioned ones are held."""
        applied = 0
        while self._pending and self._pending[0].due <= until:
            delivery = heapq.heappop(self._pending)
            if self._partitioned(delivery.source, delivery.target):
                if not delivery.held:
                    delivery.held = True
                    self.stats.held_by_partition += 1
                self._held.append(delivery)
                continue
            self.clock.set(delivery.due)
            self._apply(delivery)
            applied += 1
        return applied

    def _apply(self, delivery: Delivery) -> None:
        slot = (delivery.target, delivery.key)
        for _ in range(LIVE_APPLY_TRIES):
            current = self._current.get(slot)
            if current is not None and delivery.version <= current[0]:
                self.stats.dropped_lww += 1
                return
            if self.others_write and not self._write_if_unchanged(delivery, None if current is None else current[1]):
                # Live mode: a function wrote the item after pump last read this Region's stream.
                # AWS applies a replicated version atomically against local writes (last writer
                # wins by time, never a newer local write overwritten): read the stream now, so the
                # local write gets its version, and judge the delivery against it again.
                self.stats.raced += 1
                self._read_stream(delivery.target)
                continue
            self._current[slot] = (delivery.version, delivery.image)
            if not self.others_write:
                self._write(delivery.target, delivery.key, delivery.image)
            self.stats.replicated += 1
            return
        heapq.heappush(self._pending, dataclasses.replace(delivery, due=delivery.due + 0.05, seq=next(self._seq)))  # a busy item: later

    def _write_if_unchanged(self, delivery: Delivery, expected: Image | None) -> bool:
        """Live mode: put (or delete) the delivery's image in its Region only if the item is still
        ``expected`` (the image the emulator last saw there: every scalar attribute equal, or
        absent); False when a local write changed it meanwhile. Expects its stream record as
        :meth:`_write` does."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        if expected is None:
            key_name = self._key_names[0] if self._key_names else "PK"
            condition = "attribute_not_exists(#k)"
            names["#k"] = key_name
        else:
            parts = []
            for i, (name, value) in enumerate(sorted(expected.items())):
                if next(iter(value)) in ("M", "L", "SS", "NS", "BS"):
                    continue  # compared through the scalars: every write the layer makes changes one
                names[f"#a{i}"] = name
                values[f":v{i}"] = value
                parts.append(f"#a{i} = :v{i}")
            condition = " AND ".join(parts) or "attribute_exists(PK)"
        ddb = self._admin_client(delivery.target)
        conditional: dict[str, Any] = {"ConditionExpression": condition, "ExpressionAttributeNames": names}
        if values:
            conditional["ExpressionAttributeValues"] = values
        try:
            if delivery.image is None:
                old = ddb.delete_item(TableName=self.table_name, Key=json.loads(delivery.key), ReturnValues="ALL_OLD", **conditional)
                changed = old.get("Attributes") is not None
            else:
                old = ddb.put_item(TableName=self.table_name, Item=delivery.image, ReturnValues="ALL_OLD", **conditional)
                changed = not _same(old.get("Attributes"), delivery.image)
        except ddb.exceptions.ConditionalCheckFailedException:
            return False
        if changed:
            self._expected.setdefault((delivery.target, delivery.key), deque()).append(delivery.image)
        return True

    def advance(self, seconds: float) -> None:
        """Pump, move simulated time forward by ``seconds``, applying every delivery due on the way."""
        with self._lock:
            self.pump()
            target = self.clock.now() + seconds
            if self.mode is Mode.MREC:
                self._deliver_due(target)
            self.clock.set(target)

    def settle(self, limit: float = 7 * 24 * 3600) -> float:
        """Deliver everything pending that no partition holds, advancing simulated time as far as
        needed (at most ``limit`` seconds); returns the simulated seconds it took."""
        with self._lock:
            start = self.clock.now()
            if self.mode is Mode.MRSC:
                self.check_writers()
                return 0.0
            self.pump(full=True)
            rounds = 0
            while self._pending:
                rounds += 1
                last = max(d.due for d in self._pending)
                if last - start > limit or rounds > SETTLE_ROUNDS:
                    raise RuntimeError(f"replication did not settle ({rounds} rounds, {last - start:.0f} simulated seconds)")
                # No local write happens inside settle (unless another thread writes: then the
                # next pump sees it and the loop goes on): deliver everything, then pump once.
                self._deliver_due(last)
                self.pump(full=True)
            return self.clock.now() - start

    def pending(self) -> int:
        """Deliveries not yet applied (held ones included)."""
        return len(self._pending) + len(self._held)

    # ------------------------------------------------------------------ partitions
    def partition(self, a: str, b: str) -> None:
        """Hold replication between ``a`` and ``b`` (both ways) until :meth:`heal`."""
        self._check_region(a)
        self._check_region(b)
        if a == b:
            raise ValueError("a partition needs two Regions")
        with self._lock:
            self._partitions.add(frozenset((a, b)))

    def heal(self, a: str | None = None, b: str | None = None) -> None:
        """Release one pair (``a``, ``b``), every pair of ``a``, or everything; held deliveries go
        in their scheduled order (those already due at the next advance/settle)."""
        with self._lock:
            if a is None:
                self._partitions.clear()
            elif b is None:
                self._partitions = {p for p in self._partitions if a not in p}
            else:
                self._partitions.discard(frozenset((a, b)))
            keep = []
            for delivery in self._held:
                if self._partitioned(delivery.source, delivery.target):
                    keep.append(delivery)
                else:
                    heapq.heappush(self._pending, delivery)
            self._held = keep

    # ------------------------------------------------------------------ MRSC guard
    def _mrsc_guard(self, region: str) -> Any:
        def before_call(model: Any, params: dict[str, Any], **_: Any) -> Any:
            operation = model.name
            if operation in UNAVAILABLE_IN_MRSC:
                with self._lock:
                    self.stats.refused += 1
                what = "Transactions are" if operation in TRANSACTIONS else "Time to Live (TTL) is"
                return _fake_error(
                    400, "ValidationException", f"{what} not supported for global tables with multi-Region strong consistency"
                )
            body = _body(params)
            keys = self._written_keys(operation, body)
            if not keys:
                return None
            with self._lock:
                if self.writers is not None:
                    item = body.get("Item") if operation == "PutItem" else None
                    for key in keys:
                        self.writers.write(region, to_plain(json.loads(key)), to_plain(item) if item else None, created=None)
                now = self.clock.now()
                for key in keys:
                    holder = self._inflight.get(key)
                    if holder and holder[0] != region and now < holder[1] and self._conflict_rng.random() < self.conflicts.rate:
                        self.stats.conflicts += 1
                        return _fake_error(
                            400,
                            "ReplicatedWriteConflictException",
                            "One or more items in this request are being modified by a request in another Region.",
                        )
                for key in keys:
                    self._inflight[key] = (region, now + self.conflicts.window)
            return None

        return before_call

    def _written_keys(self, operation: str, params: dict[str, Any]) -> list[KeyId]:
        names = self._key_names or ("PK", "SK")
        if operation in ("UpdateItem", "DeleteItem"):
            return [key_id(params.get("Key", {}))]
        if operation == "PutItem":
            item = params.get("Item", {})
            return [key_id({k: item[k] for k in names if k in item})]
        if operation == "BatchWriteItem":
            found = []
            for requests in params.get("RequestItems", {}).values():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        found.append(key_id({k: item[k] for k in names if k in item}))
                    elif "DeleteRequest" in request:
                        found.append(key_id(request["DeleteRequest"]["Key"]))
            return found
        return []

    # ------------------------------------------------------------------ live mode
    def start(self, interval: float = 0.05) -> GlobalTable:
        """Live mode: the clock follows the wall clock; a daemon thread pumps and delivers."""
        if self._thread is not None:
            return self
        self.others_write = True
        self.clock.live(True)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    with self._lock:
                        self._pump(full=True)  # any process may write (the local stack's functions)
                        if self.mode is Mode.MREC:
                            self._deliver_due(self.clock.now())
                    self.check_writers()
                except Exception as exc:  # noqa: BLE001 - keep replicating, report it
                    self.live_errors.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name="global-table-replicator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Leave live mode (the clock stops where it is)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self._thread = None
        self.clock.live(False)
