"""What a feature may do on this table, resolved once from the topology: a [`RegionPolicy`][counters.core.policy.RegionPolicy].

A service builds one policy per feature where it reads its settings
([`RegionPolicy.of`][counters.core.policy.RegionPolicy.of]) and hands it to its primitives and
stores. From then on nothing asks which mode the table runs in: a primitive reads the policy's
layout (``writer``, ``readers``, ``others``, ``stride``...), takes its behaviour (how a group of
items is written: [`Writes`][counters.core.policy.Writes]; whether capacity is escrowed per Region:
``escrowed``) and asks it for a refusal by name
([`RegionPolicy.require`][counters.core.policy.RegionPolicy.require]). No code outside this module
reads a mode or a mode's flag: tests/tooling/test_layer_shape.py holds that.

Every refusal of the layer is a row of one table, [`REFUSALS`][counters.core.policy.REFUSALS]: what is
refused, in which modes, and why, rendered with one wording
([`refusal_message`][counters.core.policy.refusal_message]) as
[`UnsupportedInMode`][counters.core.errors.UnsupportedInMode] (409 ``unsupported_in_region_mode``).
[docs/regions.md](../regions.md) lists the rows (``scripts/refusals_table.py`` writes them; tests/unit/test_policy.py keeps them current).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from typing import NamedTuple, TypeVar

from counters.core.errors import UnsupportedInMode
from counters.core.records import dataclass
from counters.core.regions import ONE_REGION, REGION_ATTRIBUTE, GlobalTableMode, Topology

NONE, MREC, MRSC = GlobalTableMode.NONE, GlobalTableMode.MREC, GlobalTableMode.MRSC
_T = TypeVar("_T")


class Writes:
    """How the items of one change are written on this table: [`TOGETHER`][counters.core.policy.TOGETHER]
    (one ``TransactWriteItems``: all or none) or [`IN_ORDER`][counters.core.policy.IN_ORDER] (no
    transactions, MRSC: one conditional single-item write each, in a fixed order; the first is the
    commit point, and whoever finds the rest missing completes them).

    A caller names what it does in each case and the policy's ``writes`` picks one
    ([`choose`][counters.core.policy.Writes.choose]); nothing else tells the two apart.
    """

    name = ""

    def choose(self, *, together: _T, in_order: _T) -> _T:
        """``together`` where one transaction writes the group, ``in_order`` where single-item writes do."""
        raise NotImplementedError

    def complete(self, put: Callable[[], object]) -> None:
        """A group's first item was found without a later one: write it (``put``, conditioned on
        being new) where the group is written in order (the writer died between its writes);
        nothing where a transaction wrote the group (the missing item is one that has not
        replicated here yet: the transaction wrote it, and writing it here would make this
        Region a second writer)."""
        self.choose(together=_nothing, in_order=put)()

    def __repr__(self) -> str:
        return f"Writes.{self.name}"


def _nothing() -> None:
    return None


class _Together(Writes):
    name = "TOGETHER"

    def choose(self, *, together: _T, in_order: _T) -> _T:
        return together


class _InOrder(Writes):
    name = "IN_ORDER"

    def choose(self, *, together: _T, in_order: _T) -> _T:
        return in_order


TOGETHER: Writes = _Together()
"""One ``TransactWriteItems`` writes a group (a single-Region table, MREC)."""
IN_ORDER: Writes = _InOrder()
"""Single-item conditional writes in order write a group (MRSC, which has no transactions)."""


class Refusal(NamedTuple):
    """One row of [`REFUSALS`][counters.core.policy.REFUSALS]: ``what`` is refused in each mode of ``why`` for that reason."""

    what: str
    why: Mapping[GlobalTableMode, str]


REFUSALS: Mapping[str, Refusal] = {
    "strategy:crt": Refusal("strategy 'crt'", {MRSC: "its take is a TransactWriteItems with a ClientRequestToken"}),
    "strategy:marker": Refusal("strategy 'marker'", {MRSC: "its take writes the marker and the counter in one TransactWriteItems"}),
    "sharding": Refusal(
        "write sharding (shards > 1)",
        {MRSC: "a sharded take splits over shards in one TransactWriteItems and reads them with TransactGetItems"},
    ),
    "gapless": Refusal("a gapless sequence", {MRSC: "its value and its items commit in one TransactWriteItems, which MRSC does not offer"}),
    "standard-post": Refusal(
        "a standard post",
        {
            MRSC: "standard mode counts in a transaction and MRSC has none: create it hot (a post created without a `mode` is hot on MRSC, standard elsewhere)"
        },
    ),
    "standard-like": Refusal("a standard post's like", {MRSC: "standard mode counts in a transaction; MRSC has none"}),
    "switch-mode": Refusal(
        "switching a post's mode",
        dict.fromkeys((MREC, MRSC), "META is one item every Region would write in place; a post keeps the mode it was created in"),
    ),
    "audit": Refusal(
        "auditing a post's likes",
        dict.fromkeys((MREC, MRSC), "each Region keeps its own tally; an audit per Region is not built yet (docs/likes.md)"),
    ),
    "grow-spread": Refusal(
        "growing a hot post's spread",
        dict.fromkeys(
            (MREC, MRSC),
            "two Regions may create one user's like in two lanes, and which Region merges them is not decided yet (docs/DESIGN.md)",
        ),
    ),
    "like-before-spread": Refusal(
        "liking a post stored before spread",
        dict.fromkeys((MREC, MRSC), "its tally is one item on META, which every Region would write"),
    ),
    "unescrowed-resource": Refusal(
        "a resource with one counter for every Region (created before the table was global)",
        {MREC: "it would oversell; its capacity must be split into escrowed shares (docs/reservations.md, Global tables)"},
    ),
    "release-elsewhere": Refusal(
        "releasing units of another Region's escrowed share",
        {MREC: "only the Region that holds a share writes it: release the reservation there (docs/reservations.md, Global tables)"},
    ),
    "transfers": Refusal(
        "transfers",
        dict.fromkeys(
            (NONE, MRSC),
            "they move escrowed shares between the Regions of an MREC global table; here one counter serves every Region "
            "(docs/reservations.md, Global tables)",
        ),
    ),
}
"""Every refusal of the layer by name: what, and why in each mode that refuses it."""


def refusals_table() -> str:
    """[`REFUSALS`][counters.core.policy.REFUSALS] as [docs/regions.md](../regions.md)'s "What each mode refuses" table (``scripts/refusals_table.py``)."""
    lines = ["| refused | single Region | MREC | MRSC | why |", "|---|---|---|---|---|"]
    for name, row in REFUSALS.items():
        cells = ["refused" if mode in row.why else "" for mode in (NONE, MREC, MRSC)]
        whys = sorted(set(row.why.values()))
        lines.append(f"| {row.what} (`{name}`) | {' | '.join(cells)} | {' / '.join(whys)} |")
    return "\n".join(lines)


_TABLE = {NONE: "a single-Region table", MREC: "an MREC global table", MRSC: "an MRSC global table"}


def refusal_message(name: str, mode: GlobalTableMode, detail: str = "") -> str:
    """The one wording of a refusal: ``<what> is not available on <table>: <why>[; <detail>] (docs/regions.md)``."""
    row = REFUSALS[name]
    extra = f"; {detail}" if detail else ""
    return f"{row.what} is not available on {_TABLE[mode]}: {row.why[mode]}{extra} (docs/regions.md)"


@dataclass(frozen=True)
class RegionPolicy:
    """One feature's view of the table, resolved once ([`of`][counters.core.policy.RegionPolicy.of]).

    ``RegionPolicy()`` is a single-Region table. The fields are capabilities, not modes:

    * ``writer``: the name this Region's per-Region items of the feature carry (``""``: the one
      shared layout); ``readers``: every such name, read as a sum or a max (``("",)``: the one item).
      ``others``: the readers other than this Region's own (an answer may sit in their items:
      a failover re-send's entry, say); empty where the items are shared.
    * ``stride``/``index``: how many Regions share the feature's id space and this Region's place in it.
    * ``writes``: how a group of items is written ([`Writes`][counters.core.policy.Writes]:
      ``TOGETHER`` in one transaction; ``IN_ORDER`` on MRSC, which has none).
    * ``escrowed``: the Regions that each own an escrowed share of a capacity, in the table's
      order (MREC, where a condition sees this replica only and last-writer-wins resolves
      concurrent versions); empty where one counter serves every Region.
    * ``region``/``regions``: this Region and every Region of the table (empty on one Region);
      ``home_region``: the table's home Region (``""``: none configured).
    """

    writer: str = ""
    readers: tuple[str, ...] = ("",)
    stride: int = 1
    index: int = 0
    writes: Writes = TOGETHER
    escrowed: tuple[str, ...] = ()
    region: str = ""
    regions: tuple[str, ...] = ()
    home_region: str = ""
    topology: Topology = field(default=ONE_REGION, repr=False)
    """Kept for the stores' writer rules ([`counters.store.writers`][counters.store.writers]); primitives never read it."""

    @classmethod
    def of(cls, topology: Topology, *, per_region_in: Iterable[GlobalTableMode] = (MREC,)) -> RegionPolicy:
        """The policy of a feature whose in-place items are per Region in the modes ``per_region_in``
        (MREC by default: its conditions see one replica; a feature that also counts per Region on
        MRSC, as likes do, names both)."""
        per_region = topology.multi_region and topology.mode in set(per_region_in)
        strided = per_region and topology.stride > 1
        return cls(
            writer=topology.region if per_region else "",
            readers=topology.regions if per_region else ("",),
            stride=topology.stride if strided else 1,
            index=topology.index if strided else 0,
            writes=IN_ORDER if topology.mode is MRSC else TOGETHER,
            escrowed=topology.regions if topology.eventual else (),
            region=topology.region,
            regions=topology.regions if topology.multi_region else (),
            home_region=topology.home_region,
            topology=topology,
        )

    @property
    def others(self) -> tuple[str, ...]:
        """The other Regions whose per-Region items of this feature this Region reads (empty where the items are shared)."""
        return tuple(r for r in self.readers if r and r != self.writer)

    @property
    def stamp(self) -> str:
        """What an item written in place carries as its writing Region (``""`` on one Region: nothing)."""
        return self.region if self.regions else ""

    def stamped(self) -> dict[str, str]:
        """The attributes naming the writing Region an item written here carries (none on one Region)."""
        return {REGION_ATTRIBUTE: self.stamp} if self.stamp else {}

    def counts_here(self, writer: object) -> bool:
        """An item stamped by ``writer`` belongs to this Region's per-Region items (always, where the items are shared)."""
        return not self.writer or writer == self.writer

    def refused(self, name: str, detail: str = "") -> str | None:
        """The message refusing ``name`` ([`REFUSALS`][counters.core.policy.REFUSALS]) on this table, or ``None``."""
        mode = self.topology.mode
        return refusal_message(name, mode, detail) if mode in REFUSALS[name].why else None

    def require(self, name: str, detail: str = "") -> None:
        """Raise [`UnsupportedInMode`][counters.core.errors.UnsupportedInMode] if this table refuses ``name``."""
        message = self.refused(name, detail)
        if message is not None:
            raise UnsupportedInMode(message)

    def require_home(self, what: str) -> None:
        """Raise [`UnsupportedInMode`][counters.core.errors.UnsupportedInMode] unless this Region may take
        ``what``, which only the table's home Region (``HOME_REGION``) takes where conditions see one
        replica (MREC); anywhere on one Region or MRSC."""
        if not self.topology.eventual:  # a condition sees every Region's writes (one Region, MRSC)
            return
        if not self.home_region:
            raise UnsupportedInMode(f"{what} on an MREC global table needs a home Region (HOME_REGION) that alone takes it")
        if self.region != self.home_region:
            raise UnsupportedInMode(
                f"{what} is taken only in the home Region {self.home_region} of this MREC global table; "
                f"this is {self.region}: send the request to {self.home_region} (docs/regions.md)"
            )

    def home_of(self, item_id: str) -> str:
        """The Region that creates ``item_id`` ([`Topology.home_of`][counters.core.regions.Topology.home_of])."""
        return self.topology.home_of(item_id)


ONE_REGION_POLICY = RegionPolicy()
"""A single-Region table's policy: the default of every primitive."""
