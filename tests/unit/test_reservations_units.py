"""Pure pieces of the approaches and sharding: no network."""

from __future__ import annotations

from typing import Any

import pytest

from counters.primitives.approaches import Reason, TakeFacts, approach_class, rejection
from counters.primitives.approaches.crt import client_request_token
from counters.primitives.approaches.occ_history import resolve, tag_for
from counters.primitives.sharding import plan, shard_key, split_capacity
from counters.services.reservations import reservation_id
from counters.store.expr import Cond, Placeholders
from counters.store.resources_counters import Counter, guard

FITS_CEILING, FITS_FLOOR = "#available >= :v0", "#reserved >= :v0"  # the thresholds, as the store renders them


def condition(cond: Cond) -> str:
    return cond.render(Placeholders())


def test_split_capacity_sums_and_differs_by_at_most_one() -> None:
    assert split_capacity(10, 3) == [4, 3, 3]
    assert split_capacity(2, 4) == [1, 1, 0, 0]
    for capacity in range(0, 50):
        for shards in range(1, 8):
            parts = split_capacity(capacity, shards)
            assert sum(parts) == capacity and max(parts) - min(parts) <= 1


def test_plan_takes_from_the_fullest_shards_first() -> None:
    keys = [shard_key("r", n) for n in range(3)]
    items = [Counter(available=1), Counter(available=3), Counter(available=2)]
    assert plan(keys, items, 4) == [(keys[1], 3), (keys[2], 1)]
    assert sum(part for _, part in plan(keys, items, 6)) == 6


def test_guard_picks_the_threshold_by_sign() -> None:
    assert FITS_CEILING in condition(guard(3, True)) and FITS_FLOOR in condition(guard(-3, True))
    assert condition(guard(3, False)) == "attribute_exists(#PK)"


def test_rejection_reason_from_all_old() -> None:
    assert rejection(None) == ("missing", TakeFacts())
    assert rejection(Counter.of({"available": 2, "reserved": 8})) == ("threshold", TakeFacts(available=2, reserved=8))


@pytest.mark.parametrize(
    ("item", "verdict"),
    [
        (Counter(state={"version": 5, "tags": ["a", "b", "mine"]}), "applied"),
        (Counter(state={"version": 4, "tags": ["a", "b"]}), "not_applied"),  # nobody wrote: version unchanged
        (Counter(state={"version": 6, "tags": ["a", "b", "c", "d"]}), "not_applied"),  # slot of version 5 is "c": someone else's
        (Counter(state={"version": 9, "tags": ["x", "y", "z"]}), "unknown"),  # versions 7..9 only: slot 5 fell off
        (None, "unknown"),
    ],
)
def test_occ_history_resolution(item: Counter | None, verdict: str) -> None:
    assert resolve(item, 4, "mine") == verdict


def test_tokens_are_deterministic_and_bounded() -> None:
    assert tag_for("k") == tag_for("k") and len(tag_for("k")) == 16 and tag_for(None) != tag_for(None)
    assert len(client_request_token("a" * 500, "t|RES#x")) == 36
    assert reservation_id("r1", "k") == reservation_id("r1", "k") != reservation_id("r2", "k")


def test_registry_knows_each_approach_by_its_flags_and_not_the_ledger() -> None:
    from counters.primitives.approaches import NAMES, Approach

    for name in NAMES:  # shardable exactly when the class splits a take over shards itself
        cls = approach_class(name)
        assert cls.shardable == (cls.apply_split is not Approach.apply_split), name
    with pytest.raises(KeyError):
        approach_class("ledger")


def test_the_module_table_is_the_registry() -> None:
    """The approaches' table on the package's page is [`table`][...] of the registry, row for row."""
    from counters.primitives import approaches

    assert approaches.table() in (approaches.__doc__ or ""), approaches.table()


def test_each_approach_reads_its_own_settings_and_names_the_variable_when_wrong() -> None:
    from counters.core.settings import SettingsError
    from counters.primitives.approaches import REGISTRY, settings
    from counters.services.reservations import ReservationSettings

    assert set(settings({})) == {name for name, entry in REGISTRY.items() if entry.options}
    assert settings({})["atomic"] == {"policy": "under"} and settings({})["set"] == {"max_tokens": 250}
    read = ReservationSettings.from_env({"TABLE_NAME": "t", "ATOMIC_POLICY": "over", "SET_MAX_TOKENS": "7"}).approach_options
    assert read["atomic"] == {"policy": "over"} and read["set"] == {"max_tokens": 7} and read["occ_history"] == {"history": 32}
    with pytest.raises(SettingsError, match="ATOMIC_POLICY must be under or over"):
        ReservationSettings.from_env({"TABLE_NAME": "t", "ATOMIC_POLICY": "sideways"})
    with pytest.raises(SettingsError, match="SET_MAX_TOKENS='many' is not a valid int"):
        settings({"SET_MAX_TOKENS": "many"})
    for name, entry in REGISTRY.items():  # every option is a keyword of its approach's constructor
        for option in entry.options:
            assert option.name in entry.cls.__init__.__code__.co_varnames, (name, option.name)


def test_the_service_hands_its_own_store_to_every_approach() -> None:
    """One store per service: the approaches write through it (its Region policy and Region), none builds its own."""
    from counters.core.regions import GlobalTableMode, Topology
    from counters.primitives.approaches import NAMES
    from counters.services.reservations import Reservations

    mrec = Reservations("t", topology=Topology(GlobalTableMode.MREC, "eu-west-1", ("eu-west-1", "us-east-1")))
    assert mrec.store.region == "eu-west-1"
    for name in NAMES:
        assert mrec.shared.approach(name).store is mrec.store, name


def test_every_approach_is_registered_once_with_the_refusal_it_names() -> None:
    """The registry is the one list: every approach module is in it, its class carries its name, and the
    refusal it names is its take's operation in the resources' table, refused in some mode (take:<name>)."""
    import pkgutil

    from counters.primitives import approaches
    from counters.primitives.approaches import NAMES, REGISTRY
    from counters.store.resources_counters import TABLE

    modules = {m.name for m in pkgutil.iter_modules(approaches.__path__)}
    assert set(REGISTRY) == modules and tuple(REGISTRY) == NAMES
    assert all(entry.cls.name == name for name, entry in REGISTRY.items())
    refusals = {entry.refusal for entry in REGISTRY.values() if entry.refusal is not None}
    assert refusals == {f"take:{name}" for name in REGISTRY} & {op for op, row in TABLE.ops.items() if row.refusing()}


def test_the_service_refuses_what_the_registry_says_a_table_without_transactions_cannot_take() -> None:
    from counters.core.errors import UnsupportedInMode
    from counters.core.regions import GlobalTableMode, Topology
    from counters.primitives.approaches import REGISTRY
    from counters.services.reservations import Reservations

    mrsc = Reservations("t", topology=Topology(GlobalTableMode.MRSC, "eu-west-1", ("eu-west-1", "us-east-1", "us-west-2")))
    for name, entry in REGISTRY.items():
        if entry.refusal is None:
            mrsc.shared.refuse_in_mode(name, 1)
        else:
            with pytest.raises(UnsupportedInMode, match=f"strategy '{name}' is not available on an MRSC global table"):
                mrsc.shared.refuse_in_mode(name, 1)
    with pytest.raises(UnsupportedInMode, match="write sharding"):
        mrsc.shared.refuse_in_mode("atomic", 2)
    for name in REGISTRY:
        Reservations("t").shared.refuse_in_mode(name, 2)  # one Region: every strategy, sharded or not


def test_mrsc_replicated_write_conflict_is_a_retryable_conflict() -> None:
    from botocore.exceptions import ClientError

    from counters.core.failures import Failure, classify

    exc = ClientError({"Error": {"Code": "ReplicatedWriteConflictException", "Message": "x"}}, "UpdateItem")
    classified = classify(exc)
    assert classified is not None and classified.kind is Failure.CONFLICT


def test_escrow_shares_default_to_an_even_split_and_keys_are_per_region() -> None:
    from counters.store.resources_counters import Resource

    resource = Resource("r", 10, "crt", 2, shares={"eu-west-1": 5, "us-east-1": 5}, region="us-east-1")
    assert [k["PK"] for k in resource.counter_keys] == ["RES#r@us-east-1#0", "RES#r@us-east-1#1"]
    with pytest.raises(ValueError, match="no share"):
        resource.keys_in("ap-south-1")


class BusySnapshot:
    """A shardable approach whose shards each refuse the quantity (threshold) and whose snapshot
    read outlasts its retry budget (the engine's ContentionError, e.g. read timeouts under load)."""

    name, shardable = "busy", True

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.store = SimpleNamespace(snapshot=self.snapshot)
        self.snapshots = 0

    def shard_order(self, count: int, token: str | None, rng: object) -> list[int]:
        return list(range(count))

    def apply(self, key: object, quantity: int, **_: object) -> object:
        from counters.core.outcome import Capacity, Outcome
        from counters.primitives.approaches import Reason, result

        return result(Outcome.REJECTED, Capacity(), 1, Reason.THRESHOLD)

    def snapshot(self, keys: object, capacity: object) -> list[Counter]:
        from counters.core.errors import ContentionError

        self.snapshots += 1
        raise ContentionError("DynamoDB is busy (ReadTimeoutError); retry the request", cause_code="ReadTimeoutError")


def test_a_sharded_take_whose_snapshot_stays_busy_answers_contention_not_an_exception() -> None:
    """Every shard definitely refused the quantity and the snapshot cannot be read: nothing was
    taken, so the answer is the outcome ``contention`` (re-send the same request), like any busy take."""
    from counters.core.outcome import Outcome
    from counters.primitives.sharding import ShardReason, take

    approach = BusySnapshot()
    answer = take(approach, [shard_key("r", n) for n in range(4)], 2, token="t")  # type: ignore[arg-type]
    assert (answer.outcome, answer.reason, approach.snapshots) == (Outcome.CONTENTION, ShardReason.SHARDS_BUSY, 1)


def test_every_approach_answers_take_facts_never_a_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each approach's answers (a take that applies, one the threshold refuses, a re-sent one, a
    give-back) and a sharded take's are a [`TakeResult`] whose ``value`` is [`TakeFacts`]: the
    reservations service reads ``value.allocation``/``.marker``/``.available`` with no narrowing,
    so a plain dict from one approach would reach it unchecked (on moto: typing, not concurrency)."""
    from counters.core.outcome import Outcome
    from counters.primitives.approaches import REGISTRY, TakeResult, create
    from counters.primitives.sharding import take
    from counters.store.items import to_item
    from tests.conftest import moto_table

    def facts(answer: object) -> TakeFacts:
        assert isinstance(answer, TakeResult), answer
        assert type(answer.value) is TakeFacts, f"{name}: {answer.value!r}"
        return answer.value

    table = "tally-typed-takes"
    with moto_table(monkeypatch, table) as ddb:
        for name in REGISTRY:
            approach = create(name, table)
            keys = [shard_key(f"r-{name}", n) for n in range(2)]
            for key in keys:
                ddb.put_item(TableName=table, Item=to_item({**key, **approach.initial_attributes(3)}))
            taken = approach.apply(keys[0], 2, token=f"{name}-1", record={"resourceId": f"r-{name}"})
            assert taken.outcome is Outcome.APPLIED and facts(taken).available is None
            refused = approach.apply(keys[0], 2, token=f"{name}-2", record={"resourceId": f"r-{name}"})
            assert (refused.outcome, refused.reason, facts(refused).available) == (Outcome.REJECTED, Reason.THRESHOLD, 1)
            facts(approach.apply(keys[0], 2, token=f"{name}-1", record={"resourceId": f"r-{name}"}))  # re-sent
            if not approach.writes_record:
                facts(approach.apply(keys[0], -2, token=approach.give_back_token(f"{name}-1")))
            if approach.shardable:
                split = take(approach, keys, 4, token=f"{name}-3", record={"resourceId": f"r-{name}"})
                assert split.outcome is Outcome.APPLIED and sum((facts(split).allocation or {}).values()) == 4
                sold_out = take(approach, keys, 9, token=f"{name}-4")
                assert sold_out.outcome is Outcome.REJECTED and facts(sold_out).available is not None


# ----------------------------------------------------------------------------- the family's shape: composition
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "counters" / "counters"
FAMILY = [
    *sorted((LAYER / "services" / "reservations").glob("*.py")),
    *sorted((LAYER / "primitives" / "approaches").glob("*.py")),
    *sorted((LAYER / "store").glob("resources*.py")),
]


def _module(path: Any) -> str:
    return ".".join(path.relative_to(LAYER.parent).with_suffix("").parts).removesuffix(".__init__")


def test_no_class_of_the_reservations_family_is_more_than_two_deep() -> None:
    """Plain composition: a class is a base's direct subclass at most (records, enums, typed dicts and the
    settings, which combine by inheritance, aside)."""
    import enum
    import importlib
    import inspect

    from counters.core.settings import Settings

    for path in FAMILY:
        module = importlib.import_module(_module(path))
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or issubclass(cls, (enum.Enum, tuple, dict, BaseException, Settings)):
                continue
            chain = [c for c in cls.__mro__ if c is not object and c.__module__.startswith("counters.")]
            assert len(chain) <= 2, f"{module.__name__}.{name}: {[c.__name__ for c in chain]}"


def test_no_method_of_the_reservations_family_only_forwards_to_another_object() -> None:
    """No façade: a method whose body is ``return self.<part>.<method>(<its own parameters>)`` is a forward."""
    import ast

    for path in FAMILY:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.args.args or node.args.args[0].arg != "self":
                continue
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
                continue
            call, params = body[0].value, [a.arg for a in [*node.args.args[1:], *node.args.kwonlyargs]]
            target = call.func
            forwarded = [a.id for a in call.args if isinstance(a, ast.Name)] + [
                k.value.id for k in call.keywords if isinstance(k.value, ast.Name)
            ]
            through_part = isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
            through_part = through_part and isinstance(target.value.value, ast.Name) and target.value.value.id == "self"
            assert not (through_part and params and forwarded == params), f"{path.name}:{node.lineno} {node.name} only forwards"


def test_the_reservations_package_exports_at_most_fifteen_names() -> None:
    import counters.services.reservations as package

    public = [n for n in dir(package) if not n.startswith("_") and not isinstance(getattr(package, n), type(package))]
    assert len(package.__all__) <= 15 and set(public) - {"annotations"} <= set(package.__all__), public


def test_nothing_imports_from_store_resources_what_another_module_owns() -> None:
    """store/resources.py re-exports nothing: every name imported from it is defined there."""
    import ast

    tree = ast.parse((LAYER / "store" / "resources.py").read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    wrong = []
    for folder in ("layers", "functions", "proof", "bench", "tests", "devstack", "scripts", "testkit"):
        for path in (ROOT / folder).rglob("*.py"):
            if ".venv" in path.parts or "node_modules" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "counters.store.resources":
                    wrong += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name not in defined]
    assert not wrong, wrong
