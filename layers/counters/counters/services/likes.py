"""Posts and likes: the reference-count primitive applied to seed 01's item shapes.

| item | PK | SK |
|---|---|---|
| post | ``POST#<postId>`` | ``META`` (``likeTally`` is the reference count; ``mode``, ``modeEpoch``, ``spread``) |
| like | ``POST#<postId>#S<n>`` | ``LIKE#USER#<userId>`` (``n`` = hash(user) % the post's ``spread``; ``liked``, ``delta``; kept as a tombstone after an unlike) |
| like, a post stored before ``spread`` | ``POST#<postId>`` | ``LIKE#USER#<userId>`` (seed 01's item collection) |

Like and unlike are a :class:`~counters.primitives.toggle.Toggle`: the latest request of a user on
a post wins, whenever its replay runs. A post's ``mode`` is data on ``META``:

* ``standard`` counts in the like's transaction (the state item with ``delta = 0`` + ``ADD
  likeTally`` on META, conditioned on the post still being ``standard``: the fence);
* ``hot`` writes the like's state item alone (one conditional write, ``delta`` = +1/-1), and the
  tally is kept from the table's stream by :mod:`counters.primitives.aggregator` (exact as of a
  watermark).

**Switching modes** (:meth:`Likes.switch_mode`) moves nothing: a user's state item is the same
item in both modes (its key depends on ``spread``, fixed at creation, not on the mode), so the
latest-request rule holds across a switch, and **every flip is counted exactly once by the write
that made it**: a standard flip in its own transaction (its ``delta`` 0 keeps it out of the
aggregator), a hot flip by the aggregator. So a write made on a stale idea of the mode is still
counted once; the fence (the standard transaction's condition on META's ``mode``) only routes: a
process that still believes a post is standard after it went hot is refused, re-reads the mode and
writes hot, so likes stop transacting on the hot post's META. A hot write cannot be fenced (it
touches no shared item, which is the point); after a switch back to standard, a process's cached
``hot`` expires within ``MODE_TTL_MS`` and hot writes made until then are counted by the
aggregator within its lag.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from counters.core.client import client
from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.engine import Report, Stop, read, run
from counters.core.errors import (
    AlreadyExists,
    ContentionError,
    IdempotencyKeyReused,
    IntegrityError,
    InvalidCursor,
    InvalidRequest,
    NotFound,
    NotSwitchable,
)
from counters.core.failures import Classified, RetryPolicy
from counters.core.ids import valid_id
from counters.core.items import from_item, to_item
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings, env
from counters.primitives.aggregator import Aggregator, Change, as_of
from counters.primitives.refcount import RefCount
from counters.primitives.toggle import Guard, Stamp, Toggle, now_ms

NAMESPACE = uuid.UUID("4c3d0a52-88f4-4f1e-9a0e-2f5b0c7d9e61")
TALLY = "likeTally"
LIKE_PREFIX = "LIKE#USER#"
LIKED = "liked"  # the like item's state: False = a tombstone (an unlike, kept to order later replays)
LIKERS_QUERIES = 12  # queries per likers page once it lists a liker (tombstones and empty spread keys make pages short)
LIKERS_READ = 25  # items a likers Query reads at least (tombstones are read, then filtered out)
CURSOR_LABEL = b"tally likers cursor v1"  # what the cursor key is derived for (CURSOR_SECRET signs nothing else)
STANDARD, HOT = "standard", "hot"
MODES = (STANDARD, HOT)
SPREAD = 8  # a hot post's like partition keys; stored on the post (``spread``): fixed for its life
DELTA = "delta"  # on a hot like item: what its last write changed the count by (+1, -1, 0)
AGG_SEQ, AGG_AT = "aggSeq", "aggAt"  # on a post: the aggregator's checkpoint and watermark per lane
REVISION = "tallyRev"  # on a post: moves with every change of likeTally (a repair's condition)
AGG_PROBE = "aggProbe"  # on a post: per lane, the last probe the aggregator applied (its probeSeq)
AGG_LAG = "aggLagMs"  # on a post: how long the oldest record of the aggregator's last write waited (ms)
PROBE_SK = "PROBE"  # a probe item's sort key, one per spread key (written by the audit)
CREATED_MODE = "createdMode"  # on a post: the mode it was created in (a re-sent create is compared with it)
PROBE_SEQ = "probeSeq"  # on a probe item: ADDed by every probe, so probes of one lane are numbered in write order
REPAIRED_BY = "repairToken"  # on a post: the token of the last repair (its own write, recognised after a lost answer)
AUDIT_MARGIN_S = 3.0  # POST /audits answers this long before the function's timeout (it stops starting calls)
DEADLINE = "deadline"  # an audit's reason: the post was not reached (or not finished) before the deadline
MODE_TTL_MS = 30_000  # how long a process trusts the mode it read (the fence makes a stale standard safe)
PRESSURE_WINDOW_MS = 10_000  # retried attempts of a standard post's likes are summed over this window


def post_key(post_id: str) -> dict[str, str]:
    return {"PK": f"POST#{post_id}", "SK": "META"}


def post_id_for(author_id: str, idempotency_key: str) -> str:
    """The post id a key stands for: per author, so one author's key never names another's post."""
    return uuid.uuid5(NAMESPACE, f"{author_id}\n{idempotency_key}").hex


def derived_form(post_id: str) -> bool:
    """Whether ``post_id`` has the form :func:`post_id_for` gives (a version-5 UUID, 32 lowercase
    hex digits): a form a client's own ``postId`` may not take, so no one can take the id
    another author's Idempotency-Key stands for before that author's create."""
    if len(post_id) != 32 or post_id.strip("0123456789abcdef"):
        return False
    return uuid.UUID(hex=post_id).version == 5


def like_key(post_id: str, user_id: str) -> dict[str, str]:
    return {"PK": f"POST#{post_id}", "SK": f"{LIKE_PREFIX}{user_id}"}


def lane_of(user_id: str, spread: int) -> int:
    """The spread partition key a user's like of a hot post lives under (stable across processes)."""
    return int.from_bytes(hashlib.sha256(user_id.encode()).digest()[:8], "big") % spread


def hot_pk(post_id: str, lane: int) -> str:
    return f"POST#{post_id}#S{lane}"


def hot_like_key(post_id: str, user_id: str, spread: int) -> dict[str, str]:
    return {"PK": hot_pk(post_id, lane_of(user_id, spread)), "SK": f"{LIKE_PREFIX}{user_id}"}


def parse_hot_pk(pk: str) -> tuple[str, str] | None:
    """(post id, lane name ``S<n>``) of a hot like's partition key; ``None`` for any other key."""
    if not pk.startswith("POST#"):
        return None
    post_id, sep, lane = pk[len("POST#") :].rpartition("#")
    if not sep or not valid_id(post_id) or not lane.startswith("S") or not lane[1:].isdigit():
        return None
    return post_id, lane


def like_aggregator(
    table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None, clock: Callable[[], int] | None = None
) -> Aggregator:
    """The hot mode's tally keeper: hot like deltas from the stream onto ``likeTally`` on META."""
    return Aggregator(
        table_name,
        post_key,
        tally_attribute=TALLY,
        seq_attribute=AGG_SEQ,
        at_attribute=AGG_AT,
        probe_attribute=AGG_PROBE,
        revision_attribute=REVISION,
        lag_attribute=AGG_LAG,
        dynamodb=dynamodb,
        retry=retry,
        clock=clock,
    )


def hot_change(record: dict[str, Any]) -> Change | None:
    """A stream record (as Lambda delivers it, NEW_IMAGE) as a hot like's change of the tally, or
    an audit's probe; ``None`` for anything else or a write that counted nothing (``delta`` 0, a
    TTL removal)."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return None
    ddb = record.get("dynamodb") or {}
    keys, image = ddb.get("Keys") or {}, ddb.get("NewImage") or {}
    parsed = parse_hot_pk(str((keys.get("PK") or {}).get("S", "")))
    sk = str((keys.get("SK") or {}).get("S", ""))
    if parsed is None:
        return None
    created = ddb.get("ApproximateCreationDateTime") or 0
    at = {"parent": parsed[0], "lane": parsed[1], "seq": str(ddb["SequenceNumber"]), "created_ms": int(float(created) * 1000)}
    if sk == PROBE_SK and PROBE_SEQ in image:  # an audit's probe: its number in the lane's probe order
        return Change(delta=0, probe=str(int(image[PROBE_SEQ]["N"])), **at)
    if sk == PROBE_SK and "probe" in image:  # a probe written before probeSeq (a token no audit waits for now)
        return Change(delta=0, probe=str(image["probe"]["S"]), **at)
    if not sk.startswith(LIKE_PREFIX) or DELTA not in image:
        return None
    delta = int(image[DELTA]["N"])
    return Change(delta=delta, **at) if delta else None


STANDARD_GUARD = Guard(
    "(attribute_not_exists(#mode) OR #mode = :standard)",
    {"#mode": "mode"},
    {":standard": STANDARD},
    lambda post: post.get("mode", STANDARD) == STANDARD,
)
"""The fence: a standard like's transaction counts on META only while the post is standard."""


@dataclass(frozen=True, kw_only=True)
class LikeSettings(Settings):
    """``HOT_AFTER_RETRIES`` (template parameter ``HotAfterRetries``): promote a standard post to
    hot after this many retried attempts of its likes in one process within 10 s; 0: never."""

    hot_after_retries: int = env("HOT_AFTER_RETRIES", 0)
    cursor_secret: str = env("CURSOR_SECRET", "")
    """Signs the likers cursors (the template passes the stack's id: random per deployment, unknown
    to API callers); unset (tests, the local stack), a key derived from the table name."""


@dataclass(frozen=True)
class PostInfo:
    """What a process knows of a post: where its likes live and how they are counted."""

    spread: int | None  # None: likes stored before ``spread`` (seed 01's item collection, standard only)
    mode: str
    epoch: int
    read_at: int  # ms

    @classmethod
    def of(cls, item: dict[str, Any]) -> PostInfo:
        spread = item.get("spread")
        return cls(None if spread is None else int(spread), str(item.get("mode", STANDARD)), int(item.get("modeEpoch", 0)), now_ms())

    def lanes(self, post_id: str) -> list[str]:
        """The partition keys the post's like items live under."""
        return [post_key(post_id)["PK"]] if self.spread is None else [hot_pk(post_id, n) for n in range(self.spread)]

    def like_key(self, post_id: str, user_id: str) -> dict[str, str]:
        return like_key(post_id, user_id) if self.spread is None else hot_like_key(post_id, user_id, self.spread)


@dataclass
class LikeChange:
    """The answer to like/unlike: the state now, and whether this request changed it."""

    liked: bool
    changed: bool
    result: Result
    promoted: bool = False  # this request's retries switched the post to hot (``hot_after_retries``)


@dataclass
class Settled:
    """One post's audit at a settled point (:meth:`Likes.audit_posts`): ``stored`` is the tally
    at that point and ``counted`` the likes then; ``settled`` False says why there is no verdict
    (``reason``): ``moving`` (something was counted during the count), ``aggregator_behind`` (the
    stream's aggregator did not reach the audit's probe in time), ``not_found``, ``deadline`` (the
    audit ran out of time before it reached or finished the post: audit it again), ``busy``."""

    post_id: str
    stored: int | None = None
    counted: int | None = None
    settled: bool = False
    repaired: bool = False
    reason: str | None = None
    capacity: Capacity = field(default_factory=Capacity)

    @property
    def drift(self) -> int | None:
        return None if self.stored is None or self.counted is None or not self.settled else self.stored - self.counted

    def public(self) -> dict[str, Any]:
        return {
            "postId": self.post_id,
            "stored": self.stored,
            "counted": self.counted,
            "drift": self.drift,
            "settled": self.settled,
            "repaired": self.repaired,
            "reason": self.reason,
        }


@dataclass
class QuickAudit:
    """``GET /posts/{id}/audit``: the tally against a count now (:meth:`Likes.audit`)."""

    post_id: str
    stored: int
    counted: int
    aggregated: bool  # the post is or was hot: its tally trails its likes (no drift is concluded)
    capacity: Capacity = field(default_factory=Capacity)

    @property
    def drift(self) -> int | None:
        return None if self.aggregated else self.stored - self.counted

    @property
    def reason(self) -> str | None:
        return "aggregated" if self.aggregated else None


@dataclass
class LikersPage:
    user_ids: list[dict[str, Any]]
    cursor: str | None
    capacity: Capacity


class Likes:
    """Create posts, like/unlike them exactly once, list likers, audit the tally."""

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
        mode_ttl_ms: int = MODE_TTL_MS,
        hot_after_retries: int = 0,
        cache_size: int = CACHE_SIZE,
        cursor_secret: str = "",
    ) -> None:
        """``hot_after_retries``: promote a standard post to hot once this process has retried that
        many attempts of its likes (conflicts, throttles) within ``PRESSURE_WINDOW_MS``; 0: never.
        ``cache_size``: how many posts the mode cache and the pressure map each keep (LRU)."""
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.refcount = RefCount(table_name, tally_attribute=TALLY, dynamodb=dynamodb, retry=retry)
        self.toggle = Toggle(
            table_name, tally_attribute=TALLY, state_attribute=LIKED, revision_attribute=REVISION, dynamodb=dynamodb, retry=retry
        )
        self.mode_ttl_ms = mode_ttl_ms
        self.hot_after_retries = hot_after_retries
        self._cursor_key = cursor_key(cursor_secret, table_name)
        self._posts: LRU[str, PostInfo] = LRU(cache_size)  # posts seen by this process (a post is never deleted)
        self._pressure: LRU[str, list[tuple[int, int]]] = LRU(cache_size)  # post -> (ms, retried attempts) of recent standard likes

    @classmethod
    def from_settings(cls, settings: Settings) -> Likes:
        hot_after = settings.hot_after_retries if isinstance(settings, LikeSettings) else 0
        secret = settings.cursor_secret if isinstance(settings, LikeSettings) else ""
        return cls(settings.table_name, retry=settings.retry, hot_after_retries=hot_after, cursor_secret=secret)

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def create_post(
        self, *, author_id: str, body: str, post_id: str | None = None, idempotency_key: str | None = None, mode: str = STANDARD
    ) -> tuple[dict[str, Any], bool]:
        """Create a post with ``likeTally = 0``; returns (the post, created now?).

        Re-sends are the same post, never a second one: with ``idempotency_key`` the id is
        derived from (author, key); with a client ``post_id`` the id is the client's, and never
        of the derived form (:func:`derived_form`: :class:`InvalidRequest`), so the two never meet. Either
        way the Put is conditioned on the id being new, and a post already stored with the
        same author and body, created in the ``mode`` asked for (whatever its mode now), is this request's (``created`` False: an earlier attempt, or the
        one whose answer was lost, wrote it: ``created`` is True when the stored post carries
        this request's id). A different post under that id is
        :class:`AlreadyExists` (the client's id) or :class:`IdempotencyKeyReused` (the key).
        Without either, the id is random and a re-send creates another post.

        ``mode`` (``standard`` or ``hot``) is stored on the post with ``modeEpoch`` 0 (each
        :meth:`switch_mode` adds one), its ``spread`` (where its likes live, fixed for its life)
        and the aggregator's empty checkpoint and watermark maps, in either mode.
        """
        require_mode(mode)
        if post_id is not None and derived_form(post_id) and not (idempotency_key and post_id == post_id_for(author_id, idempotency_key)):
            raise InvalidRequest("postId may not be a version-5 UUID in hex: that form is kept for ids derived from an Idempotency-Key")
        if post_id is None:
            post_id = post_id_for(author_id, idempotency_key) if idempotency_key else uuid.uuid4().hex
        item = {
            **post_key(post_id),
            "postId": post_id,
            "authorId": author_id,
            "body": body,
            TALLY: 0,
            "createdAt": int(time.time()),
            "requestId": new_request_id(),  # which request wrote it: a lost answer's re-send inside the engine is still "created"
            "mode": mode,
            CREATED_MODE: mode,  # what the request asked for: ``mode`` changes with the post's life, this never
            "modeEpoch": 0,
            "spread": SPREAD,
            AGG_SEQ: {},
            AGG_AT: {},
            AGG_PROBE: {},
            REVISION: 0,
        }
        params = {
            "TableName": self.table_name,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(#pk)",  # never overwrite a post (and its tally)
            "ExpressionAttributeNames": {"#pk": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        report = run(self.dynamodb.put_item, params, policy=self.refcount.retry, write=True)
        if report.outcome is Outcome.APPLIED:
            return public_post(item), True
        if report.outcome is not Outcome.REJECTED or report.failure is None:
            raise ContentionError(f"could not store post {post_id!r}; resend the same request")
        stored = from_item(report.failure.old_item(0)) or {}
        if stored.get("authorId") == author_id and stored.get("body") == body and created_mode(stored) == mode:
            return public_post(stored), stored.get("requestId") == item["requestId"]
        if idempotency_key and post_id == post_id_for(author_id, idempotency_key):
            raise IdempotencyKeyReused("this Idempotency-Key was already used for a different post")
        raise AlreadyExists(f"post {post_id!r} already exists", cause_code="ConditionalCheckFailed")

    def get_post(self, post_id: str) -> dict[str, Any]:
        item, _ = self.refcount.read(post_key(post_id))
        if item is None:
            raise NotFound(f"post {post_id!r} not found")
        self._posts[post_id] = PostInfo.of(item)
        return public_post(item)

    def _post(self, post_id: str) -> PostInfo:
        """The post's layout and mode; :class:`NotFound` if it is missing.

        Read (0.5 RCU) once per process and post (while it is among the ``cache_size`` posts
        used last: an LRU), trusted for ``mode_ttl_ms``: the standard
        transaction's fence refuses a stale ``standard`` at once, and a stale ``hot`` is still
        counted once (see the module doc). A post is never deleted, so a remembered post exists:
        the hot like checks existence through this read.
        """
        info = self._posts.get(post_id)
        if info is not None and now_ms() - info.read_at < self.mode_ttl_ms:
            return info
        response = read(
            self.dynamodb.get_item,
            self.refcount.retry,
            None,
            TableName=self.table_name,
            Key=to_item(post_key(post_id)),
            ProjectionExpression="#m, #s, #e",
            ExpressionAttributeNames={"#m": "mode", "#s": "spread", "#e": "modeEpoch"},
        )
        item = from_item(response.get("Item"))
        if item is None:
            raise NotFound(f"post {post_id!r} not found")
        info = self._posts[post_id] = PostInfo.of(item)
        return info

    def like_state(self, post_id: str, user_id: str) -> dict[str, Any]:
        """The caller's own like of a post, read from its state item (strongly consistent: exact at
        once in either mode, whatever the aggregator's lag)."""
        key = self._post(post_id).like_key(post_id, user_id)
        response = read(self.dynamodb.get_item, self.refcount.retry, None, TableName=self.table_name, Key=to_item(key), ConsistentRead=True)
        item = from_item(response.get("Item"))
        return {"postId": post_id, "userId": user_id, "liked": bool(item) and item.get(LIKED, True) is not False}

    def switch_mode(self, post_id: str, mode: str) -> tuple[dict[str, Any], bool]:
        """Switch a post to ``mode``; (the post, switched by this call?).

        One conditional UpdateItem on META: ``mode``, ``modeEpoch`` + 1, ``modeAt``, if the post
        is in the other mode. No like item moves (their keys do not depend on the mode), so likes
        may flow during the switch: each flip is counted once by the write that made it (module
        doc). Sent again, it finds the post already in ``mode``: switched ``False`` (also when an
        earlier attempt of this call switched it and its answer was lost). A post stored before
        ``spread`` cannot switch (:class:`NotSwitchable`).
        """
        require_mode(mode)
        params = {
            "TableName": self.table_name,
            "Key": to_item(post_key(post_id)),
            "UpdateExpression": "SET #mode = :mode, #at = :now ADD #epoch :one",
            "ConditionExpression": "attribute_exists(#pk) AND attribute_exists(#spread) AND #mode <> :mode",
            "ExpressionAttributeNames": {"#pk": "PK", "#mode": "mode", "#at": "modeAt", "#epoch": "modeEpoch", "#spread": "spread"},
            "ExpressionAttributeValues": to_item({":mode": mode, ":now": now_ms(), ":one": 1}),
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        report = run(self.dynamodb.update_item, params, policy=self.refcount.retry, write=True)
        if report.outcome is Outcome.APPLIED:
            item = from_item(report.attributes) or {}
            switched = True
        elif report.outcome is Outcome.REJECTED and report.failure is not None:
            item = from_item(report.failure.old_item(0)) or {}
            if not item:
                raise NotFound(f"post {post_id!r} not found")
            if "spread" not in item:
                raise NotSwitchable(f"post {post_id!r} keeps its likes in seed 01's layout: it stays {item.get('mode', STANDARD)}")
            switched = False
        else:
            raise ContentionError(f"could not switch post {post_id!r}; resend the same request")
        self._posts[post_id] = PostInfo.of(item)
        return public_post(item), switched

    def like(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """Like, unless a newer request of this user on this post already decided (the latest wins).

        ``at``: when the API received the request (ms; default now), kept by a deferred replay.
        The like item carries the request's id, so a re-drive of this request that finds it
        knows the like is its own (``changed``) rather than an earlier one's."""
        return self._set(post_id, user_id, True, request_id or new_request_id(), now_ms() if at is None else at)

    def unlike(self, post_id: str, user_id: str, *, request_id: str | None = None, at: int | None = None) -> LikeChange:
        """Unlike (the like item stays as a tombstone that orders later replays), unless a newer
        request of this user on this post already decided."""
        return self._set(post_id, user_id, False, request_id or new_request_id(), now_ms() if at is None else at)

    def _set(self, post_id: str, user_id: str, liked: bool, request_id: str, at: int) -> LikeChange:
        command = Command("like" if liked else "unlike", {"postId": post_id, "userId": user_id, "at": at}, request_id)
        stamp = Stamp(at, request_id)
        info = self._post(post_id)
        result = self._write(post_id, user_id, liked, stamp, info)
        if result.reason == "guard":  # the fence: the post went hot since this process read its mode
            info = self._posts[post_id] = PostInfo.of(result.value)
            result = self._write(post_id, user_id, liked, stamp, info)
        promoted = info.mode == STANDARD and self._under_pressure(post_id, info, result) and self._promote(post_id)
        if promoted and result.outcome is Outcome.CONTENTION:  # one more try, as the hot post it now is
            result = self._write(post_id, user_id, liked, stamp, self._post(post_id))
        change = self._change(result, command)
        change.promoted = promoted
        return change

    def _under_pressure(self, post_id: str, info: PostInfo, result: Result) -> bool:
        """Whether this process's standard likes of the post retried ``hot_after_retries`` attempts
        (conflicts on META, throttles) within the window: the post is hot, whatever its mode says.
        Only attempts retried because of a conflict or a throttle count: a user's own re-sends
        (a refused flip, then a stamp-only write) are no pressure."""
        if not self.hot_after_retries or info.spread is None or result.contended_retries < 1:
            return False
        now = now_ms()
        recent = [(t, n) for t, n in self._pressure.get(post_id, []) if now - t < PRESSURE_WINDOW_MS]
        recent.append((now, result.contended_retries))
        self._pressure[post_id] = recent
        return sum(n for _, n in recent) >= self.hot_after_retries

    def _promote(self, post_id: str) -> bool:
        """Switch the post to hot (:meth:`switch_mode`); False if another request just did, or it failed."""
        self._pressure.pop(post_id, None)
        try:
            return self.switch_mode(post_id, HOT)[1]
        except ContentionError:
            return False  # the next likes under pressure try again

    def _write(self, post_id: str, user_id: str, liked: bool, stamp: Stamp, info: PostInfo) -> Result:
        attributes: dict[str, Any] = {"userId": user_id}
        if liked:
            attributes["likedAt"] = stamp.at // 1000
        key = info.like_key(post_id, user_id)
        if info.spread is None:  # seed 01's layout: standard for good
            return self.toggle.set(post_key(post_id), key, liked, stamp, attributes=attributes, guard=STANDARD_GUARD)
        attributes["postId"] = post_id
        if info.mode == HOT:  # the state item alone; the stream's aggregator counts its delta
            return self.toggle.set_alone(key, liked, stamp, attributes=attributes, delta_attribute=DELTA)
        # standard: counted in the transaction; every write says delta 0 so the aggregator skips it
        return self.toggle.set(post_key(post_id), key, liked, stamp, attributes=attributes, every_write={DELTA: 0}, guard=STANDARD_GUARD)

    @staticmethod
    def _change(result: Result, command: Command) -> LikeChange:
        post_id, liked = command.payload["postId"], command.op == "like"
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return LikeChange(liked=liked, changed=True, result=result)
        if result.outcome is Outcome.REJECTED:
            if result.reason == "parent_missing":
                raise NotFound(f"post {post_id!r} not found")
            if result.reason == "tally_would_go_negative" and int((result.value or {}).get("modeEpoch", 0)) > 0:
                # A post that was hot: this user's hot like may not be aggregated yet. Later, it is.
                raise ContentionError(
                    f"post {post_id!r}: its tally has not caught up with its stream yet; retry the request", command=command
                )
            if result.reason == "tally_would_go_negative":
                raise IntegrityError(f"post {post_id!r}: like exists but likeTally is 0")
            if result.reason == "stale":  # a newer request decided: the state is the other one
                return LikeChange(liked=not liked, changed=False, result=result)
            if result.reason == "already_set":
                return LikeChange(liked=liked, changed=False, result=result)
        # Contention, or the mode switched twice under this request: safe to re-drive (the stamp
        # makes a replay idempotent whatever happened in-line).
        raise ContentionError(f"post {post_id!r} is busy after {result.attempts} attempts; retry the request", command=command)

    def replayables(self) -> dict[str, Replayable]:
        """The deferred like/unlike commands the retry worker replays."""
        return {"like": Replayable(LikePayload, self._replay), "unlike": Replayable(LikePayload, self._replay)}

    def _replay(self, p: LikePayload, command: Command) -> Verdict:
        """Replay with the request's own id and time: APPLIED if this request made the state
        (now or in an attempt whose answer was lost), DUPLICATE if the state already was so,
        REJECTED ``stale`` if a newer request of this user decided."""
        at = p.at if p.at is not None else command.created_at * 1000  # queued before requests carried their time
        try:
            change = (self.like if command.op == "like" else self.unlike)(p.postId, p.userId, request_id=command.operation_id, at=at)
        except (NotFound, IntegrityError) as exc:
            return Verdict("REJECTED", {"error": exc.code, "message": exc.message})
        body = {"postId": p.postId, "userId": p.userId, "liked": change.liked, "changed": change.changed}
        if change.result.reason == "stale":
            message = "a newer request of this user on this post decided the state"
            return Verdict("REJECTED", {"error": "stale", "message": message, **body})
        return Verdict("APPLIED" if change.changed else "DUPLICATE", body)

    def likers(self, post_id: str, *, limit: int, cursor: str | None = None) -> LikersPage:
        """One page of likers; ``cursor`` is opaque (from the previous page). A standard post's
        likers come oldest key first; a hot post's lane by lane (``S0`` first), each lane in
        key order.

        The cursor names only what a listing showed: the lane and the last liker listed in it
        (or none: the lane from its start), signed for this post (:func:`encode_cursor`).
        DynamoDB's LastEvaluatedKey, which may be a tombstone (a user who unliked), is only
        followed inside the page, never handed out. So a page reads on until it has listed at
        least one liker (a page that ends in a run of tombstones would otherwise hand out a
        cursor that makes no progress), and stops after ``LIKERS_QUERIES`` queries once it has.
        """
        lanes = self._post(post_id).lanes(post_id)  # 404 for a missing post rather than an empty list
        lane, resume = decode_cursor(self._cursor_key, post_id, cursor, len(lanes)) if cursor else (0, None)
        start = None if resume is None else {"PK": lanes[lane], "SK": f"{LIKE_PREFIX}{resume}"}
        capacity = Capacity()
        likers: list[dict[str, Any]] = []
        rounds = 0
        while lane < len(lanes) and len(likers) < limit and (rounds < LIKERS_QUERIES or not likers):
            rounds += 1
            wanted = limit - len(likers)
            found, last = self._likers_query(lanes[lane], max(wanted, LIKERS_READ), start, capacity)
            taken = found[:wanted]
            likers.extend(taken)
            if taken:
                resume = taken[-1]["userId"]
            if len(found) > wanted:
                break  # the page is full inside this lane: the next one resumes after its last liker
            if last is None:
                lane, start, resume = lane + 1, None, None  # this lane is done: the next one from its start
            else:
                start = last  # DynamoDB's position (maybe a tombstone): followed here, never in a cursor
        if lane >= len(lanes):
            return LikersPage(likers, None, capacity)
        return LikersPage(likers, encode_cursor(self._cursor_key, post_id, lane, resume), capacity)

    def _likers_query(
        self, pk: str, limit: int, start: dict[str, Any] | None, capacity: Capacity
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One Query of one partition key's likes: (the likers it found, its LastEvaluatedKey or ``None``: done)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": "PK", "#sk": "SK"},
            "ExpressionAttributeValues": to_item({":pk": pk, ":prefix": LIKE_PREFIX}),
            "Limit": limit,  # Limit counts before the filter: a short page is followed by the caller
            "ReturnConsumedCapacity": "TOTAL",
        }
        expression, names, values = self.toggle.counted()  # tombstones are stored, not listed
        kwargs["FilterExpression"] = expression
        kwargs["ExpressionAttributeNames"].update(names)
        kwargs["ExpressionAttributeValues"].update(values)
        if start:
            kwargs["ExclusiveStartKey"] = to_item(start)
        response = read(self.dynamodb.query, self.refcount.retry, capacity, **kwargs)
        found = []
        for raw in response.get("Items", []):
            item = from_item(raw) or {}
            found.append({"userId": item["SK"][len(LIKE_PREFIX) :], "likedAt": item.get("likedAt")})
        last = response.get("LastEvaluatedKey")
        return found, (from_item(last) if last else None)

    def audit(self, post_id: str) -> QuickAudit:
        """The stored tally against a count of the likes (tombstones aside) under every partition
        key of the post: a quick look, not at a settled point. A post that is or was hot has its
        likes counted by the stream's aggregator, so its tally trails its likes by the
        aggregator's lag: that is not drift, and no drift is concluded (``drift`` ``None``,
        ``reason`` ``aggregated``; :meth:`audit_posts` compares at a settled point)."""
        before, _ = self.refcount.read(post_key(post_id))
        if before is None:
            raise NotFound(f"post {post_id!r} not found")
        info = PostInfo.of(before)
        audit = self.refcount.audit(post_key(post_id), LIKE_PREFIX, where=self.toggle.counted(), partitions=info.lanes(post_id))
        if audit is None:
            raise NotFound(f"post {post_id!r} not found")
        after, _ = self.refcount.read(post_key(post_id))
        aggregated = any(aggregated_post(PostInfo.of(meta)) for meta in (before, after or {}))
        return QuickAudit(post_id, audit.stored, audit.counted, aggregated, audit.capacity)

    # ------------------------------------------------------------------ audit at a settled point, repair
    def audit_posts(
        self,
        post_ids: list[str],
        *,
        repair: bool = False,
        wait_s: float = 8.0,
        poll_s: float = 0.1,
        budget_s: float | None = None,
    ) -> list[Settled]:
        """Audit posts each at a settled point, and repair a drifted tally surgically.

        Seed 01: "reconcile rarely, repair surgically". A count takes time while likes flow, and
        a hot post's tally trails its likes by the aggregator's lag, so a count is compared with
        the tally only at a point where both describe the same likes:

        1. **first point**: a post that counts only in transactions (standard, never hot, or
           stored before ``spread``) is read as it is (``likeTally``, ``tallyRev``, ``modeEpoch``).
           A post that is or was hot gets a **probe** in each spread key, and is read once the
           aggregator shows every probe: every like written before them is then in the tally
           (a lane's records arrive in write order). Probes are numbered per lane (``probeSeq``,
           an ADD): a later probe applied (another audit's) also shows this one was;
        2. the likes are counted (strongly consistent, every spread key);
        3. **second point**, the same way (new probes).

        The count is exact for the tally when ``tallyRev`` (moved by every counted change: a
        standard flip, an aggregated hot one, a repair) and ``modeEpoch`` did not move from the
        first point to the second: no counted change was written during the count. Otherwise the
        post is ``moving``, and nothing is concluded. A drift found at a settled point is repaired
        (``repair``) by one conditional write, ``likeTally = counted`` if ``tallyRev`` and
        ``modeEpoch`` are still those of the second point: a like counted since then refuses it
        (``moving``), and concurrent likes are never overwritten. A like written after the second
        point and aggregated after the repair is added to the repaired tally, as it should be.

        ``budget_s``: the time the audit may take (the API passes the function's remaining time
        less ``AUDIT_MARGIN_S``). No call is started after it; a post not reached, or not
        finished, answers ``settled`` False, ``reason`` ``deadline`` (a settled drift found but
        not repaired in time keeps its verdict with that reason).
        """
        deadline = None if budget_s is None else time.monotonic() + budget_s
        results = {p: Settled(p) for p in post_ids}
        first = self._settle_point(results, wait_s, poll_s, deadline)
        counted: dict[str, int] = {}
        for post_id, meta in first.items():
            total = 0
            for pk in PostInfo.of(meta).lanes(post_id):
                if late(deadline):
                    results[post_id].reason = DEADLINE
                    break
                total += self.refcount.count(pk, LIKE_PREFIX, self.toggle.counted(), results[post_id].capacity)
            else:
                counted[post_id] = total
        second = self._settle_point({p: results[p] for p in counted}, wait_s, poll_s, deadline)
        for post_id, meta in second.items():
            result, before = results[post_id], first[post_id]
            if (before.get(REVISION), before.get("modeEpoch")) != (meta.get(REVISION), meta.get("modeEpoch")):
                result.reason = "moving"
                continue
            result.stored, result.counted, result.settled = int(meta.get(TALLY, 0)), counted[post_id], True
            if repair and result.drift:
                if late(deadline):
                    result.reason = DEADLINE
                    continue
                result.repaired = self._repair(post_id, meta, counted[post_id], result)
        return [results[p] for p in post_ids]

    def _settle_point(
        self, results: dict[str, Settled], wait_s: float, poll_s: float, deadline: float | None = None
    ) -> dict[str, dict[str, Any]]:
        """Each post's META at a point where its tally includes every like written before it
        (see :meth:`audit_posts`); posts missing, whose aggregator is behind, or not reached
        before ``deadline`` (``time.monotonic()``) are left out, with their reason."""
        points: dict[str, dict[str, Any]] = {}
        probing: dict[str, dict[str, int]] = {}  # post id -> lane name -> this audit's probe number
        for post_id, result in results.items():
            if late(deadline):
                result.reason = DEADLINE
                continue
            meta, _ = self.refcount.read(post_key(post_id))
            if meta is None:
                result.reason = "not_found"
                continue
            info = PostInfo.of(meta)
            if info.spread is None or not aggregated_post(info):
                points[post_id] = meta  # counted in transactions only: as it is now
                continue
            if AGG_PROBE not in meta:  # stored before probes: the aggregator needs the map to record them
                self._add_probe_map(post_id)
            probing[post_id] = {f"S{lane}": self._probe(post_id, lane) for lane in range(info.spread)}
        until = time.monotonic() + wait_s
        if deadline is not None and deadline < until:
            until, behind = deadline, DEADLINE
        else:
            behind = "aggregator_behind"
        while probing:
            for post_id, mine in list(probing.items()):
                if time.monotonic() >= until:
                    break
                meta, _ = self.refcount.read(post_key(post_id))
                seen = (meta or {}).get(AGG_PROBE) or {}
                if all(probe_reached(seen.get(lane), number) for lane, number in mine.items()):
                    points[post_id] = meta or {}
                    del probing[post_id]
            if probing and time.monotonic() >= until:
                for post_id in probing:
                    results[post_id].reason = behind
                break
            if probing:
                time.sleep(poll_s)
        return points

    def _probe(self, post_id: str, lane: int) -> int:
        """Write a probe into one spread key; its number (``probeSeq``) in the key's probe order.
        A re-send after a lost answer numbers a second probe: waiting for the later one is as good."""
        params = {
            "TableName": self.table_name,
            "Key": to_item({"PK": hot_pk(post_id, lane), "SK": PROBE_SK}),
            "UpdateExpression": "SET #post = :post, #at = :now ADD #seq :one",
            "ExpressionAttributeNames": {"#post": "postId", "#at": "probedAt", "#seq": PROBE_SEQ},
            "ExpressionAttributeValues": to_item({":post": post_id, ":now": now_ms(), ":one": 1}),
            "ReturnValues": "UPDATED_NEW",
        }
        report = run(self.dynamodb.update_item, params, policy=self.refcount.retry, write=True)
        if report.outcome is not Outcome.APPLIED:
            raise ContentionError(f"could not probe post {post_id!r}; audit it again")
        return int((from_item(report.attributes) or {})[PROBE_SEQ])

    def _repair(self, post_id: str, meta: dict[str, Any], counted: int, result: Settled) -> bool:
        """``likeTally = counted`` if nothing was counted since ``meta`` was read (module doc).

        The write carries a fresh ``repairToken``: after an unknown outcome, a re-send refused
        because ``tallyRev`` moved may have been refused by this repair's own first attempt,
        committed; the refusal's ``ALL_OLD`` then holds this token, and the repair is done."""
        token = uuid.uuid4().hex
        names = {"#tally": TALLY, "#rev": REVISION, "#epoch": "modeEpoch", "#token": REPAIRED_BY}
        values: dict[str, Any] = {":counted": counted, ":one": 1, ":token": token}
        conditions = []
        for name, attribute in (("#rev", REVISION), ("#epoch", "modeEpoch")):
            if attribute in meta:
                values[f":{name[1:]}"] = meta[attribute]
                conditions.append(f"{name} = :{name[1:]}")
            else:
                conditions.append(f"attribute_not_exists({name})")
        params = {
            "TableName": self.table_name,
            "Key": to_item(post_key(post_id)),
            "UpdateExpression": "SET #tally = :counted, #token = :token ADD #rev :one",
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

        def was_it_us(report: Report, failure: Classified) -> Stop | None:
            stored = from_item(failure.old_item(0)) or {}
            return Stop(True) if report.unknown_seen and stored.get(REPAIRED_BY) == token else None

        report = run(
            self.dynamodb.update_item, params, policy=self.refcount.retry, capacity=result.capacity, write=True, on_condition=was_it_us
        )
        if report.outcome is Outcome.APPLIED or (report.stopped and report.value is True):
            return True
        result.reason = "moving" if report.outcome is Outcome.REJECTED else "busy"
        return False

    def _add_probe_map(self, post_id: str) -> None:
        params = {
            "TableName": self.table_name,
            "Key": to_item(post_key(post_id)),
            "UpdateExpression": "SET #p = if_not_exists(#p, :empty)",
            "ExpressionAttributeNames": {"#p": AGG_PROBE},
            "ExpressionAttributeValues": {":empty": {"M": {}}},
        }
        if run(self.dynamodb.update_item, params, policy=self.refcount.retry, write=True).outcome is not Outcome.APPLIED:
            raise ContentionError(f"post {post_id!r} is busy; audit it again")


@dataclass(frozen=True)
class LikePayload:
    """A deferred like or unlike."""

    postId: str
    userId: str
    at: int | None = None
    """When the API received the request (ms): a replay is ordered by it, not by when it runs."""

    def __post_init__(self) -> None:
        require(valid_id(self.postId) and valid_id(self.userId), "invalid postId/userId")
        require(self.at is None or (type(self.at) is int and self.at > 0), "invalid at")


def created_mode(item: dict[str, Any]) -> str:
    """The mode a post was created in: ``createdMode``, or for a post stored before it, derived
    from its mode now and ``modeEpoch`` (each switch flips between the two modes and adds one)."""
    if CREATED_MODE in item:
        return str(item[CREATED_MODE])
    mode = str(item.get("mode", STANDARD))
    return mode if int(item.get("modeEpoch", 0)) % 2 == 0 else next(m for m in MODES if m != mode)


def aggregated_post(info: PostInfo) -> bool:
    """Whether some of the post's likes are (or were) counted by the stream's aggregator: it is
    or was hot. Its tally then trails its likes by the aggregator's lag."""
    return info.spread is not None and (info.mode == HOT or info.epoch > 0)


def late(deadline: float | None) -> bool:
    """Whether ``deadline`` (``time.monotonic()``) has passed."""
    return deadline is not None and time.monotonic() >= deadline


def probe_reached(seen: Any, number: int) -> bool:
    """Whether a lane's applied probe (``aggProbe.S<n>``) is ``number`` or a later one: probes of
    a lane are applied in write order, so a later one applied means this one was."""
    return isinstance(seen, str) and seen.isdigit() and int(seen) >= number


def require_mode(mode: str) -> None:
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")


def public_post(item: dict[str, Any]) -> dict[str, Any]:
    """The post as the API shows it; a hot post's tally is exact as of ``asOf`` (ms: the oldest
    lane watermark of the aggregator, ``None`` before its first batch), and ``lagMs`` is the lag
    of what was pending when the aggregator last counted for it: how long the oldest like of its
    last write to META had waited (``None`` before the first). It does not grow while the post is
    idle: a post whose likes are all aggregated is not behind, however old ``asOf`` is. A like not
    delivered to the aggregator yet is invisible here (a hot like writes nothing shared); the
    aggregator's iterator-age alarm watches for that."""
    post = {
        "postId": item["postId"],
        "authorId": item.get("authorId"),
        "body": item.get("body"),
        "likeTally": int(item.get(TALLY, 0)),
        "createdAt": item.get("createdAt"),
        "mode": item.get("mode", STANDARD),
        "modeEpoch": int(item.get("modeEpoch", 0)),
    }
    if post["mode"] == HOT:
        watermark = as_of(item, AGG_AT)
        post["asOf"] = watermark
        lag = item.get(AGG_LAG)
        post["lagMs"] = None if watermark is None or lag is None else int(lag)
    return post


def cursor_key(secret: str, table_name: str) -> bytes:
    """The key likers cursors are signed with: derived from ``CURSOR_SECRET`` (:class:`LikeSettings`),
    or, when it is unset (tests, the local stack), from the table name (forgeable by whoever
    knows it: local use only; the template always sets the secret)."""
    return hmac.new((secret or f"local:{table_name}").encode(), CURSOR_LABEL, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_tag(key: bytes, post_id: str, payload: bytes) -> bytes:
    return hmac.new(key, post_id.encode() + b"\n" + payload, hashlib.sha256).digest()[:16]


def encode_cursor(key: bytes, post_id: str, lane: int, after: str | None) -> str:
    """A likers cursor: ``[lane, the last liker listed in it or null]`` and an HMAC-SHA256 tag
    (128 bits) over the post id and that payload. It names nothing the listing did not show."""
    payload = json.dumps([lane, after], separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_cursor_tag(key, post_id, payload))}"


def decode_cursor(key: bytes, post_id: str, cursor: str, lanes: int) -> tuple[int, str | None]:
    """(lane index, the user to resume after or ``None``) of a cursor this deployment issued for
    this post's likers; anything else (forged, tampered, another post's) is :class:`InvalidCursor`,
    with the same message whatever failed."""
    try:
        body, dot, tag = cursor.partition(".")
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        given = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidCursor() from exc
    if not dot or not hmac.compare_digest(given, _cursor_tag(key, post_id, payload)):
        raise InvalidCursor()
    try:
        lane, after = json.loads(payload)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor() from exc
    if type(lane) is not int or not 0 <= lane < lanes or not (after is None or (isinstance(after, str) and valid_id(after))):
        raise InvalidCursor()
    return lane, after
