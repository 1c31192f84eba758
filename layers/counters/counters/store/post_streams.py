"""The likes' stream records read as what they change (the aggregator's input): a spread key's like or
probe ([`streamed`][counters.store.post_streams.streamed]), a Region's own versions on a global table
([`regional_streamed`][counters.store.post_streams.regional_streamed]), a like item's creation
([`created`][counters.store.post_streams.created]); the keys and attributes are [`counters.store.post_items`][counters.store.post_items]'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from counters.core.ids import valid_id
from counters.store.post_items import DELTA, LIKE_PREFIX, LIKED, PK, PROBE_LEGACY, PROBE_SEQ, PROBE_SK, SK, WRITER, parse_hot_pk


class Streamed(NamedTuple):
    """What a stream record of a spread key says for the aggregator: a like's ``delta`` (0: it
    counted nothing), or an audit probe's token (``delta`` 0)."""

    post_id: str
    lane: str  # ``S<n>``
    delta: int
    probe: str | None = None


def _liked_by(image: Mapping[str, Any], region: str) -> bool:
    """Whether a stream image (DynamoDB JSON) is a liked version written by ``region``."""
    return bool(image) and (image.get(WRITER) or {}).get("S") == region and (image.get(LIKED) or {}).get("BOOL", True) is True


class Created(NamedTuple):
    """A stream record of a like item's creation under a spread key (an ``INSERT``, whatever its
    ``delta``): what the aggregator examines for a user's second item on a grown post."""

    post_id: str
    lane: str  # ``S<n>``
    user_id: str
    seq: str


def created(keys: Mapping[str, Any], seq: str) -> Created | None:
    """An ``INSERT`` record's ``Keys`` (DynamoDB JSON) as a [`Created`][counters.store.post_streams.Created];
    ``None`` when it is not a like under a spread key (a probe, seed 01's layout, another item)."""
    parsed = parse_hot_pk(str((keys.get(PK) or {}).get("S", "")))
    sk = str((keys.get(SK) or {}).get("S", ""))
    if parsed is None or not sk.startswith(LIKE_PREFIX) or not valid_id(sk[len(LIKE_PREFIX) :]):
        return None
    return Created(parsed[0], parsed[1], sk[len(LIKE_PREFIX) :], seq)


def regional_streamed(keys: Mapping[str, Any], new: Mapping[str, Any], old: Mapping[str, Any], region: str) -> Streamed | None:
    """A stream record of ``region``'s replica of a global table (``Keys``, ``NewImage``,
    ``OldImage``; DynamoDB JSON) as what it changes ``region``'s tally by ([docs/likes.md](../likes.md) "Global
    tables"): a version written in ``region`` counts its own ``delta`` (0 in standard mode: its
    transaction counted it); any other record (a version written elsewhere and replicated in, or
    a removal) takes off ``region``'s liked version it replaced: -1, else 0. ``None`` for a record
    that is not a spread key's like (probes are not used across Regions)."""
    parsed = parse_hot_pk(str((keys.get(PK) or {}).get("S", "")))
    if parsed is None or not str((keys.get(SK) or {}).get("S", "")).startswith(LIKE_PREFIX):
        return None
    post_id, lane = parsed
    if new and (new.get(WRITER) or {}).get("S") == region:
        return Streamed(post_id, lane, int((new.get(DELTA) or {}).get("N", "0")))
    return Streamed(post_id, lane, -1 if _liked_by(old, region) else 0)


def streamed(keys: Mapping[str, Any], image: Mapping[str, Any]) -> Streamed | None:
    """A stream record's ``Keys`` and ``NewImage`` (DynamoDB JSON) as a [`Streamed`][counters.store.post_streams.Streamed];
    ``None`` for a record that is not a spread key's like (with ``delta``) or probe."""
    parsed = parse_hot_pk(str((keys.get(PK) or {}).get("S", "")))
    if parsed is None:
        return None
    post_id, lane = parsed
    sk = str((keys.get(SK) or {}).get("S", ""))
    if sk == PROBE_SK and PROBE_SEQ in image:  # an audit's probe: its number in the lane's probe order
        return Streamed(post_id, lane, 0, str(int(image[PROBE_SEQ]["N"])))
    if sk == PROBE_SK and PROBE_LEGACY in image:  # a probe written before probeSeq (a token no audit waits for now)
        return Streamed(post_id, lane, 0, str(image[PROBE_LEGACY]["S"]))
    if not sk.startswith(LIKE_PREFIX) or DELTA not in image:
        return None
    return Streamed(post_id, lane, int(image[DELTA]["N"]))
