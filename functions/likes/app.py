"""Likes API: posts with an exact likeTally (seed 01). Parse, call the layer, shape.

The routes' types are the contract's (contract.py, pydantic): named here for the type checker and
the OpenAPI generator only; at run time the resolver validates each request against the schemas
generated from them (counters.http.validation) and a body arrives as their fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import MetricUnit

from counters.core.records import dataclass
from counters.http.function import ApiFunction, ApiSettings, retry_queue
from counters.http.powertools import Response
from counters.http.resolver import json_response
from counters.runtime.metrics import record
from counters.services.likes import Likes
from counters.services.likes.model import AUDIT_MARGIN_S, LikeSettings

if TYPE_CHECKING:
    from .contract import (
        Audit,
        AuditPosts,
        Audits,
        CreatePost,
        Cursor,
        IdempotencyKey,
        IdPath,
        LikeChanged,
        Likers,
        LikeState,
        Limit,
        Post,
        SwitchedPost,
        SwitchMode,
    )


@dataclass(frozen=True, kw_only=True)
class Settings(ApiSettings, LikeSettings):
    """This function's environment."""


function = ApiFunction(Settings, Likes.from_settings, deferrer=retry_queue)
app, logger, metrics = function.app, function.logger, function.metrics


@app.post("/posts")
def create_post(post: CreatePost, idempotency_key: IdempotencyKey = None) -> Response[Post]:
    app.caller.require_self(post.authorId, "create a post")
    created, new = function.service.posts.create_post(
        author_id=post.authorId, body=post.body, post_id=post.postId, idempotency_key=idempotency_key, mode=post.mode
    )
    metrics.add_metric(name="CreatePost.applied" if new else "CreatePost.duplicate", unit=MetricUnit.Count, value=1)
    return json_response(201 if new else 200, created, headers={"Location": f"/posts/{created['postId']}"})


@app.get("/posts/<postId>")
def get_post(postId: IdPath) -> Response[Post]:
    return json_response(200, function.service.posts.get_post(postId))


@app.put("/posts/<postId>/likes/<userId>")
def like(postId: IdPath, userId: IdPath) -> Response[LikeChanged]:
    return toggled(postId, userId, liked=True)


@app.delete("/posts/<postId>/likes/<userId>")
def unlike(postId: IdPath, userId: IdPath) -> Response[LikeChanged]:
    return toggled(postId, userId, liked=False)


def toggled(post_id: str, user_id: str, *, liked: bool) -> Response[LikeChanged]:
    """A like or an unlike by the caller, its metric and, when its retries made the post hot, that too."""
    app.caller.require_self(user_id, "like" if liked else "unlike")
    toggling = function.service.toggling
    change = (toggling.like if liked else toggling.unlike)(post_id, user_id, at=app.request_time)
    record(metrics, "Like" if liked else "Unlike", change.result)
    if change.promoted:
        metrics.add_metric(name="PostPromoted", unit=MetricUnit.Count, value=1)
        logger.info("post promoted to hot: its likes kept retrying", extra={"postId": post_id})
    answer: LikeChanged = {"postId": post_id, "userId": user_id, "liked": change.liked, "changed": change.changed}
    return json_response(200, answer)


@app.get("/posts/<postId>/likes/<userId>")
def own_like(postId: IdPath, userId: IdPath) -> Response[LikeState]:
    """The caller's own like, read from its state item: exact at once, in either mode."""
    app.caller.require_self(userId, "read the like state of")
    return json_response(200, function.service.posts.like_state(postId, userId))


@app.get("/posts/<postId>/likes")
def likers(
    postId: IdPath,
    limit: Limit = 25,
    cursor: Cursor = None,
) -> Response[Likers]:
    page = function.service.posts.likers(postId, limit=limit, cursor=cursor)
    answer: Likers = {"postId": postId, "likers": list(page.user_ids), "cursor": page.cursor}
    return json_response(200, answer)


@app.put("/posts/<postId>/mode")
def switch_mode(postId: IdPath, body: SwitchMode) -> Response[SwitchedPost]:
    """Switch a post between modes while likes flow: no like moves, each is counted once."""
    app.caller.require_admin("switching a post's mode")
    post, switched = function.service.posts.switch_mode(postId, body.mode)
    if switched:
        logger.info("post mode switched", extra={"postId": postId, "mode": post["mode"], "modeEpoch": post["modeEpoch"]})
    answer: SwitchedPost = {**post, "switched": switched}
    return json_response(200, answer)


@app.post("/audits")
def audit_posts(body: AuditPosts) -> Response[Audits]:
    """Audit posts at a settled point each (hot posts: at the aggregator's probe), and repair
    surgically: a conditional write that a like counted since the count refuses."""
    app.caller.require_admin("auditing tallies")  # it reads every like of every post
    budget_s = app.lambda_context.get_remaining_time_in_millis() / 1000 - AUDIT_MARGIN_S  # answer before the timeout
    results = function.service.audits.audit_posts(list(dict.fromkeys(body.postIds)), repair=body.repair, budget_s=budget_s)
    drift = sum(abs(r.drift or 0) for r in results)
    metrics.add_metric(name="AuditDrift", unit=MetricUnit.Count, value=drift)
    metrics.add_metric(name="AuditRepaired", unit=MetricUnit.Count, value=sum(r.repaired for r in results))
    for r in results:
        if r.drift:
            logger.warning("likeTally drift", extra={"postId": r.post_id, "drift": r.drift, "repaired": r.repaired})
    answer: Audits = {"audits": [r.public() for r in results]}
    return json_response(200, answer)


@app.get("/posts/<postId>/audit")
def audit(postId: IdPath) -> Response[Audit]:
    app.caller.require_admin("auditing a tally")  # it reads every like of the post
    result = function.service.audits.audit(postId)
    if result.drift is not None:  # a hot post's lag is not drift: no false alarm on the dashboard
        metrics.add_metric(name="AuditDrift", unit=MetricUnit.Count, value=abs(result.drift))  # the dashboard's drift widget
    if result.drift:
        logger.warning("likeTally drift", extra={"postId": postId, "drift": result.drift})
    return json_response(200, result.public())


lambda_handler = function.lambda_handler
