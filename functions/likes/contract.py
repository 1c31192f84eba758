"""The likes API's contract: its request and response models (pydantic), the source of
docs/openapi.json and of counters.http.schemas. Read by the OpenAPI generator and the tests;
the function itself never imports it (app.py names these types for the type checker only)."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from counters.core.ids import ID_PATTERN
from counters.http.models import Body, Header, IdPath, Query

__all__ = [
    "Audit",
    "AuditPosts",
    "Audits",
    "CreatePost",
    "Cursor",
    "IdPath",
    "IdempotencyKey",
    "LikeState",
    "Liker",
    "Likers",
    "Limit",
    "OwnLike",
    "Post",
    "SettledAudit",
    "SwitchMode",
    "Switched",
]


class CreatePost(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    postId: str | None = Field(
        default=None,
        pattern=ID_PATTERN,
        description="your own id, making re-sends safe; never a version-5 UUID in hex (the form of the ids Idempotency-Key derives)",
    )
    authorId: str = Field(pattern=ID_PATTERN)
    body: str = Field(min_length=1, max_length=4000)
    mode: Literal["standard", "hot"] | None = Field(
        default=None,
        description="hot: likes are single writes spread over several keys and the tally is kept from the table's stream "
        "(exact as of asOf); standard: each like counts in its own transaction. Default: standard, or hot on an MRSC "
        "global table (standard is refused there: it needs a transaction)",
    )


class Post(Body):
    postId: str
    authorId: str | None
    body: str | None
    likeTally: int
    createdAt: int | None
    mode: str = "standard"
    modeEpoch: int = Field(default=0, description="how many times the post switched modes")
    asOf: int | None = Field(
        default=None,
        description="hot posts: likeTally is exact as of this time (ms), null before the first aggregation; never before "
        "createdAt (the stream's creation times are rounded down: to the second on AWS, to the minute on DynamoDB Local)",
    )
    lagMs: int | None = Field(
        default=None,
        description="hot posts: how long the oldest like of the aggregator's last write to this post had waited (ms); "
        "it does not grow while the post is idle; null before the first aggregation; never more than the post's age "
        "(the stream's rounded creation times make it read high by up to 1 s on AWS, 60 s on DynamoDB Local)",
    )


class LikeState(Body):
    postId: str
    userId: str
    liked: bool
    changed: bool


class Liker(Body):
    userId: str


class Likers(Body):
    postId: str
    likers: list[Liker]
    cursor: str | None


class Audit(Body):
    postId: str
    stored: int
    counted: int
    drift: int | None = Field(description="stored - counted; null for a post that is or was hot (its tally trails its likes)")
    reason: str | None = Field(description="aggregated: the post is or was hot, no drift is concluded (POST /audits compares it)")


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=ID_PATTERN,
        description="Optional: makes a re-send the same post (the id is derived from the author and the key; 200); "
        "the key with another post 422. Without it, send your own postId to make re-sends safe. A post is one "
        "conditional write, so no request is ever seen in flight. Expiry: never (posts are kept) "
        "(docs/retries.md#idempotency-keys)",
    ),
]


class OwnLike(Body):
    postId: str
    userId: str
    liked: bool


Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=1024)]


class SwitchMode(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    mode: Literal["standard", "hot"]


class Switched(Post):
    switched: bool = Field(description="false: the post already was in this mode (a re-send finds its own switch done)")


class AuditPosts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    postIds: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(min_length=1, max_length=25)
    repair: bool = Field(default=False, description="repair a drift found at a settled point (one conditional write per post)")


class SettledAudit(Body):
    postId: str
    stored: int | None = Field(description="the tally at the settled point")
    counted: int | None = Field(description="the likes at that point")
    drift: int | None = Field(description="stored - counted; null when not settled")
    settled: bool
    repaired: bool
    reason: str | None = Field(
        description="why not settled or not repaired: moving, aggregator_behind, not_found, busy, "
        "deadline (the audit ran out of time before it reached or finished this post: audit it again)"
    )


class Audits(Body):
    audits: list[SettledAudit]
