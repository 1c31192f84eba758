"""Each item family's one table of (operation x mode) -> rule, and the check its store makes on every write.

A family module ([`FAMILIES`][counters.store.layout.FAMILIES]) declares ``TABLE``, a [`Table`][counters.store.tables.Table]: its item
shapes (``WRITERS``, each a [`WriterRule`][counters.store.writers.WriterRule]: who writes that item in each mode) and
the store's write operations on them (``create``, ``like:standard``, ``take:crt``, ``transfer``, ``switch-mode``...),
each an [`Op`][counters.store.tables.Op] naming the items it writes and, per mode, a [`Rule`][counters.store.writers.Rule]:

* ``per Region``: the operation writes this Region's part only; another Region's part is refused with the cell's reason;
* ``home of the id``: only the id's home Region performs it (409 ``wrong_region`` naming the home elsewhere);
* ``home Region``: only the table's home Region (``HOME_REGION``) performs it (409 ``unsupported_in_region_mode`` elsewhere);
* ``transactional`` / ``in order`` / ``any Region``: performed here, its items written in one transaction,
  by single-item writes in order, or as the items' own rules say;
* ``refused``: 409 ``unsupported_in_region_mode``, with the cell's reason, before any call.

The family's store is the only writer of its items and applies the table on every write
([`Store`][counters.store.base.Store]): [`Table.admit`][counters.store.tables.Table.admit] refuses an operation before the
store makes any call, and [`admit`][counters.store.tables.admit] checks each written key against the shapes of
the store's families and their rule in this mode ([`OutsideTable`][counters.store.tables.OutsideTable] otherwise:
a bug, never a user's error). The emulator (``testkit/regions.py``) checks the replicated writes
against the same shapes, and [docs/regions.md](../regions.md)'s tables are rendered from them
([`refusals_table`][counters.store.tables.refusals_table], ``scripts/refusals_table.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

from counters.core.errors import UnsupportedInMode, WrongRegion
from counters.core.records import dataclass
from counters.core.regions import GlobalTableMode, Topology
from counters.store.layout import FAMILIES
from counters.store.writers import ANY, Kind, Rule, WriterRule

NONE, MREC, MRSC = GlobalTableMode.NONE, GlobalTableMode.MREC, GlobalTableMode.MRSC
_TABLE = {NONE: "a single-Region table", MREC: "an MREC global table", MRSC: "an MRSC global table"}


class OutsideTable(AssertionError):
    """A store was about to write a key its families' tables do not allow in this mode (a bug: nothing was sent)."""


@dataclass(frozen=True)
class Op:
    """One write operation of a family's store: ``what`` it is (the subject of its refusal), the
    items it writes (``WriterRule.item`` names; empty: it writes none of its own), its rule per mode."""

    what: str
    items: tuple[str, ...] = ()
    none: Rule = ANY
    mrec: Rule = ANY
    mrsc: Rule = ANY

    def rule(self, mode: GlobalTableMode | str) -> Rule:
        """This operation's rule in ``mode``."""
        return {NONE: self.none, MREC: self.mrec, MRSC: self.mrsc}[GlobalTableMode(mode)]

    def refusing(self) -> dict[GlobalTableMode, str]:
        """The modes that refuse it outright, with their reasons."""
        return {mode: self.rule(mode).reason for mode in (NONE, MREC, MRSC) if self.rule(mode).kind is Kind.REFUSED}


def refusal(what: str, mode: GlobalTableMode, reason: str, detail: str = "") -> str:
    """The one wording of a refusal: ``<what> is not available on <table>: <reason>[; <detail>] (docs/regions.md)``."""
    extra = f"; {detail}" if detail else ""
    return f"{what} is not available on {_TABLE[mode]}: {reason}{extra} (docs/regions.md)"


@dataclass(frozen=True)
class Table:
    """One family's table: its item shapes and its store's operations (module doc)."""

    family: str
    shapes: tuple[WriterRule, ...]
    ops: Mapping[str, Op]

    def __post_init__(self) -> None:
        """Every item an operation names is one of the family's shapes; a refused cell says why."""
        names = {shape.item for shape in self.shapes}
        for name, op in self.ops.items():
            if not set(op.items) <= names:
                raise ValueError(f"{self.family}: {name} writes {sorted(set(op.items) - names)}, not shapes of this family")
            if any(not reason for reason in op.refusing().values()):
                raise ValueError(f"{self.family}: {name} is refused without a reason")

    def refused(self, op: str, topology: Topology, detail: str = "") -> str | None:
        """The message refusing ``op`` outright on this table, or ``None``."""
        row = self.ops[op]
        rule = row.rule(topology.mode)
        return refusal(row.what, topology.mode, rule.reason, detail) if rule.kind is Kind.REFUSED else None

    def admit(self, op: str, topology: Topology, *, item_id: str = "", region: str = "", detail: str = "") -> None:
        """Refuse ``op`` here, before any call, as its cell in this mode says: 409 ``unsupported_in_region_mode``
        (refused; another Region's part, ``region``; not the home Region) or 409 ``wrong_region``
        (not the home of ``item_id``)."""
        row, mode = self.ops[op], topology.mode
        rule = row.rule(mode)
        message = self.refused(op, topology, detail)
        if message is None and rule.kind is Kind.PER_REGION and region and region != topology.region:
            message = refusal(row.what, mode, rule.reason, detail)
        if message is None and rule.kind is Kind.HOME:
            home = topology.home_region
            if not home:
                message = f"{row.what} on {_TABLE[mode]} needs a home Region (HOME_REGION) that alone takes it"
            elif home != topology.region:
                message = (
                    f"{row.what} is taken only in the home Region {home} of this {mode.upper()} global table; "
                    f"this is {topology.region}: send the request to {home} (docs/regions.md)"
                )
        if message is not None:
            raise UnsupportedInMode(message)
        if rule.kind is Kind.HOME_OF_ID and item_id:  # an id not drawn yet is checked when the store writes it
            home = topology.home_of(item_id)
            if home != topology.region:
                raise WrongRegion(
                    f"{row.items[0]} {item_id!r} is created only in its home Region {home} on this {mode.upper()} global table "
                    f"(this is {topology.region}): send the request there (docs/regions.md, Creations)",
                    region=home,
                )


def declared(family: str) -> Table:
    """One family module's ``TABLE``."""
    table: Table = importlib.import_module(f"counters.store.{family}").TABLE
    return table


def tables() -> list[Table]:
    """Every family's table, in [`FAMILIES`][counters.store.layout.FAMILIES] order."""
    return [declared(family) for family in FAMILIES]


def operation(name: str) -> Op:
    """The operation ``name`` of whichever family's table declares it (names are unique across the tables)."""
    found = [table.ops[name] for table in tables() if name in table.ops]
    if len(found) != 1:
        raise KeyError(f"{name!r} is declared by {len(found)} tables (one expected)")
    return found[0]


def admit(families: Iterable[Table], topology: Topology, op: Op | None, pk: str, sk: str, image: Mapping[str, object] | None) -> None:
    """Raise [`OutsideTable`][counters.store.tables.OutsideTable] unless the key ``pk``/``sk`` is a shape of one of
    ``families`` that ``op`` writes (any of them: ``None``) and this Region may write it in this mode
    (its shape's rule: not refused; a per-Region item of this Region, or put, created, by the id's home;
    a home-of-the-id item in that home; a home-Region item in the table's home, when one is set)."""
    shapes = [shape for table in families for shape in table.shapes if op is None or shape.item in op.items]
    for shape in shapes:
        parts = shape.match(pk, sk)
        if parts is None:
            continue
        rule, region = shape.rule(topology.mode), topology.region
        if rule.kind is Kind.REFUSED:
            raise OutsideTable(f"{shape.item} PK={pk!r} SK={sk!r} is not written on {_TABLE[topology.mode]}")
        if rule.kind is Kind.PER_REGION and topology.mode is not NONE:
            named = shape.writer(parts, image)
            home = topology.home_of(parts[shape.home_id]) if rule.created_at_home and image is not None else ""  # a Put: its creation
            if named is not None and named != region and home != region:
                raise OutsideTable(f"{region} would write {shape.item} PK={pk!r} SK={sk!r}, a per-Region item of {named}")
        if rule.kind is Kind.HOME_OF_ID and topology.home_of(parts[shape.home_id]) != region:
            raise OutsideTable(f"{region} would write {shape.item} PK={pk!r} SK={sk!r}: only its id's home writes it")
        if rule.kind is Kind.HOME and topology.mode is not NONE and topology.home_region not in ("", region):
            raise OutsideTable(f"{region} would write {shape.item} PK={pk!r} SK={sk!r}: only the home Region writes it")
        return
    whose = f"{op.what}'s items" if op is not None else "a shape of " + ", ".join(t.family for t in families)
    raise OutsideTable(f"PK={pk!r} SK={sk!r} is not {whose} (counters/store/*.py TABLE)")


def refusals_table() -> str:
    """Every refused cell of every family's table, as [docs/regions.md](../regions.md)'s "What each mode refuses" table."""
    lines = ["| refused | single Region | MREC | MRSC | why |", "|---|---|---|---|---|"]
    for table in tables():
        for name, op in table.ops.items():
            why = op.refusing()
            if why:
                cells = ["refused" if mode in why else "" for mode in (NONE, MREC, MRSC)]
                lines.append(f"| {op.what} (`{name}`) | {' | '.join(cells)} | {' / '.join(sorted(set(why.values())))} |")
    return "\n".join(lines)
