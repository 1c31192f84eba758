"""docs/choosing.md's table: every approach, its guarantee, its Regions and its cost in dollars.

What the code declares is read from the code: whether a reservation approach is exact and needs a
token (its class, [`REGISTRY`][counters.primitives.approaches.REGISTRY]), and where it is refused
(the refused cells of the family tables, [`counters.store.tables`][counters.store.tables]). The capacity figures are the project's
own measured or modelled ones; each names the page it comes from and a fragment of that page's
table which must still be there (``--check`` fails when the page no longer says it), so a figure
cannot drift from its source unseen. Dollars are computed from the figures and the on-demand
prices below.

``python scripts/choosing_table.py`` rewrites the table between the ``choosing`` markers;
``--check`` exits 1 when the doc differs or a source no longer says its figure
(tests/tooling/test_choosing_table.py runs the same check).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from counters.core.regions import GlobalTableMode  # noqa: E402
from counters.primitives.approaches import REGISTRY  # noqa: E402
from counters.store.tables import operation  # noqa: E402
from scripts.generated_block import Block  # noqa: E402

DOCS = ROOT / "docs"

# Amazon DynamoDB on-demand throughput, US East (N. Virginia), Standard table class, since the
# price cut of 1 November 2024 (https://aws.amazon.com/dynamodb/pricing/on-demand/, read 2026-12-01).
WRITE_PER_MILLION = 0.625  # USD per million write request units
READ_PER_MILLION = 0.125  # USD per million read request units


@dataclass(frozen=True)
class Source:
    """Where a row's figures come from: a page of docs/ and a fragment of it that states them."""

    page: str
    says: str

    def holds(self) -> bool:
        return self.says in (DOCS / self.page).read_text()


@dataclass(frozen=True)
class Row:
    name: str
    guarantee: str
    thresholds: str
    wcu: float
    rcu: float
    cost_note: str
    pick: str
    source: Source
    refused_by: str | None = None
    """The table operation that refuses it in some modes, if any."""
    approach: str | None = None
    """Its name in the approaches' REGISTRY (a reservation strategy), if it is one."""


RESERVATIONS = "reservations.md"
ROWS = (
    Row(
        "`atomic`",
        "**not exact**: an unknown outcome is either not re-sent (`under`: at most once) or re-sent (`over`: at least once); a redelivery applies again",
        "yes",
        1,
        0,
        "",
        "the cheapest; approximate counts (views, rate hints) where a few lost or doubled units are acceptable",
        Source(RESERVATIONS, "| 1 (measured) | 0 |"),
        approach="atomic",
    ),
    Row(
        "`occ`",
        "**not exact**: its own write recognised on a re-read; a third writer's tag leaves it `ambiguous`; a redelivery applies again",
        "yes",
        1,
        1.1,
        "",
        "rarely: it costs a read more than `atomic` and is still not exact",
        Source(RESERVATIONS, "| 1 (measured) | 1.1 (measured) |"),
        approach="occ",
    ),
    Row(
        "`occ_history`",
        "exact while a duplicate is among the item's last N writes (default 32)",
        "yes",
        1,
        1.3,
        "item ≈ 1 KB",
        "exact single-item counters with modest write rates and no transactions (works on MRSC)",
        Source(RESERVATIONS, "| 1 (measured, item ≈ 1 KB) | 1.3 (measured) |"),
        approach="occ_history",
    ),
    Row(
        "`crt`",
        "exact within DynamoDB's 10-minute ClientRequestToken window; after it the service answers from its record",
        "yes",
        2,
        0,
        "transactional",
        "**the default choice for reservations**: exact, simple, shardable",
        Source(RESERVATIONS, "| 2 (model: 1 item × 2) | 0 |"),
        approach="crt",
    ),
    Row(
        "`marker`",
        "exact for as long as the marker lives (30 days after a release)",
        "yes",
        4,
        0,
        "transactional, 2 items",
        "re-sends may arrive after 10 minutes (queues, offline clients)",
        Source(RESERVATIONS, "| 4 (model: 2 items × 2) | 0 |"),
        approach="marker",
    ),
    Row(
        "`set`",
        "exact while the token is in the item's set (at most 250 live tokens, then `rejected` `set_full`)",
        "yes",
        1.4,
        0,
        "average; 1 → 9 as the set grows",
        "small capacities (seats, invitations) with few holders at a time",
        Source(RESERVATIONS, "| 1.4 avg (measured; 1 → 9 as the set grows to 250) | 0 |"),
        approach="set",
    ),
    Row(
        "sharding (`crt`, 4 shards)",
        "as its approach (`atomic`, `crt` or `marker`)",
        "yes, on every shard",
        2,
        0,
        "per shard touched; a split adds 2 RCU per shard",
        "one counter takes more than one partition's 1,000 WCU/s",
        Source(RESERVATIONS, "| 2 per shard touched | (+2 per shard for a split's snapshot) |"),
        refused_by="take:sharded",
    ),
    Row(
        "ledger (append; balance)",
        "exact: the entry's key (a ULID or UUIDv7) makes a re-send a duplicate, within the retry window (600 s)",
        "no (a balance, not a capacity)",
        1,
        1,
        "the RCU is a balance read after compaction",
        "money-like balances with a history; many writers on one balance",
        Source("ledgers.md", "| balance read after compaction, any history length | **1.0 RCU** (one Query returning the checkpoint) |"),
    ),
    Row(
        "standard like",
        "exact: the latest request of a user on a post wins; a re-send changes nothing",
        "n/a (one like per user)",
        4,
        0,
        "one transaction of 2 items",
        "**the default for likes**: the tally is exact at once",
        Source("likes.md", "`ADD likeTally` on `META`): 4 WCU, as in seed 01."),
        refused_by="like:standard",
    ),
    Row(
        "hot like",
        "exact: counted once by the stream aggregator; the tally lags by about a second",
        "n/a (one like per user)",
        1.044,
        0,
        "the like + the aggregator's share",
        "a post beyond about 500 likes a second (one partition's limit for transactions); needs the stream aggregator running",
        Source("bench-results.md", "at most 1.044 over the spreads"),
    ),
    Row(
        "fast ids (`fast`)",
        "exact per key: a re-sent order gets its first id; ids may have gaps",
        "n/a",
        5,
        1,
        "an ADD + a transaction of 2 items",
        "**the default for order ids**: unique, increasing, fast",
        Source("orders.md", "| 1 (key record read) | 1 (ADD) + 4 (order + key record, transactional) = **5** |"),
    ),
    Row(
        "gapless ids (`gapless`)",
        "exact per key, and no gaps",
        "n/a",
        6,
        2,
        "one transaction of 3 items",
        "invoice numbers: holes are unacceptable; one writer at a time",
        Source("orders.md", "| 2 (key record + counter reads) | 6 (counter + order + key record, transactional) = **6** |"),
        refused_by="take:gapless",
    ),
)

MODES = {GlobalTableMode.NONE: "one Region", GlobalTableMode.MREC: "MREC", GlobalTableMode.MRSC: "MRSC"}


def regions(row: Row) -> str:
    """Where it runs: every mode but those its table operation (or its approach's) refuses."""
    key = REGISTRY[row.approach].refusal if row.approach else row.refused_by
    refused = set(operation(key).refusing()) if key else set()
    return ", ".join(label for mode, label in MODES.items() if mode not in refused)


def figure(value: float) -> str:
    return f"{value:g}"


def dollars(row: Row) -> str:
    return f"${row.wcu * WRITE_PER_MILLION + row.rcu * READ_PER_MILLION:.3f}"


def guarantee(row: Row) -> str:
    if row.approach is None:
        return row.guarantee
    cls = REGISTRY[row.approach].cls
    token = "needs a key" if cls.needs_token else "no key needed"
    return f"{row.guarantee}; {token}"


def broken_sources() -> list[str]:
    """The rows whose source page no longer says their figures."""
    return [f"{row.name}: docs/{row.source.page} no longer says {row.source.says!r}" for row in ROWS if not row.source.holds()]


def table() -> str:
    lines = [
        "| approach | guarantee under retries | thresholds | Regions | WCU / RCU per operation | $ per million operations | pick it when | figures from |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        units = f"{figure(row.wcu)} / {figure(row.rcu)}" + (f" ({row.cost_note})" if row.cost_note else "")
        page = row.source.page
        lines.append(
            f"| {row.name} | {guarantee(row)} | {row.thresholds} | {regions(row)} | {units} | {dollars(row)} | {row.pick} | [{page.removesuffix('.md')}]({page}) |"
        )
    return "\n".join(lines)


DOC = DOCS / "choosing.md"
BLOCK = Block(
    DOC,
    "<!-- choosing: generated from counters' REGISTRY and family tables and the cited figures by scripts/choosing_table.py -->",
    "<!-- /choosing -->",
    table,
    "docs/choosing.md's table differs from what the code and the cited pages say: run python scripts/choosing_table.py",
)
rendered = BLOCK.rendered

if __name__ == "__main__":
    stale = broken_sources()
    for line in stale:
        print(line)
    raise SystemExit(1 if stale else BLOCK.main(sys.argv[1:]))
