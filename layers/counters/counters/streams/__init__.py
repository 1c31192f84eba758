"""The table's stream as Lambda delivers it: records turned into the aggregator's changes, and the
like aggregator's one loop over a batch ([`aggregate`][counters.streams.aggregate]).

Lambda's record shape (``eventName``, ``dynamodb.Keys``/``NewImage``, ``SequenceNumber``,
``ApproximateCreationDateTime``) is known here and nowhere below: [`aggregate`][counters.streams.aggregate]
(run by functions/like_aggregator/app.py and by the proof) parses a batch with [`hot_change`][counters.streams.hot_change]
or [`regional_change`][counters.streams.regional_change], the store
([`counters.store.post_streams.streamed`][counters.store.post_streams.streamed]) reads the item's attributes, and the service and the
primitive see [`Change`][counters.primitives.aggregator.Change] s. In the import rule this module
sits between ``deferral`` and ``services`` (pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import Any

from counters.core.client import DynamoDBClient
from counters.core.commands import Command
from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from counters.core.records import dataclass
from counters.core.regions import RegionSettings
from counters.primitives.aggregator import Aggregator, Applied, Change, padded
from counters.services.likes.merging import Merges
from counters.services.likes.model import likes_policy
from counters.store.aggregates import CheckpointStore
from counters.store.post_streams import Created, created, regional_streamed, streamed
from counters.store.posts import like_checkpoints


def hot_change(record: Mapping[str, Any]) -> Change | None:
    """A stream record (as Lambda delivers it, NEW_IMAGE) as a hot like's change of the tally, or
    an audit's probe; ``None`` for anything else or a write that counted nothing (``delta`` 0, a
    TTL removal)."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return None
    ddb = record.get("dynamodb") or {}
    found = streamed(ddb.get("Keys") or {}, ddb.get("NewImage") or {})
    if found is None or (found.probe is None and not found.delta):
        return None
    created = ddb.get("ApproximateCreationDateTime") or 0
    return Change(
        parent=found.post_id,
        lane=found.lane,
        seq=str(ddb["SequenceNumber"]),
        delta=found.delta,
        created_ms=int(float(created) * 1000),
        probe=found.probe,
    )


def like_created(record: Mapping[str, Any]) -> Created | None:
    """A stream record of a like item's creation under a spread key (``INSERT``, any ``delta``:
    a stale unlike's tombstone counts nothing yet must be examined), for the aggregator's check
    for a user's second item on a grown post ([`counters.services.likes.merging`][counters.services.likes.merging]);
    ``None`` for anything else (a change of an item, a removal, a probe)."""
    if record.get("eventName") != "INSERT":
        return None
    ddb = record.get("dynamodb") or {}
    return created(ddb.get("Keys") or {}, str(ddb.get("SequenceNumber", "")))


def regional_change(record: Mapping[str, Any], region: str) -> Change | None:
    """A record of ``region``'s stream of a global table (NEW_AND_OLD_IMAGES) as what it changes
    ``region``'s own like tally by ([`counters.store.post_streams.regional_streamed`][counters.store.post_streams.regional_streamed]): a version
    written in ``region`` counts its ``delta``; a version written elsewhere (replicated in) or a
    removal counts -1 if it replaced a liked version ``region`` wrote, else nothing. A replicated
    record never counts its own ``delta`` here (its Region counted it). ``None``: nothing to count."""
    if record.get("eventName") not in ("INSERT", "MODIFY", "REMOVE"):
        return None
    ddb = record.get("dynamodb") or {}
    found = regional_streamed(ddb.get("Keys") or {}, ddb.get("NewImage") or {}, ddb.get("OldImage") or {}, region)
    if found is None or not found.delta:
        return None
    created = ddb.get("ApproximateCreationDateTime") or 0
    return Change(
        parent=found.post_id, lane=found.lane, seq=str(ddb["SequenceNumber"]), delta=found.delta, created_ms=int(float(created) * 1000)
    )


class LikeAggregator(Aggregator):
    """The like tally's [`Aggregator`][counters.primitives.aggregator.Aggregator]: ``region`` (a global
    table: the Region whose own tally item it keeps, from its own stream; ``""``: one Region) and,
    on one Region, the [`Merges`][counters.services.likes.merging.Merges] run after its tally write
    (``None`` on a global table, where a spread never grows: ``grow-spread`` in the posts' table)."""

    def __init__(
        self,
        store: CheckpointStore,
        *,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] | None = None,
        merges: Merges | None = None,
        region: str = "",
    ) -> None:
        super().__init__(store, retry=retry, clock=clock)
        self.merges, self.region = merges, region

    @classmethod
    def from_settings(cls, settings: RegionSettings) -> LikeAggregator:
        """The aggregator of the settings' table, keeping the tally the likes service counts on
        ([`likes_policy`][counters.services.likes.model.likes_policy]'s ``writer``: this Region's own on a global table)."""
        return like_aggregator(settings.table_name, retry=settings.retry, region=likes_policy(settings.topology).writer)

    def changes(self, records: Iterable[Mapping[str, Any]]) -> list[Change]:
        """The batch's records as changes of this aggregator's tally (its own Region's on a global table)."""
        found = (regional_change(r, self.region) for r in records) if self.region else map(hot_change, records)
        return [c for c in found if c is not None]


def like_aggregator(
    table_name: str,
    *,
    dynamodb: DynamoDBClient | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], int] | None = None,
    region: str = "",
) -> LikeAggregator:
    """The hot mode's tally keeper: hot like deltas from the stream onto ``likeTally`` on META;
    with ``region`` (a global table), onto that Region's own tally item ([docs/likes.md "Global tables"](../likes.md#global-tables)).
    One Region: it also merges a user's duplicate items on a grown post (``merges``)."""
    merges = None if region else Merges(table_name, dynamodb=dynamodb, retry=retry)
    checkpoints = like_checkpoints(table_name, dynamodb=dynamodb, region=region)
    return LikeAggregator(checkpoints, retry=retry, clock=clock, merges=merges, region=region)


@dataclass
class Aggregated:
    """What [`aggregate`][counters.streams.aggregate] did with one batch: each post's tally write
    (``applied``), the users whose like items were merged, and the record to report (``failure``:
    the lowest sequence number of what did not finish; ``None``: the whole batch is done)."""

    applied: list[Applied] = field(default_factory=list)
    merged: list[Created] = field(default_factory=list)
    failure: str | None = None


def _nowhere(command: Command) -> bool:
    return False


def aggregate(aggregator: LikeAggregator, records: list[Mapping[str, Any]], defer: Callable[[Command], bool] = _nowhere) -> Aggregated:
    """One batch of the table's stream, as the like aggregator takes it (the handler and the proof alike).

    Each post's net change in one conditional write (a post whose write met contention reports its
    first record); then, on one Region, every creation of a like item is examined for a user's
    second item on a grown post, after the tally write. An examination that met contention is
    deferred (``defer``: it queues the command and says whether the queue took it; else its
    first record is reported), and a grown post not settled yet gets its sweep queued once per
    process. Lambda restarts the shard from the lowest record reported; what was applied after it
    is skipped by the checkpoints."""
    done = Aggregated(aggregator.apply(aggregator.changes(records)))
    failed = [min((c.seq for c in a.changes), key=padded) for a in done.applied if a.result.outcome is Outcome.CONTENTION]
    merges = aggregator.merges
    if merges is not None:
        contended: dict[str, list[Created]] = {}
        for examined in merges.examine(c for c in map(like_created, records) if c is not None):
            if examined.outcome is Outcome.CONTENTION:
                contended.setdefault(examined.created.post_id, []).append(examined.created)
            elif examined.outcome is Outcome.APPLIED:
                done.merged.append(examined.created)
        for post_id, users in contended.items():  # deferred to the retry queue, or else the batch is redelivered
            if not defer(merges.deferred(post_id, (c.user_id for c in users))):
                failed.append(min((c.seq for c in users), key=padded))
        for sweep in merges.sweeps():  # a grown post not settled: the retry worker sweeps it
            if defer(sweep):  # else the next batch of the post asks again
                merges.sent(sweep)
    done.failure = min(failed, key=padded) if failed else None
    return done
