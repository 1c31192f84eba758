"""Who may create each item across Regions (counters.store.creation): declared by every family,
applied by the store, rendered as docs/regions.md's "Creations" table."""

from __future__ import annotations

import importlib

import pytest

from counters.core.errors import WrongRegion
from counters.core.regions import ONE_REGION, GlobalTableMode, Topology, home_of
from counters.store import creation, layout
from counters.store.posts import POST
from counters.store.resources import RESOURCE, transfer_id
from scripts.creations_table import DOC, rendered

EU, US, US2, USW = "eu-west-1", "us-east-1", "us-east-2", "us-west-2"
MREC = {r: Topology(GlobalTableMode.MREC, r, (EU, US)) for r in (EU, US)}


def test_every_family_declares_its_creations() -> None:
    for family in layout.FAMILIES:
        module = importlib.import_module(f"counters.store.{family}")
        assert module.CREATIONS, family
        assert all(isinstance(rule, creation.CreationRule) for rule in module.CREATIONS)


def test_regions_md_holds_the_table_the_store_declares() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/creations_table.py"


def test_the_home_of_an_id_never_changes() -> None:
    """Pinned: a deployed table's homes must not move with a new hash (each Region decides alone)."""
    assert [home_of(i, (EU, US)) for i in ("ov", "sq1", "r0", "r1", "p1", "p2")] == [EU, EU, EU, US, US, EU]
    assert [home_of(i, (US, US2, USW)) for i in ("ov", "r1", "keep", "p2")] == [US, USW, USW, US2]
    assert home_of("ov", (US, EU)) == home_of("ov", (EU, US))  # the sorted list, whatever the order given


def test_only_the_home_creates_on_mrec_and_every_region_elsewhere() -> None:
    home, other = EU, US
    POST.require(MREC[home], "sq1")
    with pytest.raises(WrongRegion) as refused:
        RESOURCE.require(MREC[other], "sq1")
    assert (refused.value.region, refused.value.status, refused.value.code) == (home, 409, "wrong_region")
    assert refused.value.details() == {"region": home}
    mrsc = Topology(GlobalTableMode.MRSC, US2, (US, US2, USW))
    for topology in (mrsc, ONE_REGION):
        POST.require(topology, "sq1")
        RESOURCE.require(topology, "ov")


def test_an_id_the_service_draws_is_homed_here() -> None:
    for region, topology in MREC.items():
        assert all(home_of(POST.fresh_id(topology), (EU, US)) == region for _ in range(20))


def test_a_transfer_id_names_its_source_region() -> None:
    assert transfer_id("r", EU, "k") == transfer_id("r", EU, "k")
    assert transfer_id("r", EU, "k") != transfer_id("r", US, "k")
