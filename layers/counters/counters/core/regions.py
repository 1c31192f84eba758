"""Where a function runs and how its table is replicated: the global table's topology.

DynamoDB global tables come in two modes ([docs/regions.md](../regions.md); AWS: "Global tables - multi-Region
replication for DynamoDB", V2globaltables_HowItWorks, and "Global table design", bp-global-table-design):

* **MREC** (multi-Region eventual consistency): every replica takes writes; replication is
  asynchronous, per item, with no delay bound, and concurrent versions of one item are resolved
  last-writer-wins on the whole item. Conditions see the local replica only.
* **MRSC** (multi-Region strong consistency): exactly three Regions; strongly consistent reads and
  conditional writes see the latest version everywhere; no transaction APIs, no TTL, and a write to an
  item being written in another Region fails with ``ReplicatedWriteConflictException`` (retryable).

The layer designs by one rule in MREC: **an item updated in place has one writing Region** (a per-Region
item summed on read, or an item only its home Region writes); items written once per request may be
written anywhere if their own rule survives last-writer-wins. [`Topology`][counters.core.regions.Topology] tells a primitive which
Region it writes in and which Regions exist; a feature resolves it once into a
[`RegionPolicy`][counters.core.policy.RegionPolicy], whose one refusal table turns "this approach is not exact in this
mode" into one clear error ([`UnsupportedInMode`][counters.core.errors.UnsupportedInMode]) at the first call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from enum import StrEnum

from counters.core.records import dataclass
from counters.core.settings import Settings, SettingsError, env

REGION_ATTRIBUTE = "writerRegion"
"""The attribute an item written in place by one Region carries: the Region that wrote this version.

Stream consumers use it to tell a local write from one replicated into their Region (on AWS both
appear in a Region's stream, and nothing else in the record tells them apart)."""


def home_of(item_id: str, regions: Sequence[str]) -> str:
    """The home Region of an id among ``regions`` (sorted): the first 8 bytes of the SHA-256 of the
    id's UTF-8 bytes, big-endian, modulo the number of Regions, index the sorted list. The same in
    every process, Region and Python version (unlike the salted ``hash()``); it changes only with
    the list of Regions (``TABLE_REGIONS``). [docs/regions.md "Creations"](../regions.md#creations)."""
    ordered = sorted(regions)
    return ordered[int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "big") % len(ordered)]


class GlobalTableMode(StrEnum):
    """The template's ``GlobalTableMode``: a single-Region table, or a global table in MREC or MRSC."""

    NONE = "none"
    MREC = "mrec"
    MRSC = "mrsc"


@dataclass(frozen=True)
class Topology:
    """This function's Region, every replica Region (sorted) and the mode joining them.

    ``Topology()`` is a single-Region table: every rule of the layer holds as it did before global
    tables. ``home_region`` is the one Region that takes writes an approach can only make exact in
    one place (e.g. gapless order ids under MREC); ``""`` means none is configured.
    """

    mode: GlobalTableMode = GlobalTableMode.NONE
    region: str = ""
    regions: tuple[str, ...] = ()
    """The table's Regions, sorted (empty on a single-Region table)."""
    home_region: str = ""

    def __post_init__(self) -> None:
        if self.mode is GlobalTableMode.NONE:
            return
        if list(self.regions) != sorted(set(self.regions)):
            raise ValueError(f"regions must be sorted and distinct: {self.regions!r}")
        if self.mode is GlobalTableMode.MRSC and len(self.regions) != 3:
            raise ValueError("an MRSC global table has exactly 3 Regions")
        if len(self.regions) < 2:
            raise ValueError(f"a global table ({self.mode}) has at least 2 Regions")
        if self.region not in self.regions:
            raise ValueError(f"this Region {self.region!r} is not one of the table's Regions {self.regions!r}")
        if self.home_region and self.home_region not in self.regions:
            raise ValueError(f"the home Region {self.home_region!r} is not one of the table's Regions {self.regions!r}")

    @property
    def multi_region(self) -> bool:
        """Writes may happen in more than one Region (MREC or MRSC)."""
        return self.mode is not GlobalTableMode.NONE

    @property
    def eventual(self) -> bool:
        """MREC: conditions see this replica only and last-writer-wins resolves concurrent versions."""
        return self.mode is GlobalTableMode.MREC

    @property
    def writer(self) -> str:
        """The name this Region writes under in per-Region items (``""`` for a single-Region table)."""
        return self.region if self.multi_region else ""

    @property
    def writers(self) -> tuple[str, ...]:
        """Every name a per-Region item may be written under (``("",)`` for a single-Region table)."""
        return self.regions if self.multi_region else ("",)

    @property
    def index(self) -> int:
        """This Region's position in [`regions`][counters.core.regions.Topology.regions] (0 for a single-Region table)."""
        return self.regions.index(self.region) if self.multi_region else 0

    @property
    def stride(self) -> int:
        """How many Regions share one id space (1 for a single-Region table)."""
        return len(self.regions) if self.multi_region else 1

    @property
    def is_home(self) -> bool:
        """This Region takes the writes that only a home Region may make (always, in one Region)."""
        return not self.eventual or not self.home_region or self.region == self.home_region

    def home_of(self, item_id: str) -> str:
        """The Region that creates ``item_id`` ([`home_of`][counters.core.regions.Topology.home_of]) on MREC; this Region otherwise (a
        single Region, or MRSC, whose conditional writes see every Region)."""
        return home_of(item_id, self.regions) if self.eventual else self.region


@dataclass(frozen=True, kw_only=True)
class RegionSettings(Settings):
    """The template's ``GlobalTableMode``, replica Regions and home Region; Lambda sets ``AWS_REGION``."""

    global_table_mode: GlobalTableMode = env("GLOBAL_TABLE_MODE", GlobalTableMode.NONE)
    region: str = env("AWS_REGION", "")
    table_regions: str = env("TABLE_REGIONS", "")
    home_region: str = env("HOME_REGION", "")

    @property
    def topology(self) -> Topology:
        """The topology these settings describe (raises [`SettingsError`][counters.core.settings.SettingsError] if inconsistent)."""
        regions = tuple(sorted({r.strip() for r in self.table_regions.split(",") if r.strip()}))
        try:
            return Topology(self.global_table_mode, self.region, regions, self.home_region)
        except ValueError as exc:
            raise SettingsError(f"GLOBAL_TABLE_MODE/TABLE_REGIONS/AWS_REGION/HOME_REGION: {exc}") from None


ONE_REGION = Topology()
"""A single-Region table: the default topology of every service."""
