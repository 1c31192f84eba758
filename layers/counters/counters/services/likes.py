"""Posts and likes: the reference-count primitive applied to seed 01's item shapes.

| item | PK | SK |
|---|---|---|
| post | ``POST#<postId>`` | ``META`` (``likeTally`` is the reference count) |
| like | ``POST#<postId>`` | ``LIKE#USER#<userId>`` (``liked``; kept as a tombstone after an unlike) |

Like and unlike are a :class:`~counters.primitives.toggle.Toggle`: the latest request of a user on
a post wins, whenever its replay runs.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from counters.core.client import client, from_item, to_item
from counters.core.commands import Command, Replayable, Verdict, new_request_id, require
from counters.core.engine import read, run
from counters.core.errors import AlreadyExists, ContentionError, IdempotencyKeyReused, IntegrityError, InvalidRequest, NotFound
from counters.core.failures import RetryPolicy
from counters.core.ids import valid_id
from counters.core.outcome import Capacity, Outcome, Result
from counters.core.settings import Settings
from counters.primitives.refcount import Audit, RefCount
from counters.primitives.toggle import Stamp, Toggle, now_ms

NAMESPACE = uuid.UUID("4c3d0a52-88f4-4f1e-9a0e-2f5b0c7d9e61")
TALLY = "likeTally"
LIKE_PREFIX = "LIKE#USER#"
LIKED = "liked"  # the like item's state: False = a tombstone (an unlike, kept to order later replays)
LIKERS_ROUNDS = 4  # queries per likers page at most, when tombstones make pages short


def post_key(post_id: str) -> dict[str, str]:
    return {"PK": f"POST#{post_id}", "SK": "META"}


def post_id_for(author_id: str, idempotency_key: str) -> str:
    """The post id a key stands for: per author, so one author's key never names another's post."""
    return uuid.uuid5(NAMESPACE, f"{author_id}\n{idempotency_key}").hex


def like_key(post_id: str, user_id: str) -> dict[str, str]:
    return {"PK": f"POST#{post_id}", "SK": f"{LIKE_PREFIX}{user_id}"}


@dataclass
class LikeChange:
    """The answer to like/unlike: the state now, and whether this request changed it."""

    liked: bool
    changed: bool
    result: Result


@dataclass
class LikersPage:
    user_ids: list[dict[str, Any]]
    cursor: str | None
    capacity: Capacity


class Likes:
    """Create posts, like/unlike them exactly once, list likers, audit the tally."""

    def __init__(self, table_name: str, *, dynamodb: Any = None, retry: RetryPolicy | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = dynamodb
        self.refcount = RefCount(table_name, tally_attribute=TALLY, dynamodb=dynamodb, retry=retry)
        self.toggle = Toggle(table_name, tally_attribute=TALLY, state_attribute=LIKED, dynamodb=dynamodb, retry=retry)

    @classmethod
    def from_settings(cls, settings: Settings) -> Likes:
        return cls(settings.table_name, retry=settings.retry)

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def create_post(
        self, *, author_id: str, body: str, post_id: str | None = None, idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Create a post with ``likeTally = 0``; returns (the post, created now?).

        Re-sends are the same post, never a second one: with ``idempotency_key`` the id is
        derived from (author, key); with a client ``post_id`` the id is the client's. Either
        way the Put is conditioned on the id being new, and a post already stored with the
        same author and body is this request's (``created`` False: an earlier attempt, or the
        one whose answer was lost, wrote it: ``created`` is True when the stored post carries
        this request's id). A different post under that id is
        :class:`AlreadyExists` (the client's id) or :class:`IdempotencyKeyReused` (the key).
        Without either, the id is random and a re-send creates another post.
        """
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
        if stored.get("authorId") == author_id and stored.get("body") == body:
            return public_post(stored), stored.get("requestId") == item["requestId"]
        if idempotency_key and post_id == post_id_for(author_id, idempotency_key):
            raise IdempotencyKeyReused("this Idempotency-Key was already used for a different post")
        raise AlreadyExists(f"post {post_id!r} already exists", cause_code="ConditionalCheckFailed")

    def get_post(self, post_id: str) -> dict[str, Any]:
        item, _ = self.refcount.read(post_key(post_id))
        if item is None:
            raise NotFound(f"post {post_id!r} not found")
        return public_post(item)

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
        attributes: dict[str, Any] = {"userId": user_id}
        if liked:
            attributes["likedAt"] = at // 1000
        result = self.toggle.set(post_key(post_id), like_key(post_id, user_id), liked, Stamp(at, request_id), attributes=attributes)
        command = Command("like" if liked else "unlike", {"postId": post_id, "userId": user_id, "at": at}, request_id)
        return self._change(result, command)

    @staticmethod
    def _change(result: Result, command: Command) -> LikeChange:
        post_id, liked = command.payload["postId"], command.op == "like"
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return LikeChange(liked=liked, changed=True, result=result)
        if result.outcome is Outcome.REJECTED:
            if result.reason == "parent_missing":
                raise NotFound(f"post {post_id!r} not found")
            if result.reason == "tally_would_go_negative":
                raise IntegrityError(f"post {post_id!r}: like exists but likeTally is 0")
            if result.reason == "stale":  # a newer request decided: the state is the other one
                return LikeChange(liked=not liked, changed=False, result=result)
            return LikeChange(liked=liked, changed=False, result=result)
        # Safe to re-drive: the request's stamp makes a replay idempotent whatever happened in-line.
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
        """One page of likers, oldest key first; ``cursor`` is opaque (from the previous page)."""
        self.get_post(post_id)  # 404 for a missing post rather than an empty list
        pk = post_key(post_id)["PK"]
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": "PK", "#sk": "SK"},
            "ExpressionAttributeValues": to_item({":pk": pk, ":prefix": LIKE_PREFIX}),
            "Limit": limit,
            "ReturnConsumedCapacity": "TOTAL",
        }
        expression, names, values = self.toggle.counted()  # tombstones are stored, not listed
        kwargs["FilterExpression"] = expression
        kwargs["ExpressionAttributeNames"].update(names)
        kwargs["ExpressionAttributeValues"].update(values)
        if cursor:
            kwargs["ExclusiveStartKey"] = to_item(decode_cursor(cursor, pk))
        capacity = Capacity()
        likers: list[dict[str, Any]] = []
        for _ in range(LIKERS_ROUNDS):  # Limit counts before the filter: read on while tombstones shorten the page
            kwargs["Limit"] = limit - len(likers)
            response = read(self.dynamodb.query, self.refcount.retry, capacity, **kwargs)
            for raw in response.get("Items", []):
                item = from_item(raw) or {}
                likers.append({"userId": item["SK"][len(LIKE_PREFIX) :], "likedAt": item.get("likedAt")})
            last = response.get("LastEvaluatedKey")
            if not last or len(likers) >= limit:
                break
            kwargs["ExclusiveStartKey"] = last
        return LikersPage(likers, encode_cursor(from_item(last)) if last else None, capacity)

    def audit(self, post_id: str) -> Audit:
        audit = self.refcount.audit(post_key(post_id), LIKE_PREFIX, where=self.toggle.counted())  # likes, not tombstones
        if audit is None:
            raise NotFound(f"post {post_id!r} not found")
        return audit


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


def public_post(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "postId": item["postId"],
        "authorId": item.get("authorId"),
        "body": item.get("body"),
        "likeTally": int(item.get(TALLY, 0)),
        "createdAt": item.get("createdAt"),
    }


def encode_cursor(key: dict[str, Any] | None) -> str:
    raw = json.dumps(key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, pk: str) -> dict[str, Any]:
    """Decode a cursor, refusing one that was not issued for this post's likers."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("cursor is not valid") from exc
    if (
        not isinstance(key, dict)
        or set(key) != {"PK", "SK"}
        or key.get("PK") != pk
        or not isinstance(key.get("SK"), str)
        or not key["SK"].startswith(LIKE_PREFIX)
    ):
        raise InvalidRequest("cursor is not valid for this post")
    return key
