"""A post grown past 64 lanes: its count kept on META and on lane groups' items, and read as one.

Lanes ``S0``..``S63`` keep their checkpoints and their part of ``likeTally`` on META; lanes
``S<64g>``..``S<64g+63>`` on ``POST#<postId>#G<g>`` / ``AGG`` (the keys and the writer rule:
[`counters.store.post_items`][counters.store.post_items]). The aggregator writes each item on its
own, guarded by its own checkpoints ([`Groups`][counters.store.aggregates.Groups]); a reader sums
them ([`with_groups`][counters.store.lane_groups.with_groups]). Details: [docs/likes.md, "Lane groups"](../likes.md#lane-groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from counters.store.aggregates import Groups
from counters.store.post_items import POST_ID, Part, Post, group_key, groups_of, lane_group, post_of

LANE_GROUPS = Groups(lane_group, group_key, POST_ID)
"""Where the aggregator counts a post's lanes past 64 ([docs/likes.md, "Lane groups"](../likes.md#lane-groups))."""


def with_groups(meta: Post, groups: Mapping[int, Mapping[str, Any]]) -> Post:
    """A post's count over META and its lane groups' items (``groups``: each group's stored item;
    a group not written yet counts nothing): ``tally`` the sum, ``revision`` the sum (each part's
    only grows, so equal sums mean no part moved), ``watermarks`` and ``probes`` the union (a
    lane is counted on one item only), ``lag_ms`` the largest; ``parts`` each item's own tally and
    revision, META first, for a repair."""
    parts = [Part(0, meta.tally, meta.revision)]
    watermarks, probes, lags = dict(meta.watermarks), dict(meta.probes or {}), [meta.lag_ms]
    for group in groups_of(meta.spread):
        item = post_of(groups.get(group) or {})
        parts.append(Part(group, item.tally, item.revision))
        watermarks.update(item.watermarks)
        probes.update(item.probes or {})
        lags.append(item.lag_ms)
    known = [lag for lag in lags if lag is not None]
    return replace(
        meta,
        tally=sum(p.tally for p in parts),
        revision=None if meta.revision is None else sum(p.revision or 0 for p in parts),
        watermarks=watermarks,
        probes=probes if meta.probes is not None else None,
        lag_ms=max(known, default=None),
        parts=tuple(parts),
    )
