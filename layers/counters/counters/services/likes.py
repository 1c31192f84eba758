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
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from counters.core.client import client
from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.engine import read, run
from counters.core.errors import (
    AlreadyExists,
    ContentionError,
    IdempotencyKeyReused,
    IntegrityError,
    InvalidRequest,
    NotFound,
    NotSwitchable,
)
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.items import from_item, to_item
from counters.core.lru import CACHE_SIZE, LRU
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings, env
from counters.primitives.aggregator import Aggregator, Change, as_of
from counters.primitives.refcount import Audit, RefCount
from counters.primitives.toggle import Guard, Stamp, Toggle, now_ms

NAMESPACE = uuid.UUID("4c3d0a52-88f4-4f1e-9a0e-2f5b0c7d9e61")
TALLY = "likeTally"
LIKE_PREFIX = "LIKE#USER#"
LIKED = "liked"  # the like item's state: False = a tombstone (an unlike, kept to order later replays)
LIKERS_QUERIES = 12  # queries per likers page at most (tombstones and empty spread keys make pages short)
STANDARD, HOT = "standard", "hot"
MODES = (STANDARD, HOT)
SPREAD = 8  # a hot post's like partition keys; stored on the post (``spread``): fixed for its life
DELTA = "delta"  # on a hot like item: what its last write changed the count by (+1, -1, 0)
AGG_SEQ, AGG_AT = "aggSeq", "aggAt"  # on a post: the aggregator's checkpoint and watermark per lane
REVISION = "tallyRev"  # on a post: moves with every change of likeTally (a repair's condition)
AGG_PROBE = "aggProbe"  # on a post: per lane, the last probe token the aggregator applied
PROBE_SK = "PROBE"  # a probe item's sort key, one per spread key (written by the audit)
CREATED_MODE = "createdMode"  # on a post: the mode it was created in (a re-sent create is compared with it)
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


def like_aggregator(table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None) -> Aggregator:
    """The hot mode's tally keeper: hot like deltas from the stream onto ``likeTally`` on META."""
    return Aggregator(
        table_name,
        post_key,
        tally_attribute=TALLY,
        seq_attribute=AGG_SEQ,
        at_attribute=AGG_AT,
        probe_attribute=AGG_PROBE,
        revision_attribute=REVISION,
        dynamodb=dynamodb,
        retry=retry,
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
    if sk == PROBE_SK and "probe" in image:
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
    stream's aggregator did not reach the audit's probe in time), ``not_found``."""

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
        self._posts: LRU[str, PostInfo] = LRU(cache_size)  # posts seen by this process (a post is never deleted)
        self._pressure: LRU[str, list[tuple[int, int]]] = LRU(cache_size)  # post -> (ms, retried attempts) of recent standard likes

    @classmethod
    def from_settings(cls, settings: Settings) -> Likes:
        hot_after = settings.hot_after_retries if isinstance(settings, LikeSettings) else 0
        return cls(settings.table_name, retry=settings.retry, hot_after_retries=hot_after)

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
        key order: the cursor holds the lane and the position in it."""
        lanes = self._post(post_id).lanes(post_id)  # 404 for a missing post rather than an empty list
        spread = len(lanes) > 1
        lane, start = decode_cursor(cursor, lanes) if cursor else (0, None)
        capacity = Capacity()
        likers: list[dict[str, Any]] = []
        rounds = 0
        while lane < len(lanes) and len(likers) < limit and rounds < LIKERS_QUERIES:
            rounds += 1
            last = self._likers_query(lanes[lane], limit - len(likers), start, likers, capacity)
            if last is None:
                lane, start = lane + 1, None  # this lane is done: the next one from its start
            else:
                start = last
        if lane >= len(lanes):
            return LikersPage(likers, None, capacity)
        return LikersPage(likers, encode_cursor(start, lane if spread else None), capacity)

    def _likers_query(
        self, pk: str, limit: int, start: dict[str, Any] | None, likers: list[dict[str, Any]], capacity: Capacity
    ) -> dict[str, Any] | None:
        """One Query of one partition key's likes into ``likers``; the LastEvaluatedKey (``None``: done)."""
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
        for raw in response.get("Items", []):
            item = from_item(raw) or {}
            likers.append({"userId": item["SK"][len(LIKE_PREFIX) :], "likedAt": item.get("likedAt")})
        last = response.get("LastEvaluatedKey")
        return from_item(last) if last else None

    def audit(self, post_id: str) -> Audit:
        """The stored tally against a count of the likes (tombstones aside) under every partition
        key of the post. Hot likes not aggregated yet make a drift that is only lag."""
        lanes = self._post(post_id).lanes(post_id)
        audit = self.refcount.audit(post_key(post_id), LIKE_PREFIX, where=self.toggle.counted(), partitions=lanes)
        if audit is None:
            raise NotFound(f"post {post_id!r} not found")
        return audit

    # ------------------------------------------------------------------ audit at a settled point, repair
    def audit_posts(self, post_ids: list[str], *, repair: bool = False, wait_s: float = 8.0, poll_s: float = 0.1) -> list[Settled]:
        """Audit posts each at a settled point, and repair a drifted tally surgically.

        Seed 01: "reconcile rarely, repair surgically". A count takes time while likes flow, and
        a hot post's tally trails its likes by the aggregator's lag, so a count is compared with
        the tally only at a point where both describe the same likes:

        1. **first point**: a post that counts only in transactions (standard, never hot, or
           stored before ``spread``) is read as it is (``likeTally``, ``tallyRev``, ``modeEpoch``).
           A post that is or was hot gets a **probe** in each spread key, and is read once the
           aggregator shows every probe: every like written before them is then in the tally
           (a lane's records arrive in write order);
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
        """
        results = {p: Settled(p) for p in post_ids}
        first = self._settle_point(results, wait_s, poll_s)
        counted = {}
        for post_id, meta in first.items():
            lanes = PostInfo.of(meta).lanes(post_id)
            counted[post_id] = sum(self.refcount.count(pk, LIKE_PREFIX, self.toggle.counted(), results[post_id].capacity) for pk in lanes)
        second = self._settle_point({p: results[p] for p in first}, wait_s, poll_s)
        for post_id, meta in second.items():
            result, before = results[post_id], first[post_id]
            if (before.get(REVISION), before.get("modeEpoch")) != (meta.get(REVISION), meta.get("modeEpoch")):
                result.reason = "moving"
                continue
            result.stored, result.counted, result.settled = int(meta.get(TALLY, 0)), counted[post_id], True
            if repair and result.drift:
                result.repaired = self._repair(post_id, meta, counted[post_id], result)
        return [results[p] for p in post_ids]

    def _settle_point(self, results: dict[str, Settled], wait_s: float, poll_s: float) -> dict[str, dict[str, Any]]:
        """Each post's META at a point where its tally includes every like written before it
        (see :meth:`audit_posts`); posts missing or whose aggregator is behind are left out."""
        points: dict[str, dict[str, Any]] = {}
        probing: dict[str, tuple[str, int]] = {}  # post id -> (token, spread)
        for post_id, result in results.items():
            meta, _ = self.refcount.read(post_key(post_id))
            if meta is None:
                result.reason = "not_found"
                continue
            info = PostInfo.of(meta)
            if info.spread is None or (info.mode == STANDARD and info.epoch == 0):
                points[post_id] = meta  # counted in transactions only: as it is now
                continue
            if AGG_PROBE not in meta:  # stored before probes: the aggregator needs the map to record them
                self._add_probe_map(post_id)
            token = uuid.uuid4().hex
            for lane in range(info.spread):
                item = {"PK": hot_pk(post_id, lane), "SK": PROBE_SK, "postId": post_id, "probe": token, "probedAt": now_ms()}
                report = run(
                    self.dynamodb.put_item, {"TableName": self.table_name, "Item": to_item(item)}, policy=self.refcount.retry, write=True
                )
                if report.outcome is not Outcome.APPLIED:
                    raise ContentionError(f"could not probe post {post_id!r}; audit it again")
            probing[post_id] = (token, info.spread)
        deadline = time.monotonic() + wait_s
        while probing:
            for post_id, (token, spread) in list(probing.items()):
                meta, _ = self.refcount.read(post_key(post_id))
                seen = (meta or {}).get(AGG_PROBE) or {}
                if all(seen.get(f"S{n}") == token for n in range(spread)):
                    points[post_id] = meta or {}
                    del probing[post_id]
            if probing and time.monotonic() >= deadline:
                for post_id in probing:
                    results[post_id].reason = "aggregator_behind"
                break
            if probing:
                time.sleep(poll_s)
        return points

    def _repair(self, post_id: str, meta: dict[str, Any], counted: int, result: Settled) -> bool:
        """``likeTally = counted`` if nothing was counted since ``meta`` was read (module doc)."""
        names = {"#tally": TALLY, "#rev": REVISION, "#epoch": "modeEpoch"}
        values: dict[str, Any] = {":counted": counted, ":one": 1}
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
            "UpdateExpression": "SET #tally = :counted ADD #rev :one",
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(values),
        }
        report = run(self.dynamodb.update_item, params, policy=self.refcount.retry, capacity=result.capacity, write=True)
        if report.outcome is Outcome.APPLIED:
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


def require_mode(mode: str) -> None:
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")


def public_post(item: dict[str, Any], now: int | None = None) -> dict[str, Any]:
    """The post as the API shows it; a hot post's tally is exact as of ``asOf`` (ms: the oldest
    lane watermark of the aggregator, ``None`` before its first batch), ``lagMs`` behind now."""
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
        post["lagMs"] = None if watermark is None else max(0, (now_ms() if now is None else now) - watermark)
    return post


def encode_cursor(key: dict[str, Any] | None, lane: int | None = None) -> str:
    """A standard post's cursor is the last key; a hot post's is ``{"lane": n, "key": key or null}``."""
    payload: Any = key if lane is None else {"lane": lane, "key": key}
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, lanes: list[str]) -> tuple[int, dict[str, Any] | None]:
    """(lane index, start key) of a cursor, refusing one that was not issued for this post's likers
    (``lanes``: its partition keys, one for a standard post)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("cursor is not valid") from exc
    lane, key = 0, payload
    if len(lanes) > 1:
        if not isinstance(payload, dict) or set(payload) != {"lane", "key"}:
            raise InvalidRequest("cursor is not valid for this post")
        lane, key = payload["lane"], payload["key"]
        if type(lane) is not int or not 0 <= lane < len(lanes):
            raise InvalidRequest("cursor is not valid for this post")
        if key is None:
            return lane, None
    if (
        not isinstance(key, dict)
        or set(key) != {"PK", "SK"}
        or key.get("PK") != lanes[lane]
        or not isinstance(key.get("SK"), str)
        or not key["SK"].startswith(LIKE_PREFIX)
    ):
        raise InvalidRequest("cursor is not valid for this post")
    return lane, key
