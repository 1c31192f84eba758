"""Hot posts' like tallies: the table's stream, aggregated per post, applied exactly once.

A hot post's like or unlike writes only the like's state item (under one of the post's spread
partition keys), recording ``delta``: +1, -1, or 0 for a write that counted nothing. This function
gets those records (the template's filter: ``LIKE#`` items whose ``delta`` is not 0, and every
``LIKE#`` creation) and applies
each batch's net change per post in **one conditional UpdateItem on the post's META** that also
moves the post's checkpoint for each spread key it covers
(:mod:`counters.primitives.aggregator`; the records are read by :mod:`counters.streams`): a redelivered, retried, bisected or half-processed batch
adds only what was not applied yet, never twice.

Then, on one Region, every creation of a like item in the batch (``INSERT``, any ``delta``) is
examined for a user's second item on a post whose spread grew, which a writer with a stale view of
the spread can create; a pair is merged into one item in one transaction
([`counters.services.likes.merging`][counters.services.likes.merging]). A merge that meets contention reports its record.

Partial failures: a post whose write met contention is reported by its first record's sequence
number in ``batchItemFailures``; Lambda restarts the shard from the lowest one, and the posts
already applied from that point on are skipped by their checkpoints. The handler checks every
record again, so an unfiltered stream (the local stack, a misconfiguration) is safe.

On a global table (``GLOBAL_TABLE_MODE`` mrec/mrsc) each Region's function keeps only its own
Region's tally item (``TALLY#<Region>``, docs/likes.md "Global tables"): a record written in its
Region counts its ``delta``; a record replicated in never counts its own ``delta`` (its Region
did) and takes -1 off when it replaced a liked version this Region wrote. It needs the stream's
old images (NEW_AND_OLD_IMAGES) and runs for standard posts too.
"""

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from counters.core.commands import Command
from counters.core.errors import ContentionError
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.deferral.settings import DeferralSettings
from counters.primitives.aggregator import Change, padded
from counters.runtime.function import Function
from counters.runtime.metrics import record as record_metrics
from counters.services.likes import LikeAggregator, like_aggregator
from counters.store.post_streams import Created
from counters.streams import hot_change, like_created, regional_change


@dataclass(frozen=True, kw_only=True)
class Settings(RegionSettings, DeferralSettings):
    """This function's environment: the table, on a global table this Region and its peers, and the
    retry queue an unfinished examination is deferred to."""


def aggregator(settings: Settings) -> LikeAggregator:
    topology = settings.topology
    return like_aggregator(settings.table_name, retry=settings.retry, region=topology.writer)


function = Function(Settings, aggregator)
metrics, logger = function.metrics, function.logger


@function.handler()
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    region = function.settings.topology.writer
    records = event.get("Records", [])
    found = (regional_change(r, region) for r in records) if region else (hot_change(r) for r in records)
    changes: list[Change] = [c for c in found if c is not None]
    failed: list[str] = []
    for applied in function.service.apply(changes):
        record_metrics(metrics, "AggregateLikes", applied.result)
        if applied.result.outcome is Outcome.CONTENTION:
            failed.append(min((c.seq for c in applied.changes), key=padded))
        elif applied.result.outcome is Outcome.REJECTED:
            logger.warning("hot likes of a post without its META", extra={"postId": applied.parent, "reason": applied.result.reason})
    merges = function.service.merges  # after the tally write: a user's second item on a grown post (one Region)
    contended: dict[str, list[Created]] = {}
    for examined in merges.examine(c for c in map(like_created, records) if c is not None) if merges else ():
        if examined.outcome is Outcome.CONTENTION:
            contended.setdefault(examined.created.post_id, []).append(examined.created)
        elif examined.outcome is Outcome.APPLIED:
            logger.info("merged a user's like items", extra={"postId": examined.created.post_id, "userId": examined.created.user_id})
    for post_id, created in contended.items():  # deferred to the retry queue, or else the batch is redelivered
        if not (merges and defer(merges.deferred(post_id, (c.user_id for c in created)))):
            failed.append(min((c.seq for c in created), key=padded))
    for sweep in merges.sweeps() if merges else ():  # a grown post not settled: the retry worker sweeps it
        if merges and defer(sweep):  # else the next batch of the post asks again
            merges.sent(sweep)
    if failed:  # the shard restarts from the lowest; what was applied after it is checkpointed
        return {"batchItemFailures": [{"itemIdentifier": min(failed, key=padded)}]}
    return {"batchItemFailures": []}


def defer(command: Command) -> bool:
    """Queue an examination the aggregator could not finish (contention: the post's first lanes are
    busy) for the retry worker, so the batch is acknowledged rather than failed again and again
    until the event source drops it; ``False`` (no queue, or it did not take the message): the
    caller reports the batch instead. The queue's code loads on the first deferral only."""
    url = function.settings.retry_queue_url
    if not url:
        return False
    from counters.core.client import sqs_client
    from counters.deferral.queue import send

    try:
        send(sqs_client(), function.settings.retry, QueueUrl=url, MessageBody=command.to_message())
    except ContentionError:
        return False
    metrics.add_metric(name="ExaminationsDeferred", unit=MetricUnit.Count, value=1)
    logger.info("deferred an examination to the retry queue", extra={"operationId": command.operation_id, "op": command.op})
    return True
