"""Who may write each item family, in each mode (counters.store.writers): declared by every family
beside its keys, applied by the store (a home-of-the-id creation), checked by the emulator
(testkit.regions.WriterCheck) and rendered as docs/regions.md's "Who writes what" table."""

from __future__ import annotations

import importlib

import pytest

from counters.core.errors import WrongRegion
from counters.core.regions import ONE_REGION, GlobalTableMode, Topology, home_of
from counters.store import layout, writers
from counters.store.expiry import CHECKPOINT_KEY
from counters.store.post_items import POST
from counters.store.post_items import TABLE as POSTS
from counters.store.post_items import WRITERS as POST_WRITERS
from counters.store.resources_counters import TABLE as RESOURCES
from counters.store.resources_transfers import transfer_id
from counters.store.tables import Table
from counters.store.writers import Kind, WriterRule
from scripts.writers_table import DOC, rendered
from testkit.regions import Mode, WriterCheck, WriterRuleViolation

EU, US, US2, USW = "eu-west-1", "us-east-1", "us-east-2", "us-west-2"
MREC = {r: Topology(GlobalTableMode.MREC, r, (EU, US)) for r in (EU, US)}


def test_every_family_declares_its_writers() -> None:
    for family in layout.FAMILIES:
        module = importlib.import_module(f"counters.store.{family}")
        assert module.TABLE.shapes and module.TABLE.shapes == module.WRITERS, family
        assert all(isinstance(rule, WriterRule) for rule in module.WRITERS)


def test_regions_md_holds_the_table_the_store_declares() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/writers_table.py"


def test_a_stale_table_is_caught() -> None:
    text = DOC.read_text().replace("| like tally of a Region |", "| like tally |")
    assert rendered(text) != text


def test_every_key_the_store_builds_maps_to_its_family() -> None:
    from counters.store.ledger_items import EntryKey, dirty_pk, marker_sk, snapshot_sk
    from counters.store.operations import operation_key
    from counters.store.post_items import group_key, hot_like_key, like_key, post_key, probe_key, region_tally_key
    from counters.store.resources_counters import resource_key, shard_key, share_key
    from counters.store.resources_records import record_key
    from counters.store.resources_transfers import transfer_key
    from counters.store.sequences import idempotency_key, order_key, pointer_key, sequence_key

    entry = EntryKey("01JDQ1C0K6Y9V2Q7W3E4R5T6Y7", 1732700000000)
    expected = {
        "post": post_key("p1"),
        "like tally of a Region": region_tally_key("p1", EU),
        "like tally of a lane group": group_key("p1", 2),
        "like": hot_like_key("p1", "u#1", 4),
        "like, post stored before `spread`": like_key("p1", "u1"),
        "audit probe": probe_key("p1", 2),
        "resource": resource_key("r1"),
        "resource share": share_key("r1", US),
        "resource share shard": share_key("r1", US, 3),
        "resource shard": shard_key("r1", 3),
        "transfer": transfer_key("r1", transfer_id("r1", EU, "k")),
        "transfer receipt": transfer_key("r1", transfer_id("r1", EU, "k"), receipt=True),
        "reservation record of a Region": record_key("t1", EU),
        "reservation record": record_key("t1"),
        "ledger entry of a Region": {"PK": "LEDGER#l1", "SK": entry.sk_in(US)},
        "ledger entry": {"PK": "LEDGER#l1", "SK": entry.sk},
        "ledger checkpoint of a Region": {"PK": "LEDGER#l1", "SK": snapshot_sk(EU)},
        "ledger checkpoint": {"PK": "LEDGER#l1", "SK": snapshot_sk()},
        "ledger withdrawal of a Region": {"PK": "LEDGER#l1", "SK": entry.withdrawn_sk("req#1", EU)},
        "ledger withdrawal": {"PK": "LEDGER#l1", "SK": entry.withdrawn_sk("req1")},
        "dirty marker of a Region": {"PK": dirty_pk(US), "SK": marker_sk(1732700000000, "l1")},
        "dirty marker": {"PK": dirty_pk(), "SK": marker_sk(1732700000000, "l1")},
        "region sequence": sequence_key("ORDER", EU),
        "sequence": sequence_key("ORDER"),
        "order": order_key(42),
        "order key": idempotency_key("k1", "sub-1"),
        "region pointer": pointer_key("LAST_ORDER", US),
        "pointer": pointer_key("LAST_ORDER"),
        "operation": operation_key("op1"),
        "expiry checkpoint": CHECKPOINT_KEY,
    }
    assert set(expected) == {w.item for w in writers.rules()}, "a family without a key here: add one"
    for item, key in expected.items():
        found = writers.family_of(str(key["PK"]), str(key["SK"]))
        assert found is not None and found[0].item == item, (item, key, found and found[0].item)
    assert writers.family_of("FOO#1", "META") is None


def check(mode: Mode = Mode.MREC, regions: tuple[str, ...] = (EU, US), **kw: object) -> WriterCheck:
    return WriterCheck(mode, regions, **kw)  # type: ignore[arg-type]


def test_a_per_region_item_written_by_another_region_is_flagged() -> None:
    ok = check()
    ok.write(EU, {"PK": "POST#p1", "SK": f"TALLY#{EU}"}, None, created=True)
    ok.check()
    bad = check()
    bad.write(US, {"PK": "POST#p1", "SK": f"TALLY#{EU}"}, None, created=False)
    with pytest.raises(WriterRuleViolation, match="per-Region item of eu-west-1"):
        bad.check()
    bad.check()  # reported once


def test_a_family_whose_rule_is_removed_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same write as the test above, by its own Region, once the tally's rule is gone: a key no
    family declares fails the run (a new family without a rule fails the proof)."""
    import counters.store.post_items as post_items

    shapes = tuple(w for w in POST_WRITERS if w.item != "like tally of a Region")
    monkeypatch.setattr(post_items, "TABLE", Table("post_items", shapes, {}))
    undeclared = check()
    undeclared.write(EU, {"PK": "POST#p1", "SK": f"TALLY#{EU}"}, None, created=True)
    with pytest.raises(WriterRuleViolation, match="no item family declares"):
        undeclared.check()


def test_an_undeclared_key_is_flagged() -> None:
    for mode, regions in ((Mode.MREC, (EU, US)), (Mode.MRSC, (EU, US, USW))):
        gate = check(mode, regions)
        gate.write(EU, {"PK": "WIDGET#1", "SK": "META"}, None, created=True)
        with pytest.raises(WriterRuleViolation, match="no item family declares"):
            gate.check()


def test_each_kind_of_rule_is_checked() -> None:
    home, other = home_of("r1", (EU, US)), ({EU, US} - {home_of("r1", (EU, US))}).pop()
    cases: list[tuple[str, dict[str, str], dict[str, object] | None, bool, bool]] = [
        # (Region, key, image, created, allowed)
        (home, {"PK": "RES#r1", "SK": "META"}, None, True, True),
        (other, {"PK": "RES#r1", "SK": "META"}, None, True, False),  # home of the id
        (home, {"PK": f"RES#r1@{other}", "SK": "SHARE"}, None, True, True),  # created with the resource at home
        (home, {"PK": f"RES#r1@{other}", "SK": "SHARE"}, None, False, False),  # then only its Region
        (other, {"PK": f"RES#r1@{other}", "SK": "SHARE"}, None, False, True),
        (EU, {"PK": "RES#r1#XFER", "SK": "t1"}, {"source": EU, "target": US}, True, True),
        (US, {"PK": "RES#r1#XFER", "SK": "t1"}, {"source": EU, "target": US}, True, False),  # the source writes it
        (US, {"PK": "RES#r1#XFER", "SK": "t1#IN"}, {"source": EU, "target": US}, True, True),  # the target its receipt
        (EU, {"PK": "LEDGER#l1", "SK": "SNAPSHOT"}, None, True, False),  # refused on MREC
        (EU, {"PK": "SEQ#ORDER", "SK": "META"}, None, False, True),  # the first home writer
        (US, {"PK": "SEQ#ORDER", "SK": "META"}, None, False, False),  # one home per table
        (US, {"PK": "ORDER#7", "SK": "META"}, None, True, True),
        (EU, {"PK": "ORDER#7", "SK": "META"}, None, True, False),  # created once, in US
        (EU, {"PK": "POST#p1#S0", "SK": "LIKE#USER#u1"}, None, False, True),  # any Region
        (US, {"PK": "POST#p1#S0", "SK": "LIKE#USER#u1"}, None, False, True),
    ]
    gate = check()
    for region, key, image, created, allowed in cases:
        before = len(gate.violations)
        gate.write(region, key, image, created=created)
        assert (len(gate.violations) == before) is allowed, (region, key, gate.violations[before:])


def test_the_home_region_given_is_the_only_home() -> None:
    gate = check(home_region=US)
    gate.write(EU, {"PK": "SEQ#ORDER", "SK": "META"}, None, created=True)
    assert gate.violations and "home Region us-east-1" in gate.violations[0]


def test_rules_name_a_key_they_can_check() -> None:
    with pytest.raises(ValueError, match="home_id"):
        WriterRule("x", "X#<id>", "META", writers.HOME, writers.HOME_OF_ID, writers.ANY, "why")
    with pytest.raises(ValueError, match="region_attribute"):
        WriterRule("x", "X#<id>", "META", writers.HOME, writers.per_region("sum"), writers.ANY, "why")
    assert {w.rule(GlobalTableMode.MREC).kind for w in writers.rules()} >= {
        Kind.PER_REGION,
        Kind.HOME,
        Kind.HOME_OF_ID,
        Kind.ONCE,
        Kind.ANY,
        Kind.REFUSED,
    }


def test_the_home_of_an_id_never_changes() -> None:
    """Pinned: a deployed table's homes must not move with a new hash (each Region decides alone)."""
    assert [home_of(i, (EU, US)) for i in ("ov", "sq1", "r0", "r1", "p1", "p2")] == [EU, EU, EU, US, US, EU]
    assert [home_of(i, (US, US2, USW)) for i in ("ov", "r1", "keep", "p2")] == [US, USW, USW, US2]
    assert home_of("ov", (US, EU)) == home_of("ov", (EU, US))  # the sorted list, whatever the order given


def test_only_the_home_creates_on_mrec_and_every_region_elsewhere() -> None:
    home, other = EU, US
    POSTS.admit("create:hot", MREC[home], item_id="sq1")
    with pytest.raises(WrongRegion) as refused:
        RESOURCES.admit("create", MREC[other], item_id="sq1")
    assert (refused.value.region, refused.value.status, refused.value.code) == (home, 409, "wrong_region")
    assert refused.value.details() == {"region": home}
    assert str(refused.value).startswith("resource 'sq1' is created only in its home Region eu-west-1 on this MREC global table")
    mrsc = Topology(GlobalTableMode.MRSC, US2, (US, US2, USW))
    for topology in (mrsc, ONE_REGION):
        POSTS.admit("create:hot", topology, item_id="sq1")
        RESOURCES.admit("create", topology, item_id="ov")


def test_an_id_the_service_draws_is_homed_here() -> None:
    for region, topology in MREC.items():
        assert all(home_of(POST.fresh_id(topology), (EU, US)) == region for _ in range(20))


def test_a_transfer_id_names_its_source_region() -> None:
    assert transfer_id("r", EU, "k") == transfer_id("r", EU, "k")
    assert transfer_id("r", EU, "k") != transfer_id("r", US, "k")


def test_the_proof_reports_a_violation_as_a_violated_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import proof.regions as regions

    def scenario(endpoint: str, seed: int, count: int) -> list[object]:
        raise WriterRuleViolation("1 write(s) against their writer rule: us-east-1 wrote WIDGET#1")

    monkeypatch.setitem(regions.REGISTRY, "widgets", scenario)
    (row,) = regions.run(["widgets"], "http://127.0.0.1:1", 1, 1)
    assert row.verdict == "VIOLATED" and "WIDGET#1" in row.notes[0]


@pytest.mark.parametrize(
    "shape", sorted({s for w in writers.rules() for s in (w.pk, w.sk)} | {"RES#<id>@<Region>[#<n>]", "X#<region>#<ms:13>"})
)
def test_a_rule_is_checked_against_the_groups_its_shape_compiles_to(shape: str) -> None:
    """A rule is checked at declaration with the key shape's groups read without compiling it (the
    shapes compile on the first match, not at an API handler's cold start): the same groups."""
    assert writers._groups(shape) == set(writers._pattern(shape).groupindex)
