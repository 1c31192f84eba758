"""Each item family's (operation x mode) table (counters.store.tables), applied by its store on every
write: an operation refused in a mode is refused before any call, with the cell's reason; every key
a store writes, driven in each mode, is an item of the operation's cells; a write outside them is
stopped before it is sent; docs/regions.md's refusals are the tables' refused cells."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from counters.core.errors import UnsupportedInMode, WrongRegion
from counters.core.policy import RegionPolicy
from counters.core.regions import ONE_REGION, GlobalTableMode, Topology
from counters.store.base import Guarded
from counters.store.resources import ResourceStore
from counters.store.tables import Op, OutsideTable, Table, admit, operation, refusal, tables
from counters.store.writers import Kind, Rule
from scripts.refusals_table import DOC, rendered

NONE, MREC, MRSC = GlobalTableMode.NONE, GlobalTableMode.MREC, GlobalTableMode.MRSC
EU, US, USW = "eu-west-1", "us-east-1", "us-west-2"
TOPOLOGIES = {
    NONE: ONE_REGION,
    MREC: Topology(MREC, EU, (EU, US), EU),
    MRSC: Topology(MRSC, EU, (EU, US, USW)),
}
OPS = [(table.family, name) for table in tables() for name in table.ops]


def uuid7() -> str:
    """A UUIDv7 of now (a ledger's Idempotency-Key)."""
    h = f"{int(time.time() * 1000):012x}7{uuid.uuid4().hex[:3]}8{uuid.uuid4().hex[:15]}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def homed(topology: Topology, prefix: str = "id") -> str:
    """An id whose home (MREC) is this Region."""
    return next(f"{prefix}{n}" for n in range(1000) if topology.home_of(f"{prefix}{n}") == topology.region)


@pytest.mark.parametrize(("family", "name"), OPS, ids=[f"{f}:{n}" for f, n in OPS])
def test_every_refused_cell_refuses_in_its_modes_only_with_the_one_wording(family: str, name: str) -> None:
    table = next(t for t in tables() if t.family == family)
    row = table.ops[name]
    for mode, topology in TOPOLOGIES.items():
        if mode in row.refusing():
            with pytest.raises(UnsupportedInMode) as refused:
                table.admit(name, topology, item_id=homed(topology), detail="the detail")
            assert str(refused.value) == refusal(row.what, mode, row.rule(mode).reason, "the detail")
            assert str(refused.value).startswith(f"{row.what} is not available on ")
            assert str(refused.value).endswith("; the detail (docs/regions.md)")
            assert row.rule(mode).reason  # the text users read is the cell's
        else:
            table.admit(name, topology, item_id=homed(topology))  # allowed here: no exception


def test_operation_names_are_unique_across_the_tables() -> None:
    for _, name in OPS:
        assert operation(name) is not None
    assert len({name for _, name in OPS}) == len(OPS)


def test_a_home_region_cell_takes_only_at_the_home_of_an_mrec_table() -> None:
    sequences = next(t for t in tables() if t.family == "sequences")
    sequences.admit("take:gapless", Topology(MREC, EU, (EU, US), EU))
    sequences.admit("take:gapless", ONE_REGION)
    with pytest.raises(
        UnsupportedInMode, match="a gapless sequence is taken only in the home Region eu-west-1 .*send the request to eu-west-1"
    ):
        sequences.admit("take:gapless", Topology(MREC, US, (EU, US), EU))
    with pytest.raises(UnsupportedInMode, match="needs a home Region"):
        sequences.admit("take:gapless", Topology(MREC, US, (EU, US)))
    with pytest.raises(UnsupportedInMode, match="which MRSC does not offer"):
        sequences.admit("take:gapless", TOPOLOGIES[MRSC])


def test_a_per_region_cell_refuses_another_regions_part_with_its_reason() -> None:
    transfers = next(t for t in tables() if t.family == "resources_transfers")
    transfers.admit("transfer", TOPOLOGIES[MREC], region=EU)
    with pytest.raises(UnsupportedInMode):
        Table("t", transfers.shapes, {"x": Op("x", (), mrec=transfers.ops["transfer"].mrec)}).admit("x", TOPOLOGIES[MREC], region=US)


def test_a_table_names_only_its_own_items_and_says_why_it_refuses() -> None:
    posts = next(t for t in tables() if t.family == "post_items")
    with pytest.raises(ValueError, match="not shapes of this family"):
        Table("post_items", posts.shapes, {"x": Op("x", ("resource share",))})
    with pytest.raises(ValueError, match="without a reason"):
        Table("post_items", posts.shapes, {"x": Op("x", ("post",), mrec=Rule(Kind.REFUSED))})


def test_the_refusals_table_in_docs_regions_is_current() -> None:
    text = DOC.read_text()
    assert rendered(text) == text, "run: python scripts/refusals_table.py"
    assert rendered(text.replace("(`take:crt`)", "(`strategy:crt`)")) != text.replace("(`take:crt`)", "(`strategy:crt`)")


# -- the stores apply the tables ---------------------------------------------------------------------


class NoCalls:
    """A client no call may reach (a refusal must come first)."""

    calls: list[str]

    def __init__(self) -> None:
        self.calls = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(**_: Any) -> Any:
            self.calls.append(name)
            raise AssertionError(f"{name} was sent before the refusal")

        return call


def test_an_operation_refused_in_a_mode_is_refused_before_any_call() -> None:
    from counters.primitives.sequence import Sequence
    from counters.services.likes import Likes
    from counters.services.reservations import Reservations

    client = NoCalls()
    mrsc, mrec = TOPOLOGIES[MRSC], TOPOLOGIES[MREC]
    likes = Likes("t", dynamodb=client, topology=mrsc, stream_consumers=True)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedInMode, match="a standard post is not available on an MRSC global table"):
        likes.posts.create_post(author_id="a", body="b", mode="standard")
    with pytest.raises(UnsupportedInMode, match="switching a post's mode is not available"):
        Likes("t", dynamodb=client, topology=mrec, stream_consumers=True).posts.switch_mode("p1", "hot")  # type: ignore[arg-type]
    with pytest.raises(WrongRegion, match="post 'p.*' is created only in its home Region us-east-1"):
        Likes("t", dynamodb=client, topology=mrec, stream_consumers=True).posts.create_post(  # type: ignore[arg-type]
            author_id="a", body="b", post_id=homed(Topology(MREC, US, (EU, US), EU), "p"), mode="hot"
        )
    reservations = Reservations("t", dynamodb=client, topology=mrsc)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedInMode, match="strategy 'crt' is not available on an MRSC global table"):
        reservations.create_resource("r1", capacity=5, strategy="crt")
    with pytest.raises(UnsupportedInMode, match="transfers is not available on a single-Region table"):
        Reservations("t", dynamodb=client, stream_consumers=True).escrow.transfer("r1", US, 1, "k")  # type: ignore[arg-type]
    with pytest.raises(UnsupportedInMode, match="a gapless sequence is not available on an MRSC global table"):
        Sequence("t", "ORDER", mode="gapless", dynamodb=client, policy=RegionPolicy.of(mrsc)).next()  # type: ignore[arg-type]
    assert client.calls == []


def test_a_write_outside_the_stores_tables_is_stopped_before_it_is_sent() -> None:
    client = NoCalls()
    store = ResourceStore("t", dynamodb=client, policy=RegionPolicy.of(ONE_REGION))  # type: ignore[arg-type]
    assert isinstance(store.dynamodb, Guarded)
    share = {"PK": {"S": f"RES#r1@{EU}"}, "SK": {"S": "SHARE"}}  # an MREC share: refused on one Region
    with pytest.raises(OutsideTable, match="resource share .* is not written on a single-Region table"):
        store.dynamodb.put_item(TableName="t", Item=share)
    with pytest.raises(OutsideTable, match="not a shape of resources_counters"):
        store.dynamodb.update_item(TableName="t", Key={"PK": {"S": "POST#p1"}, "SK": {"S": "META"}})
    mrec = ResourceStore("t", dynamodb=client, policy=RegionPolicy.of(Topology(MREC, US, (EU, US), EU)))  # type: ignore[arg-type]
    with pytest.raises(OutsideTable, match="a per-Region item of eu-west-1"):  # another Region's share, not created at home
        mrec.dynamodb.transact_write_items(
            TransactItems=[{"Update": {"TableName": "t", "Key": {"PK": {"S": "RES#r0@eu-west-1"}, "SK": {"S": "SHARE"}}}}]
        )
    home = ResourceStore("t", dynamodb=client, policy=RegionPolicy.of(Topology(MREC, EU, (EU, US), EU)))  # type: ignore[arg-type]
    with pytest.raises(OutsideTable, match="a per-Region item of us-east-1"):  # the id's home creates every share, updates only its own
        home.dynamodb.update_item(TableName="t", Key={"PK": {"S": "RES#r0@us-east-1"}, "SK": {"S": "SHARE"}})
    assert client.calls == []


# -- every write a store makes, driven in each mode, is a cell of its tables -------------------------


class Recording:
    """Records each write the stores send (under their guard) and passes every call to ``inner``."""

    WRITES = {"put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"}

    def __init__(self, inner: Any) -> None:
        self.inner, self.written = inner, []  # type: list[tuple[str, str, dict[str, Any] | None]]

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.WRITES:
            return target

        def call(**params: Any) -> Any:
            from counters.store.base import _plain, _written

            for key, image in _written(name, params):
                plain = None if image is None else {k: _plain(v) for k, v in image.items()}
                self.written.append((str(_plain(key["PK"])), str(_plain(key["SK"])), plain))
            return target(**params)

        return call


@contextmanager
def driven(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recording]:
    from tests.conftest import moto_table

    with moto_table(monkeypatch, "TallyTable") as ddb:
        yield Recording(ddb)


def cells(recorded: Recording, topology: Topology, *ops: str) -> list[str]:
    """The recorded writes no cell of ``ops`` admits (each write checked against the op's items and its shape's rule)."""
    families, bad = tables(), []
    for pk, sk, image in recorded.written:
        reasons = []
        for name in ops:
            try:
                admit(families, topology, operation(name), pk, sk, image)
                break
            except OutsideTable as exc:
                reasons.append(str(exc))
        else:
            bad.append(f"{pk} {sk}: " + " / ".join(reasons))
    recorded.written.clear()
    return bad


@pytest.mark.parametrize("mode", [NONE, MREC, MRSC])
def test_each_store_driven_in_each_mode_writes_only_cells_of_its_tables(monkeypatch: pytest.MonkeyPatch, mode: GlobalTableMode) -> None:
    from counters.primitives.ledger import Ledger
    from counters.primitives.sequence import Sequence
    from counters.services.likes import Likes
    from counters.services.reservations import Reservations

    topology = TOPOLOGIES[mode]
    with driven(monkeypatch) as client:
        table = "TallyTable"
        likes = Likes(table, dynamodb=client, topology=topology, stream_consumers=True)  # type: ignore[arg-type]
        post_mode = "hot" if mode is MRSC else "standard"
        post, _ = likes.posts.create_post(author_id="a", body="b", post_id=homed(topology, "p"), mode=post_mode)
        assert client.written and not cells(client, topology, f"create:{post_mode}")
        likes.toggling.like(post["postId"], "u1")
        assert client.written and not cells(client, topology, f"like:{post_mode}")
        reservations = Reservations(table, dynamodb=client, topology=topology)  # type: ignore[arg-type]
        resource = homed(topology, "r")
        reservations.create_resource(resource, capacity=10, strategy="atomic")
        assert client.written and not cells(client, topology, "create")
        taken = reservations.reserve(resource, 2, uuid.uuid4().hex)
        assert client.written and not cells(client, topology, "take", "record")
        reservations.release(resource, taken.body["reservationId"])
        assert client.written and not cells(client, topology, "release", "record")
        ledger = Ledger(table, dynamodb=client, policy=RegionPolicy.of(topology))  # type: ignore[arg-type]
        ledger.append("l1", 5, uuid7())
        assert client.written and not cells(client, topology, "append")
        Sequence(table, "ORDER", dynamodb=client, policy=RegionPolicy.of(topology)).next()  # type: ignore[arg-type]
        assert client.written and not cells(client, topology, "take:fast")
        if mode is not MRSC:
            Sequence(table, "ORDER", mode="gapless", dynamodb=client, policy=RegionPolicy.of(topology)).next()  # type: ignore[arg-type]
            assert client.written and not cells(client, topology, "take:gapless")


def test_the_check_fails_a_write_of_a_family_outside_the_operations_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same drive, asked of a cell that does not write the post: the recorded write is named."""
    from counters.services.likes import Likes

    with driven(monkeypatch) as client:
        Likes("TallyTable", dynamodb=client, stream_consumers=True).posts.create_post(author_id="a", body="b", mode="hot")  # type: ignore[arg-type]
        bad = cells(client, ONE_REGION, "like:hot")
        assert len(bad) == 1 and bad[0].startswith("POST#") and "not a hot post's like's items" in bad[0]
