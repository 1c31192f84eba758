"""The table's stream as Lambda delivers it: records turned into the aggregator's changes.

Lambda's record shape (``eventName``, ``dynamodb.Keys``/``NewImage``, ``SequenceNumber``,
``ApproximateCreationDateTime``) is known here and nowhere below: the like aggregator
(functions/like_aggregator/app.py) parses its batch with [`hot_change`][counters.streams.hot_change], the store
([`counters.store.post_streams.streamed`][counters.store.post_streams.streamed]) reads the item's attributes, and the service and the
primitive see [`Change`][counters.primitives.aggregator.Change] s. In the import rule this module
sits between ``deferral`` and ``services`` (pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counters.primitives.aggregator import Change
from counters.store.post_streams import Created, created, regional_streamed, streamed

__all__ = ["hot_change", "like_created", "regional_change"]


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
