"""Who may create each item with an id a client chose (or derived from a client's key), across Regions.

On an MREC global table a conditional create (``attribute_not_exists``) sees only the local replica,
and last-writer-wins keeps one whole item: two Regions creating one id within the replication lag
both succeed, and one creation silently vanishes. So every family that creates items declares, next
to its keys, a :class:`CreationRule` (in a module-level ``CREATIONS`` tuple) saying why two Regions
never both create one key:

* :attr:`Creation.HOME`: on MREC only the id's home Region (:func:`counters.core.regions.home_of`)
  creates it; elsewhere the store refuses before writing (409 ``wrong_region`` naming the home).
  While the home Region is down, that id cannot be created (other ids can).
* :attr:`Creation.PER_REGION`: the key (or the id space) names the Region that writes it, so no
  other Region ever creates that key.
* :attr:`Creation.RANDOM`: the id is drawn at random (122 or 64 random bits): no two requests pick it.
* :attr:`Creation.ANY_REGION`: created in any Region, with a stated rule that survives
  last-writer-wins (e.g. a twin detected and answered, nothing acknowledged lost).

On MRSC every conditional write sees the latest version in every Region, so ``attribute_not_exists``
already refuses the second creation (409 ``already_exists``); on one Region nothing changes.
:func:`table` renders every family's rules as docs/regions.md's "Creations" table.
"""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass
from enum import StrEnum

from counters.core.errors import WrongRegion
from counters.core.regions import Topology
from counters.store.layout import FAMILIES


class Creation(StrEnum):
    """How a family keeps two Regions from both creating one key (module doc)."""

    HOME = "home Region of the id"
    PER_REGION = "per Region"
    RANDOM = "random id"
    ANY_REGION = "any Region"


@dataclass(frozen=True)
class CreationRule:
    """One item family's creation rule: the item, the rule, and why it holds across Regions."""

    item: str
    creation: Creation
    why: str

    def require(self, topology: Topology, item_id: str) -> None:
        """Raise :class:`WrongRegion` (naming the home) when this Region may not create ``item_id``;
        called by the store before its conditional create, so a refusal writes nothing."""
        if self.creation is not Creation.HOME:
            return
        home = topology.home_of(item_id)
        if home != topology.region:
            raise WrongRegion(
                f"{self.item} {item_id!r} is created only in its home Region {home} on this MREC global table "
                f"(this is {topology.region}): send the request there (docs/regions.md, Creations)",
                region=home,
            )

    def fresh_id(self, topology: Topology) -> str:
        """A random id (32 hex) this Region may create: under :attr:`Creation.HOME` on MREC one is
        drawn until its home is this Region (on average as many draws as there are Regions)."""
        while True:
            made = uuid.uuid4().hex
            if self.creation is not Creation.HOME or topology.home_of(made) == topology.region:
                return made

    def row(self) -> str:
        return f"| {self.item} | {self.creation.value} | {self.why} |"


def rules() -> list[CreationRule]:
    """Every family's creation rules, in :data:`~counters.store.layout.FAMILIES` order."""
    return [rule for family in FAMILIES for rule in getattr(importlib.import_module(f"counters.store.{family}"), "CREATIONS", ())]


def table() -> str:
    """docs/regions.md's "Creations" table (between its ``creations`` markers)."""
    head = ["| item | created on MREC by | why two Regions never both create one key |", "|---|---|---|"]
    return "\n".join(head + [rule.row() for rule in rules()])
