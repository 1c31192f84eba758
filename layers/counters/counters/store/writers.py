"""Who may write each item family, in each mode of the table: declared once, beside the family's keys.

DynamoDB global tables ([docs/regions.md](../regions.md)): on **MREC** a condition sees only the local replica and
last-writer-wins keeps one whole item, so two Regions writing one item in place lose a write, and
two Regions creating one id both answer 201 and one creation vanishes; on **MRSC** a conditional
write sees every Region and a concurrent write from another Region is refused
(``ReplicatedWriteConflictException``); with **no** global table (``none``) one Region writes
everything. Every family module ([`FAMILIES`][counters.store.layout.FAMILIES]) declares, in a module-level
``WRITERS`` tuple, one [`WriterRule`][counters.store.writers.WriterRule] per item family: its key shape and, per mode, a [`Rule`][counters.store.writers.Rule]:

* [`Kind.PER_REGION`][counters.store.writers.Kind.PER_REGION]: the key (or the named attribute) names the one Region that writes the
  item; read as a sum, a max, or by its own Region only. Optionally created, with every Region's
  twin, by the home Region of the id (a resource's shares).
* [`Kind.HOME`][counters.store.writers.Kind.HOME]: only the table's home Region (``HOME_REGION``; on one Region, that one) writes it.
* [`Kind.HOME_OF_ID`][counters.store.writers.Kind.HOME_OF_ID]: only the id's home Region ([`counters.core.regions.home_of`][counters.core.regions.home_of]) writes
  it; elsewhere the store refuses before writing ([`Table.admit`][counters.store.tables.Table.admit]: 409 ``wrong_region``
  naming the home). While that Region is down, that id cannot be created (other ids can).
* [`Kind.ONCE`][counters.store.writers.Kind.ONCE]: created once, in one Region (its id is random or from that Region's own id
  space), and written after only there.
* [`Kind.ANY`][counters.store.writers.Kind.ANY]: any Region; a conflicting write is detected (the reason says how: MRSC's
  conditions and write conflicts, or a state whose latest request wins and whose replaced version
  its Region takes back, or a detectable twin).
* [`Kind.REFUSED`][counters.store.writers.Kind.REFUSED]: not written in that mode (the layer refuses the approach, or uses another
  family there).

The emulator (``testkit/regions.py``) maps every local write's key to its family ([`family_of`][counters.store.writers.family_of])
and checks the writing Region against the family's rule: a family written against its rule, or a
key no family declares, fails the run. [`table`][counters.store.writers.table] renders the declarations as [docs/regions.md](../regions.md)'s
"Who writes what" table (``scripts/writers_table.py``; a unit test keeps it current).
"""

from __future__ import annotations

import functools
import importlib
import re
import uuid
from collections.abc import Mapping
from enum import StrEnum

from counters.core.records import dataclass
from counters.core.regions import GlobalTableMode, Topology
from counters.store.layout import FAMILIES


class Kind(StrEnum):
    """Who may write an item family in one mode (module doc)."""

    PER_REGION = "per Region"
    """Each Region writes only its own item (the key or an attribute names it); read as a sum, a max, or by its Region."""
    HOME = "home Region"
    """Only the table's home Region (``HOME_REGION``) writes it."""
    HOME_OF_ID = "home of the id"
    """Only the id's home Region (sha256 of the id over the sorted Regions) creates it."""
    ONCE = "created once"
    """Written once, never updated in place: its key is unique (a random or sequence id)."""
    ANY = "any Region"
    """Any Region, with a stated rule that survives last-writer-wins (the family's ``why``)."""
    REFUSED = "refused"
    """Nobody writes it in this mode (an operation's cell: refused, with its ``reason``)."""
    TOGETHER = "transactional"
    """An operation's cell: its items are written in one ``TransactWriteItems``."""
    IN_ORDER = "in order"
    """An operation's cell: its items are written by single-item conditional writes, in a fixed order."""


@dataclass(frozen=True)
class Rule:
    """One mode's rule: its [`Kind`][counters.store.writers.Kind], how it is read (per Region: ``sum``, ``max``, ``own``),
    and whether the id's home Region creates it (a per-Region item created with every Region's twin)."""

    kind: Kind
    read: str = ""
    created_at_home: bool = False
    reason: str = ""
    """Why it is refused (an operation's refused cell, or its per-Region cell when another Region's part is asked)."""

    def cell(self) -> str:
        """The rule as a cell of [docs/regions.md](../regions.md)'s table."""
        text = {
            Kind.PER_REGION: f"per Region ({self.read})",
            Kind.HOME: "home Region",
            Kind.HOME_OF_ID: "home of the id",
            Kind.ONCE: "created once",
            Kind.ANY: "any Region",
            Kind.REFUSED: "refused",
            Kind.TOGETHER: "transactional",
            Kind.IN_ORDER: "in order",
        }[self.kind]
        return f"{text}, created at the id's home" if self.created_at_home else text


HOME = Rule(Kind.HOME)
HOME_OF_ID = Rule(Kind.HOME_OF_ID)
ONCE = Rule(Kind.ONCE)
ANY = Rule(Kind.ANY)
REFUSED = Rule(Kind.REFUSED)


TOGETHER = Rule(Kind.TOGETHER)
IN_ORDER = Rule(Kind.IN_ORDER)


def per_region(read: str, *, created_at_home: bool = False, reason: str = "") -> Rule:
    """A per-Region rule read as ``sum``, ``max`` or ``own`` (only its Region reads it); ``reason``:
    why an operation on another Region's part is refused."""
    return Rule(Kind.PER_REGION, read, created_at_home, reason)


def refused(reason: str) -> Rule:
    """An operation's cell: refused in this mode, for ``reason`` (the text users read)."""
    return Rule(Kind.REFUSED, reason=reason)


REGION_PATTERN = r"[a-z]{2}(?:-[a-z]+)+-[0-9]+"
"""A Region name (eu-west-1, ap-southeast-2): what ``<Region>`` matches in a key shape."""
_PLACEHOLDER = re.compile(r"<([^>]+)>")
_DIGITS = ("n", "ms:13", "bucket ms")


def _groups(shape: str) -> set[str]:
    """The named groups of ``_pattern(shape)``, without compiling it."""
    placeholders = _PLACEHOLDER.findall(shape)
    names = {name for name in placeholders if name.lower() != "region" and name not in _DIGITS and name.isidentifier()}
    return names | ({"region"} if any(name.lower() == "region" for name in placeholders) else set())


@functools.cache
def _pattern(shape: str) -> re.Pattern[str]:
    """A key shape (``RES#<id>@<Region>[#<n>]``) as a regular expression: ``<Region>`` a Region
    (group ``region``), ``<n>``/``<ms:13>``/``<bucket ms>`` digits, any other placeholder one or
    more characters other than ``#`` (anything, when it ends the key; a group named after it when
    it is an identifier), ``[...]`` optional."""
    out, at = [], 0
    for found in _PLACEHOLDER.finditer(shape):
        out.append(re.escape(shape[at : found.start()]).replace(r"\[", "(?:").replace(r"\]", ")?"))
        name = found.group(1)
        last = found.end() == len(shape)
        if name.lower() == "region":
            out.append(f"(?P<region>{REGION_PATTERN})")
        elif name in _DIGITS:
            out.append(r"[0-9]+")
        else:
            body = ".+" if last else "[^#]+"
            out.append(f"(?P<{name}>{body})" if name.isidentifier() else f"(?:{body})")
        at = found.end()
    out.append(re.escape(shape[at:]).replace(r"\[", "(?:").replace(r"\]", ")?"))
    return re.compile("".join(out))


@dataclass(frozen=True)
class WriterRule:
    """One item family: its key shape, who writes it in each mode, and why that holds across Regions.

    ``home_id``: the key placeholder that is the id whose home Region ([`Kind.HOME_OF_ID`][counters.store.writers.Kind.HOME_OF_ID]) writes
    it. ``region_attribute``: a per-Region item whose key does not name its Region names it in this
    attribute (a transfer's ``source``)."""

    item: str
    pk: str
    sk: str
    none: Rule
    mrec: Rule
    mrsc: Rule
    why: str
    home_id: str = ""
    region_attribute: str = ""

    def __post_init__(self) -> None:
        """Check the declaration; its key shapes are compiled on first [`match`][counters.store.writers.WriterRule.match]
        (an API handler's cold start declares its families' rules and matches no key)."""
        rules, pk_groups = (self.none, self.mrec, self.mrsc), _groups(self.pk)
        if any(r.kind is Kind.HOME_OF_ID or r.created_at_home for r in rules) and self.home_id not in pk_groups:
            raise ValueError(f"{self.item}: a home-of-the-id rule needs home_id, a placeholder of {self.pk!r}")
        regional = any(r.kind is Kind.PER_REGION for r in rules)
        if regional and not self.region_attribute and "region" not in {*pk_groups, *_groups(self.sk)}:
            raise ValueError(f"{self.item}: a per-Region rule needs <Region> in the key or a region_attribute")

    def rule(self, mode: GlobalTableMode | str) -> Rule:
        """This family's rule in ``mode``."""
        return {GlobalTableMode.NONE: self.none, GlobalTableMode.MREC: self.mrec, GlobalTableMode.MRSC: self.mrsc}[GlobalTableMode(mode)]

    def match(self, pk: str, sk: str) -> dict[str, str] | None:
        """This family's placeholders in a key (``region``, the id), or ``None`` when not its key."""
        p, s = _pattern(self.pk).fullmatch(pk), _pattern(self.sk).fullmatch(sk)
        if p is None or s is None:
            return None
        return {k: v for k, v in (*p.groupdict().items(), *s.groupdict().items()) if v is not None}

    def writer(self, parts: Mapping[str, str], image: Mapping[str, object] | None) -> str | None:
        """The Region a per-Region item names (``None``: not known from this write)."""
        if self.region_attribute:
            named = (image or {}).get(self.region_attribute)
            return named if isinstance(named, str) else None
        return parts.get("region")

    def fresh_id(self, topology: Topology) -> str:
        """A random id (32 hex) this Region may create: under [`Kind.HOME_OF_ID`][counters.store.writers.Kind.HOME_OF_ID] one is drawn
        until its home is this Region (on average as many draws as there are Regions)."""
        while True:
            made = uuid.uuid4().hex
            if self.rule(topology.mode).kind is not Kind.HOME_OF_ID or topology.home_of(made) == topology.region:
                return made

    def row(self) -> str:
        """This family as a row of [docs/regions.md](../regions.md)'s table."""
        return f"| {self.item} | `{self.pk}` / `{self.sk}` | {self.none.cell()} | {self.mrec.cell()} | {self.mrsc.cell()} | {self.why} |"


def declared(family: str) -> tuple[WriterRule, ...]:
    """One family module's item shapes (its ``TABLE``'s, [`counters.store.tables`][counters.store.tables])."""
    return tuple(importlib.import_module(f"counters.store.{family}").TABLE.shapes)


def rules() -> list[WriterRule]:
    """Every family's declarations, in [`FAMILIES`][counters.store.layout.FAMILIES] order."""
    return [w for family in FAMILIES for w in declared(family)]


def family_of(pk: str, sk: str, declarations: list[WriterRule] | None = None) -> tuple[WriterRule, dict[str, str]] | None:
    """The first declaration (in [`rules`][counters.store.writers.rules] order: a module lists its more specific shapes first)
    whose key shape matches, with its placeholders; ``None``: no family declares this key."""
    for writers in rules() if declarations is None else declarations:
        parts = writers.match(pk, sk)
        if parts is not None:
            return writers, parts
    return None


def table() -> str:
    """[docs/regions.md](../regions.md)'s "Who writes what" table (between its ``writers`` markers)."""
    head = [
        "| item | key | `none` | `mrec` | `mrsc` | why two Regions never lose each other's write |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + [w.row() for w in rules()])
