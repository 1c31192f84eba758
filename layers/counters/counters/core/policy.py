"""What a feature may do on this table, resolved once from the topology: a [`RegionPolicy`][counters.core.policy.RegionPolicy].

A service builds one policy per feature where it reads its settings
([`RegionPolicy.of`][counters.core.policy.RegionPolicy.of]) and hands it to its primitives and
stores. From then on nothing asks which mode the table runs in: a primitive reads the policy's
layout (``writer``, ``readers``, ``others``, ``stride``...) and takes its behaviour (how a group of
items is written: [`Writes`][counters.core.policy.Writes]; whether capacity is escrowed per Region:
``escrowed``). No code outside this module reads a mode or a mode's flag:
tests/tooling/test_layer_shape.py holds that.

What is refused where is not the policy's: each item family's table says it, cell by cell, and its
store applies it on every write ([`counters.store.tables`][counters.store.tables]).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import TypeVar

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
    """Kept for the stores' tables ([`counters.store.tables`][counters.store.tables]); primitives never read it."""

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

    def home_of(self, item_id: str) -> str:
        """The Region that creates ``item_id`` ([`Topology.home_of`][counters.core.regions.Topology.home_of])."""
        return self.topology.home_of(item_id)


ONE_REGION_POLICY = RegionPolicy()
"""A single-Region table's policy: the default of every primitive."""
