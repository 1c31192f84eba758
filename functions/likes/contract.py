"""The likes API's contract: its request models (pydantic) and its answers (the service's result
types), the source of docs/openapi.json and of counters.http.schemas. Read by the OpenAPI generator
and the tests; the function itself never imports it (app.py names these types for the type checker only)."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from counters.core.ids import ID_PATTERN
from counters.http.models import Header, IdPath, Query, Read
from counters.services.likes import audit, model

__all__ = [
    "Audit",
    "AuditPosts",
    "Audits",
    "CreatePost",
    "Cursor",
    "IdPath",
    "IdempotencyKey",
    "LikeChanged",
    "LikeState",
    "Likers",
    "Limit",
    "Post",
    "SwitchMode",
    "SwitchedPost",
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


Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=1024)]


class SwitchMode(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    mode: Literal["standard", "hot"]


class AuditPosts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    postIds: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(min_length=1, max_length=25)
    repair: bool = Field(default=False, description="repair a drift found at a settled point (one conditional write per post)")


# The answers: the services' own result types, named (their response models are derived: counters.http.models.answer)
Post = model.PublicPost
SwitchedPost = model.SwitchedPost
LikeState = model.LikeState
LikeChanged = model.LikeChanged
Likers = model.PublicLikers
Audit = audit.PublicAudit
Audits = audit.PublicAudits

READS = {
    "GET /posts/{postId}": Read(
        strong="a standard post: one strongly consistent read of the post, whose likeTally every like updates in its own transaction",
        as_of="a hot post: likeTally is exact as of asOf (the aggregator's least lane watermark, ms) and trails the likes "
        "the table's stream has not delivered yet; lagMs is how long the likes of the aggregator's last write had waited. "
        "On a global table, each Region's tally as replicated to this Region",
    ),
    "GET /posts/{postId}/likes": Read(
        as_of="eventually consistent Queries of the post's like items, in either mode: a like or an unlike acknowledged "
        "within about the last second may not show yet (DynamoDB's eventually consistent read)",
    ),
    "GET /posts/{postId}/likes/{userId}": Read(
        strong="the user's like state item, read strongly consistent, in either mode (the post's layout, where that item "
        "lives, is read once a process: a post not found by an eventually consistent read is read again strongly, so a "
        "post created a moment ago is found)",
    ),
    "GET /posts/{postId}/audit": Read(
        strong="the stored tally and a strongly consistent count of the likes, not at a settled point (a like counted during "
        "the count shows as drift: POST /audits settles first)",
        as_of="a post that is or was hot: its stored tally is as of asOf (reason aggregated, no drift concluded)",
    ),
}
