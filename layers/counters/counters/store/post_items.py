"""Posts and likes: what their items look like: keys, attribute names, shapes, who writes them, the
post's ``META`` as read back, and what a stream record of a like or a probe says.

A post's ``META`` holds its tally, its mode and the stream aggregator's checkpoints; a like is a
counted toggle's state item ([`counters.store.toggles`][counters.store.toggles]) under one of the post's spread keys
(or, for a post stored before ``spread``, in seed 01's item collection); an audit probe is an item
per spread key the aggregator copies to ``META``; on a global table each Region counts its likes on
its own tally item (``TALLY#<Region>``). The requests on these items (conditions and DynamoDB calls)
are [`counters.store.posts`][counters.store.posts]'; the rules are the service's
([`counters.services.likes`][counters.services.likes]) and the primitives' (toggle, refcount, aggregator). Details: [docs/likes.md](../likes.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any, NamedTuple

from counters.core.ids import valid_id
from counters.core.records import dataclass
from counters.core.regions import REGION_ATTRIBUTE
from counters.store.layout import Shape
from counters.store.tables import Op, Table
from counters.store.writers import ANY, HOME, HOME_OF_ID, IN_ORDER, REFUSED, TOGETHER, WriterRule, per_region, refused

# -- attribute names -------------------------------------------------------------------------------
PK, SK = "PK", "SK"
POST_ID, AUTHOR_ID, BODY, CREATED_AT, REQUEST_ID = "postId", "authorId", "body", "createdAt", "requestId"
TALLY = "likeTally"
MODE, MODE_EPOCH, MODE_AT, SPREAD_ATTRIBUTE = "mode", "modeEpoch", "modeAt", "spread"
SETTLED = "settled"  # on a post: the spread every user's chain is settled for (a pointer in the user's lane; docs/likes.md)
SWEPT = "swept"  # on a post: lanes of the previous spread the sweep of this spread has done, from S0 (removed by a growth)
LIVES_IN = "livesIn"  # on a pointer item: the lane of the user's like item (``liked`` is POINTER, neither on nor off)
POINTER = "pointer"  # a pointer item's ``liked``: not a like, not a tombstone (no toggle condition passes it)
CREATED_MODE = "createdMode"  # on a post: the mode it was created in (a re-sent create is compared with it)
REVISION = "tallyRev"  # on a post: moves with every change of likeTally (a repair's condition)
AGG_SEQ, AGG_AT = "aggSeq", "aggAt"  # on a post: the aggregator's checkpoint and watermark per lane
AGG_PROBE = "aggProbe"  # on a post: per lane, the last probe the aggregator applied (its probeSeq)
AGG_LAG = "aggLagMs"  # on a post: how long the oldest record of the aggregator's last write waited (ms)
REPAIRED_BY = "repairToken"  # on a post: the token of the last repair (its own write, recognised after a lost answer)
LIKE_PREFIX = "LIKE#USER#"
LIKED = "liked"  # the like item's state: False = a tombstone (an unlike, kept to order later replays)
DELTA = "delta"  # on a like item: what its last write changed the count by (+1, -1, 0)
MERGED = "merged"  # on a like item: how many merges kept it (ADDed by each, so a merge always changes the item)
USER_ID, LIKED_AT = "userId", "likedAt"
PROBE_SK = "PROBE"  # a probe item's sort key, one per spread key (written by the audit)
PROBE_SEQ = "probeSeq"  # on a probe item: ADDed by every probe, so probes of one lane are numbered in write order
PROBE_LEGACY = "probe"  # on a probe item written before probeSeq
PROBED_AT = "probedAt"
REGION_TALLY_PREFIX = "TALLY#"  # a post's tally kept by one Region of a global table (sort key TALLY#<Region>)
GROUP_SK = "AGG"  # a lane group's tally item (partition key POST#<postId>#G<g>): the aggregator's count of lanes 64g..64g+63
LANE_GROUP = 64  # lanes per group: lanes 0..63 are counted on META, each further 64 on an item of their own
WRITER = REGION_ATTRIBUTE  # on a like item version and a Region's tally: the Region that wrote it

SHAPES: tuple[Shape, ...] = (
    Shape(
        "post",
        "POST#<postId>",
        "META",
        "`likeTally` is the reference count, `tallyRev` moves with every counted change; `mode`, `modeEpoch`, `createdMode` "
        "(what a re-sent create is compared with), `spread`; the aggregator's `aggSeq`, `aggAt`, `aggProbe` per spread key "
        "([likes.md](likes.md))",
    ),
    Shape(
        "like",
        "POST#<postId>#S<n>",
        "LIKE#USER#<userId>",
        "the like's state, in both modes, under one of `spread` keys by a hash of the user: `liked` (false: a tombstone, TTL "
        "`expiresAt`), `changedAt`/`changedBy` (the latest request's time and id: an older replay is stale), `requestId` (who "
        "made the state), `delta` (what its last write left for the stream's aggregator to count: 0 in standard mode), "
        "`merged` (how many merges of a user's duplicate items kept it: docs/DESIGN.md); or, on a grown post, a **pointer** "
        "(`liked` = `pointer`, `livesIn` = the lane of the user's item) in the user's lane of the spread "
        "([likes.md](likes.md#where-a-posts-likes-live))",
    ),
    Shape(
        "like, post stored before `spread`", "POST#<postId>", "LIKE#USER#<userId>", "seed 01's item collection; such a post stays standard"
    ),
    Shape(
        "like tally of a Region",
        "POST#<postId>",
        "TALLY#<Region>",
        "a global table only: the likes this Region counts (`likeTally`, `tallyRev`), its aggregator's `aggSeq`, `aggAt`, "
        "`aggProbe` per spread key and `aggLagMs`, `writerRegion`; written only by that Region, summed on read "
        "([likes.md](likes.md#global-tables))",
    ),
    Shape(
        "like tally of a lane group",
        "POST#<postId>#G<g>",
        "AGG",
        "a post grown past 64 lanes: the aggregator's count of lanes `S<64g>`..`S<64g+63>` (`likeTally`, `tallyRev`, "
        "`aggSeq`, `aggAt`, `aggProbe`, `aggLagMs`, `postId`), created by its first write; a post's count is META's plus "
        "every group's ([likes.md](likes.md#lane-groups))",
    ),
    Shape(
        "audit probe",
        "POST#<postId>#S<n>",
        "PROBE",
        "a token the aggregator copies to `META`: a point in the spread key's stream order ([likes.md](likes.md#audit-and-repair))",
    ),
)

POST = WriterRule(
    "post",
    "POST#<postId>",
    "META",
    HOME,
    HOME_OF_ID,
    ANY,
    "MREC: its id is the client's `postId` or derived from (author, Idempotency-Key): two Regions creating it at once would "
    "both answer 201 and last-writer-wins would keep one, so only the id's home creates it (409 `wrong_region` elsewhere); "
    "an id the service draws is drawn with this Region as its home. Its likes are counted in `TALLY#<Region>`, never here. "
    "MRSC: a create's condition sees every Region (409 `already_exists`)",
    home_id="postId",
)
"""The post's META: created only by its id's home Region on MREC (``create:<mode>`` in [`TABLE`][counters.store.post_items.TABLE])."""
_LIKE_WHY = (
    "the state of the user's latest request (`changedAt`, `changedBy`): the later request wins in every Region, each Region "
    "counts only the versions it wrote and takes back its own like another Region's version replaced ([likes.md](likes.md#global-tables))"
)
WRITERS: tuple[WriterRule, ...] = (
    POST,
    WriterRule(
        "like tally of a Region",
        "POST#<postId>",
        "TALLY#<Region>",
        REFUSED,
        per_region("sum"),
        per_region("sum"),
        "written only by the Region it names; a post's count is the sum",
    ),
    WriterRule(
        "like tally of a lane group",
        "POST#<postId>#G<g>",
        "AGG",
        HOME,
        REFUSED,
        REFUSED,
        "written only by the aggregator of the table's Region; a spread grows past 64 lanes only on a table of one Region "
        "(growth is refused on global tables)",
    ),
    WriterRule("like", "POST#<postId>#S<n>", "LIKE#USER#<userId>", HOME, ANY, ANY, _LIKE_WHY),
    WriterRule("like, post stored before `spread`", "POST#<postId>", "LIKE#USER#<userId>", HOME, ANY, ANY, _LIKE_WHY),
    WriterRule(
        "audit probe",
        "POST#<postId>#S<n>",
        "PROBE",
        HOME,
        REFUSED,
        REFUSED,
        "audits are refused on a global table: a Region's tally is no audit verdict",
    ),
)
_TALLIES = ("like tally of a Region", "like tally of a lane group")
_HOT_ONLY = "standard mode counts in a transaction and MRSC has none: create it hot (a post created without a `mode` is hot on MRSC, standard elsewhere)"  # noqa: E501
_NO_TX = refused("standard mode counts in a transaction; MRSC has none")
_ON_META = refused("its tally is one item on META, which every Region would write")
_ONE_MODE = refused("META is one item every Region would write in place; a post keeps the mode it was created in")
_NO_AUDIT = refused("each Region keeps its own tally; an audit per Region is not built yet (docs/likes.md)")
_NO_GROWTH = refused(
    "two Regions may create one user's like in two lanes, and which Region merges them is not decided yet (docs/DESIGN.md)"
)
TABLE = Table(
    "post_items",
    WRITERS,
    {
        "create:standard": Op("a standard post", ("post",), ANY, HOME_OF_ID, refused(_HOT_ONLY)),
        "create:hot": Op("a hot post", ("post",), ANY, HOME_OF_ID, ANY),
        "like:standard": Op("a standard post's like", ("like", "post", *_TALLIES), TOGETHER, TOGETHER, _NO_TX),
        "like:hot": Op("a hot post's like", ("like",), ANY, ANY, IN_ORDER),
        "like:before-spread": Op(
            "liking a post stored before spread", ("like, post stored before `spread`", "post"), TOGETHER, _ON_META, _ON_META
        ),
        "switch-mode": Op("switching a post's mode", ("post",), ANY, _ONE_MODE, _ONE_MODE),
        "audit": Op("auditing a post's likes", ("audit probe", "post", *_TALLIES), ANY, _NO_AUDIT, _NO_AUDIT),
        "grow-spread": Op("growing a hot post's spread", ("post", *_TALLIES), ANY, _NO_GROWTH, _NO_GROWTH),
    },
)
"""The posts' and likes' (operation x mode) table ([`counters.store.tables`][counters.store.tables])."""


class Mode(StrEnum):
    """Where a post's likes are counted (the stored ``mode``)."""

    STANDARD = "standard"  # in the like's transaction
    HOT = "hot"  # from the table's stream, by the aggregator


# -- keys ------------------------------------------------------------------------------------------
def post_pk(post_id: str) -> str:
    """The partition key of a post."""
    return f"POST#{post_id}"


def post_key(post_id: str) -> dict[str, str]:
    """The key of a post's item."""
    return {PK: post_pk(post_id), SK: "META"}


def region_tally_key(post_id: str, region: str) -> dict[str, str]:
    """The tally item ``region`` keeps for a post on a global table (only that Region writes it)."""
    return {PK: post_pk(post_id), SK: f"{REGION_TALLY_PREFIX}{region}"}


def group_key(post_id: str, group: int) -> dict[str, str]:
    """The tally item of lane group ``group`` (>= 1) of a post grown past ``LANE_GROUP`` lanes."""
    return {PK: f"{post_pk(post_id)}#G{group}", SK: GROUP_SK}


def lane_group(lane: str) -> int:
    """The group a lane name (``S<n>``) is counted in: 0 (META) for lanes 0..63, then one per 64."""
    return int(lane[1:]) // LANE_GROUP


def groups_of(spread: int | None) -> range:
    """The lane groups (>= 1) of a post with ``spread``, each counted on its own item: none up to 64 lanes."""
    return range(1, -(-(spread or 0) // LANE_GROUP))


def like_key(post_id: str, user_id: str) -> dict[str, str]:
    """A like of a post stored before ``spread`` (seed 01's item collection)."""
    return {PK: post_pk(post_id), SK: f"{LIKE_PREFIX}{user_id}"}


def _user_hash(user_id: str) -> int:
    """A user's place on every spread (stable across processes): ``lane_of`` is it modulo the spread."""
    return int.from_bytes(hashlib.sha256(user_id.encode()).digest()[:8], "big")


def lane_of(user_id: str, spread: int) -> int:
    """The spread partition key a user's like lives under (stable across processes)."""
    return _user_hash(user_id) % spread


FIRST_SPREAD = 8
"""The spread a post is created with; it only doubles from there ([docs/DESIGN.md, "a spread that grows"](../DESIGN.md#a-spread-that-grows))."""
MAX_SPREAD = 256
"""The largest spread a post grows to (8x the 8-key ceiling is exactly the ceiling of 64 keys: a
post taking it at 64 runs at 100% of its keys, where throttles never fall back). Past 64 lanes
the aggregator counts each further 64 on a group item of its own ([`group_key`][counters.store.post_items.group_key]):
META's checkpoint maps stay at 64 lanes."""


def chain_lanes(user_id: str, spread: int) -> list[int]:
    """The lanes a user's like may live under on a post whose spread grew from ``FIRST_SPREAD`` to
    ``spread``: ``lane_of(user, s)`` for s = 8, 16, ... ``spread``, without repeats, oldest first.
    Each is the one before it or that lane plus the old spread (the spread is a power of two), and an
    item never moves: it stays in the lane it was created in."""
    lanes: list[int] = []
    size, place = min(FIRST_SPREAD, spread), _user_hash(user_id)  # one hash for every spread
    while size <= spread:
        lane = place % size
        if lane not in lanes:
            lanes.append(lane)
        size *= 2
    return lanes


def hot_pk(post_id: str, lane: int) -> str:
    """The partition key of lane ``lane`` of a hot post."""
    return f"POST#{post_id}#S{lane}"


def lane_like_key(post_id: str, user_id: str, lane: int) -> dict[str, str]:
    """The key of a user's like item (or pointer) in lane ``lane`` of a hot post."""
    return {PK: hot_pk(post_id, lane), SK: f"{LIKE_PREFIX}{user_id}"}


def hot_like_key(post_id: str, user_id: str, spread: int) -> dict[str, str]:
    """The key of a user's like of a hot post (its lane from the user id)."""
    return lane_like_key(post_id, user_id, lane_of(user_id, spread))


def chain_keys(post_id: str, user_id: str, spread: int) -> list[dict[str, str]]:
    """The keys a user's like of a post with ``spread`` may have, oldest lane first ([`chain_lanes`][counters.store.post_items.chain_lanes])."""
    return [lane_like_key(post_id, user_id, lane) for lane in chain_lanes(user_id, spread)]


def probe_key(post_id: str, lane: int) -> dict[str, str]:
    """The key of the probe item in lane ``lane`` of a hot post."""
    return {PK: hot_pk(post_id, lane), SK: PROBE_SK}


def parse_hot_pk(pk: str) -> tuple[str, str] | None:
    """(post id, lane name ``S<n>``) of a spread key; ``None`` for any other key."""
    if not pk.startswith("POST#"):
        return None
    post_id, sep, lane = pk[len("POST#") :].rpartition("#")
    if not sep or not valid_id(post_id) or not lane.startswith("S") or not lane[1:].isdigit():
        return None
    return post_id, lane


# -- facts -----------------------------------------------------------------------------------------
def _int(value: object) -> int | None:
    return None if value is None else int(str(value))


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _lanes(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


class Part(NamedTuple):
    """One item a grown post's count is kept on: META (group 0) or a lane group's item, with its
    own ``likeTally`` and ``tallyRev`` (a repair's condition is on every part's)."""

    group: int
    tally: int
    revision: int | None


@dataclass(frozen=True)
class Post:
    """A post's ``META`` as stored (fields absent from a projection keep their defaults); for a
    post grown past 64 lanes read with its groups ([`with_groups`][counters.store.lane_groups.with_groups]),
    its count over every part."""

    post_id: str = ""
    author_id: str | None = None
    body: str | None = None
    tally: int = 0
    created_at: int | None = None
    request_id: str | None = None
    mode: str = Mode.STANDARD
    stored_created_mode: str | None = None
    stored_epoch: int | None = None  # ``None``: no ``modeEpoch`` stored (a repair conditions on its absence)
    spread: int | None = None  # ``None``: likes stored before ``spread`` (seed 01's item collection, standard only)
    stored_settled: int | None = None  # ``settled``; ``None``: never grown, or not settled since (see ``settled``)
    stored_swept: int | None = None  # ``swept``; ``None``: no lane swept since the last growth (see ``swept``)
    revision: int | None = None  # ``None``: no ``tallyRev`` stored
    watermarks: Mapping[str, str] = field(default_factory=dict)  # aggAt per lane (ms)
    probes: Mapping[str, str] | None = None  # aggProbe per lane; ``None``: no map (stored before probes)
    lag_ms: int | None = None
    repair_token: str | None = None
    parts: tuple[Part, ...] = ()  # META's and each lane group's own tally, when read with its groups

    @property
    def settled(self) -> bool:
        """Whether every user with an item on the post has it, or a pointer to it, in their lane of
        the spread now (a post that never grew is; a growth unsettles it until the retry worker's
        sweep settles it: [docs/likes.md "A spread that grows"](../likes.md#a-spread-that-grows))."""
        return self.spread is None or self.spread <= FIRST_SPREAD or self.stored_settled == self.spread

    @property
    def swept(self) -> int:
        """How many lanes of the previous spread, from ``S0``, the sweep of this spread has done:
        every user who had an item there when it read the lane has it, or a pointer to it, in their
        lane now, so a like need not read those lanes (a growth removes it; settled: all of them)."""
        if self.spread is None or self.spread <= FIRST_SPREAD:
            return 0  # no older lanes
        return self.spread // 2 if self.settled else min(self.stored_swept or 0, self.spread // 2)

    @property
    def epoch(self) -> int:
        """How many times the post's mode has switched (``modeEpoch``, 0 if never)."""
        return self.stored_epoch or 0

    @property
    def created_mode(self) -> str:
        """The mode the post was created in: ``createdMode``, or for a post stored before it,
        derived from its mode now and ``modeEpoch`` (each switch flips between the two modes
        and adds one)."""
        if self.stored_created_mode is not None:
            return self.stored_created_mode
        if self.epoch % 2 == 0:
            return self.mode
        return Mode.HOT if self.mode == Mode.STANDARD else Mode.STANDARD


def post_of(item: Mapping[str, Any]) -> Post:
    """The fact of a stored ``META`` item."""
    probes = item.get(AGG_PROBE)
    return Post(
        post_id=str(item.get(POST_ID, "")),
        author_id=_str(item.get(AUTHOR_ID)),
        body=_str(item.get(BODY)),
        tally=int(item.get(TALLY, 0)),
        created_at=_int(item.get(CREATED_AT)),
        request_id=_str(item.get(REQUEST_ID)),
        mode=str(item.get(MODE, Mode.STANDARD)),
        stored_created_mode=_str(item.get(CREATED_MODE)),
        stored_epoch=_int(item.get(MODE_EPOCH)),
        spread=_int(item.get(SPREAD_ATTRIBUTE)),
        stored_settled=_int(item.get(SETTLED)),
        stored_swept=_int(item.get(SWEPT)),
        revision=_int(item.get(REVISION)),
        watermarks=_lanes(item.get(AGG_AT)),
        probes=_lanes(probes) if isinstance(probes, Mapping) else None,
        lag_ms=_int(item.get(AGG_LAG)),
        repair_token=_str(item.get(REPAIRED_BY)),
    )
