"""Posts and likes: the reference-count primitive applied to seed 01's item shapes.

| item | PK | SK |
|---|---|---|
| post | ``POST#<postId>`` | ``META`` (``likeTally`` is the reference count) |
| like | ``POST#<postId>`` | ``LIKE#USER#<userId>`` |
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from counters.commands import Command, Executor, PoisonMessage
from counters.dynamo import RetryPolicy, client, from_item, read, to_item
from counters.errors import AlreadyExists, ContentionError, IntegrityError, InvalidRequest, NotFound
from counters.ids import valid_id
from counters.outcome import Capacity, Outcome, Result
from counters.refcount import Audit, RefCount

TALLY = "likeTally"
LIKE_PREFIX = "LIKE#USER#"


def post_key(post_id: str) -> dict[str, str]:
    return {"PK": f"POST#{post_id}", "SK": "META"}


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

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    def create_post(self, *, author_id: str, body: str, post_id: str | None = None) -> dict[str, Any]:
        """Create a post with ``likeTally = 0``; raises :class:`AlreadyExists` for a taken id."""
        post_id = post_id or uuid.uuid4().hex
        item = {
            **post_key(post_id),
            "postId": post_id,
            "authorId": author_id,
            "body": body,
            TALLY: 0,
            "createdAt": int(time.time()),
        }
        try:
            self.dynamodb.put_item(
                TableName=self.table_name,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(#pk)",  # never overwrite a post (and its tally)
                ExpressionAttributeNames={"#pk": "PK"},
                ReturnConsumedCapacity="TOTAL",
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException as exc:
            raise AlreadyExists(f"post {post_id!r} already exists", cause_code="ConditionalCheckFailed") from exc
        return public_post(item)

    def get_post(self, post_id: str) -> dict[str, Any]:
        item, _ = self.refcount.read(post_key(post_id))
        if item is None:
            raise NotFound(f"post {post_id!r} not found")
        return public_post(item)

    def like(self, post_id: str, user_id: str) -> LikeChange:
        child = {**like_key(post_id, user_id), "userId": user_id, "likedAt": int(time.time())}
        result = self.refcount.link(post_key(post_id), child)
        return self._change(result, post_id, user_id, liked=True)

    def unlike(self, post_id: str, user_id: str) -> LikeChange:
        result = self.refcount.unlink(post_key(post_id), like_key(post_id, user_id))
        return self._change(result, post_id, user_id, liked=False)

    @staticmethod
    def _change(result: Result, post_id: str, user_id: str, *, liked: bool) -> LikeChange:
        if result.outcome in (Outcome.APPLIED, Outcome.DUPLICATE):
            return LikeChange(liked=liked, changed=True, result=result)
        if result.outcome is Outcome.REJECTED:
            if result.reason == "parent_missing":
                raise NotFound(f"post {post_id!r} not found")
            if result.reason == "tally_would_go_negative":
                raise IntegrityError(f"post {post_id!r}: like exists but likeTally is 0")
            return LikeChange(liked=liked, changed=False, result=result)
        # Safe to re-drive: the LIKE# key makes a replay idempotent whatever happened in-line.
        replay = ("like" if liked else "unlike", {"postId": post_id, "userId": user_id}, None)
        raise ContentionError(f"post {post_id!r} is busy after {result.attempts} attempts; retry the request", replay=replay)

    def executors(self) -> dict[str, Executor]:
        """Replays of deferred like/unlike commands for the retry worker."""
        return {"like": lambda c: self._replay(c, liked=True), "unlike": lambda c: self._replay(c, liked=False)}

    def _replay(self, command: Command, *, liked: bool) -> tuple[str, dict[str, Any]]:
        post_id, user_id = command.payload.get("postId"), command.payload.get("userId")
        if not (valid_id(post_id) and valid_id(user_id)):
            raise PoisonMessage(f"{command.op}: invalid postId/userId")
        try:
            change = self.like(post_id, user_id) if liked else self.unlike(post_id, user_id)
        except (NotFound, IntegrityError) as exc:
            return "REJECTED", {"error": exc.code, "message": exc.message}
        body = {"postId": post_id, "userId": user_id, "liked": liked, "changed": change.changed}
        return ("APPLIED" if change.changed else "DUPLICATE"), body

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
        if cursor:
            kwargs["ExclusiveStartKey"] = to_item(decode_cursor(cursor, pk))
        capacity = Capacity()
        response = read(self.dynamodb.query, self.refcount.retry, capacity, **kwargs)
        likers = []
        for raw in response.get("Items", []):
            item = from_item(raw) or {}
            likers.append({"userId": item["SK"][len(LIKE_PREFIX) :], "likedAt": item.get("likedAt")})
        last = response.get("LastEvaluatedKey")
        return LikersPage(likers, encode_cursor(from_item(last)) if last else None, capacity)

    def audit(self, post_id: str) -> Audit:
        audit = self.refcount.audit(post_key(post_id), LIKE_PREFIX)
        if audit is None:
            raise NotFound(f"post {post_id!r} not found")
        return audit


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
