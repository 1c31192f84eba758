"""The linearizability checker checks itself: violating histories are refused, legal ones (with
concurrency and unknown outcomes) accepted, and a client that records a timed-out call as failed
is caught."""

from __future__ import annotations

import random
from typing import Any

import pytest

from proof.linearizability import (
    FAIL,
    INFINITY,
    OK,
    BoundedCounter,
    Call,
    GrowOnlySet,
    LikeSet,
    MonotonicRegister,
    Recorder,
    SumRegister,
    check,
    resent,
    witnessed,
)


def c(input: tuple[Any, ...], output: Any, invoked: float, returned: float = INFINITY, key: str = "r") -> Call:
    return Call(key, input, output, invoked, returned)


def verdict(model: Any, *calls: Call) -> str:
    return check(model, calls).result


COUNTER = BoundedCounter(capacity=5)


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param([c(("reserve", 2), OK, 0, 1), c(("read",), 0, 2, 3)], id="an acknowledged take missed by a later read"),
        pytest.param([c(("reserve", 1), OK, 0, 1), c(("read",), 1, 2, 3), c(("read",), 0, 4, 5)], id="a read going back"),
        pytest.param([c(("reserve", 3), OK, 0, 1), c(("reserve", 3), OK, 2, 3)], id="above capacity"),
        pytest.param([c(("reserve", 1), FAIL, 0, 1)], id="refused though it fitted"),
        pytest.param([c(("reserve", 2), OK, 0, 1), c(("read",), 4, 2, 3)], id="applied twice"),
        pytest.param([c(("read",), 2, 0, 1), c(("reserve", 2), None, 5)], id="an unknown call seen before it was invoked"),
        pytest.param([c(("reserve", 2), None, 0), c(("read",), 2, 1, 2), c(("read",), 0, 3, 4)], id="an unknown call undone"),
        pytest.param(
            [c(("reserve", 1), OK, 0, 10), c(("read",), 1, 1, 2), c(("read",), 0, 3, 4)],
            id="concurrent take seen, then unseen",
        ),
        pytest.param([c(("release", 1), OK, 0, 1)], id="a release below 0"),
    ],
)
def test_violating_counter_histories_are_refused(calls: list[Call]) -> None:
    assert verdict(COUNTER, *calls) == "NOT LINEARIZABLE"


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(
            [c(("reserve", 1), OK, 0, 10), c(("read",), 0, 1, 2), c(("read",), 1, 3, 4), c(("read",), 1, 11, 12)],
            id="a concurrent take seen from some point on",
        ),
        pytest.param(
            [c(("reserve", 1), OK, 0, 10), c(("reserve", 2), OK, 0, 10), c(("read",), 2, 1, 2), c(("read",), 3, 3, 4)],
            id="two concurrent takes in the order the reads saw",
        ),
        pytest.param([c(("reserve", 2), None, 0), c(("read",), 0, 5, 6), c(("read",), 2, 7, 8)], id="an unknown call applied late"),
        pytest.param([c(("reserve", 2), None, 0), c(("read",), 0, 100, 101)], id="an unknown call that never applied"),
        pytest.param(
            [c(("reserve", 4), OK, 0, 1), c(("reserve", 2), FAIL, 2, 3), c(("release", 4), OK, 4, 5), c(("read",), 0, 6, 7)],
            id="refused when it did not fit, then released",
        ),
        pytest.param([c(("reserve", 3), OK, 0, 1), c(("read",), 3, 1, 2)], id="a call and a read at the same instant overlap"),
    ],
)
def test_legal_counter_histories_are_accepted(calls: list[Call]) -> None:
    assert verdict(COUNTER, *calls) == "linearizable"


def test_one_sided_models() -> None:
    twice = [c(("reserve", 2), OK, 0, 1), c(("read",), 4, 2, 3)]
    assert verdict(BoundedCounter(5), *twice) == "NOT LINEARIZABLE"  # under: at most once
    assert verdict(BoundedCounter(5), *resent(twice, 2)) == "linearizable"  # over: a re-send may apply too
    assert verdict(BoundedCounter(9), *resent(twice, 2), c(("read",), 6, 4, 5)) == "NOT LINEARIZABLE"  # at most `sends`
    spread = [c(("reserve", 2), OK, 0, 10), c(("read",), 2, 1, 2), c(("read",), 4, 3, 4), c(("read",), 4, 11, 12)]
    assert verdict(BoundedCounter(9), *resent(spread, 2)) == "linearizable"  # each send at its own point
    late = [c(("reserve", 2), OK, 0, 1), c(("read",), 2, 2, 3), c(("read",), 4, 4, 5)]
    assert verdict(BoundedCounter(9), *resent(late, 2)) == "linearizable"  # a timed-out send landing after the answer
    missed = [c(("reserve", 2), OK, 0, 1), c(("read",), 0, 2, 3)]
    assert verdict(BoundedCounter(5), *resent(missed, 4)) == "NOT LINEARIZABLE"  # never below what was acknowledged
    refused = [c(("reserve", 2), FAIL, 0, 1), c(("read",), 2, 2, 3)]
    assert verdict(BoundedCounter(1, strict_fail=False), *resent(refused, 4)) == "NOT LINEARIZABLE"  # a refusal applied nothing
    loose = BoundedCounter(5, strict_fail=False)
    assert verdict(loose, c(("reserve", 1), FAIL, 0, 1), c(("read",), 0, 2, 3)) == "linearizable"
    assert verdict(loose, c(("reserve", 1), FAIL, 0, 1), c(("read",), 1, 2, 3)) == "NOT LINEARIZABLE"


def test_other_models() -> None:
    assert verdict(SumRegister(), c(("append", 3), OK, 0, 1), c(("append", -1), None, 0), c(("read",), 2, 5, 6)) == "linearizable"
    assert verdict(SumRegister(), c(("append", 3), OK, 0, 1), c(("read",), 0, 5, 6)) == "NOT LINEARIZABLE"
    likes = [c(("like", "a"), OK, 0, 1), c(("like", "a"), OK, 2, 3), c(("like", "b"), None, 2)]
    assert verdict(LikeSet(), *likes, c(("tally",), 1, 4, 5), c(("member", "a"), True, 4, 5)) == "linearizable"
    assert verdict(LikeSet(), *likes, c(("tally",), 3, 4, 5)) == "NOT LINEARIZABLE"  # a like counted twice
    assert verdict(LikeSet(), *likes, c(("unlike", "a"), OK, 6, 7), c(("member", "a"), True, 8, 9)) == "NOT LINEARIZABLE"
    ids = [c(("add", "k1"), 1, 0, 1), c(("add", "k2"), 2, 0, 1), c(("add", "k1"), 1, 2, 3)]
    assert verdict(GrowOnlySet(), *ids, c(("members",), frozenset({1, 2}), 4, 5)) == "linearizable"
    assert verdict(GrowOnlySet(), *ids, c(("add", "k3"), 2, 4, 5)) == "NOT LINEARIZABLE"  # one id, two keys
    assert verdict(GrowOnlySet(), *ids, c(("add", "k1"), 3, 4, 5)) == "NOT LINEARIZABLE"  # one key, two ids
    pointer = [c(("advance", 3), OK, 0, 1), c(("advance", 1), OK, 2, 3), c(("advance", 7), None, 2)]
    assert verdict(MonotonicRegister(), *pointer, c(("read",), 3, 4, 5), c(("read",), 7, 6, 7)) == "linearizable"
    assert verdict(MonotonicRegister(), *pointer, c(("read",), 1, 4, 5)) == "NOT LINEARIZABLE"  # it went back


def test_partitions_are_checked_apart_and_named() -> None:
    calls = [c(("reserve", 1), OK, 0, 1, key="a"), c(("read",), 1, 2, 3, key="a"), c(("reserve", 1), OK, 0, 1, key="b")]
    calls.append(c(("read",), 0, 2, 3, key="b"))
    found = check(COUNTER, calls)
    assert (found.result, found.bad, found.partitions, found.calls) == ("NOT LINEARIZABLE", ["b"], 2, 4)


def sequential_history(rng: random.Random, n: int, capacity: int) -> list[Call]:
    """A legal history: a sequential execution, each call's window stretched around its point."""
    state, calls = 0, []
    for t in range(n):
        point = 10.0 * t
        invoked, returned = point - rng.uniform(0, 40), point + rng.uniform(0, 40)
        if rng.random() < 0.4:
            calls.append(c(("read",), state, invoked, returned))
            continue
        q = rng.randint(1, 3)
        kind = "reserve" if rng.random() < 0.7 else "release"
        after = state + q if kind == "reserve" else state - q
        fits = 0 <= after <= capacity
        state = after if fits else state
        output = OK if fits else FAIL
        if fits and rng.random() < 0.1:
            calls.append(c((kind, q), None, invoked))  # applied, the caller never learned it
        elif not fits and rng.random() < 0.1:
            calls.append(c((kind, q), None, invoked))  # not applied, never learned either
        else:
            calls.append(c((kind, q), output, invoked, returned))
    return calls


@pytest.mark.parametrize("seed", range(30))
def test_random_legal_histories_are_accepted_and_a_corrupted_read_refused(seed: int) -> None:
    rng = random.Random(seed)
    calls = sequential_history(rng, 120, capacity=12)
    assert check(BoundedCounter(12), calls).result == "linearizable"
    reads = [i for i, call in enumerate(calls) if call.input == ("read",)]
    i = rng.choice(reads)
    bad = calls[i]
    calls[i] = Call(bad.key, bad.input, 13, bad.invoked, bad.returned)  # above capacity: no order explains it
    assert check(BoundedCounter(12), calls).result == "NOT LINEARIZABLE"


def test_a_search_past_its_budget_is_unknown_never_linearizable() -> None:
    calls = sequential_history(random.Random(1), 3000, capacity=12)
    assert check(BoundedCounter(12), calls, budget=-1).result == "unknown"


class Store:
    """An in-memory ledger whose write times out after it applied, as a lost reply does."""

    def __init__(self) -> None:
        self.balance = 0

    def append(self, amount: int, *, lose_reply: bool) -> None:
        self.balance += amount
        if lose_reply:
            raise TimeoutError("read timeout")


def record(timed_out_as: str | None) -> list[Call]:
    store, history = Store(), Recorder()
    for amount, lose in ((2, False), (5, True), (1, False)):
        handle = history.invoke("l", "append", amount)
        try:
            store.append(amount, lose_reply=lose)
        except TimeoutError:
            history.complete(handle, timed_out_as)  # the client under test decides what a timeout was
            continue
        history.complete(handle, OK)
    handle = history.invoke("l", "read")
    history.complete(handle, store.balance)
    return history.history()


def test_a_client_that_records_a_timed_out_call_as_failed_is_caught() -> None:
    assert check(SumRegister(), record(timed_out_as=FAIL)).result == "NOT LINEARIZABLE"
    assert check(SumRegister(), record(timed_out_as=None)).result == "linearizable"  # unknown: it may have applied


def brute_force(model: Any, calls: list[Call]) -> bool:
    """Linearizable by enumeration: every order of every subset holding all answered calls."""
    import itertools

    answered = [i for i, call in enumerate(calls) if call.output is not None]
    unknown = [i for i, call in enumerate(calls) if call.output is None]
    for r in range(len(unknown) + 1):
        for extra in itertools.combinations(unknown, r):
            for order in itertools.permutations(answered + list(extra)):
                if witnessed(model, calls, order):
                    return True
    return False


def random_history(rng: random.Random, n: int) -> list[Call]:
    """Any history at all (most not linearizable): random windows, inputs and answers."""
    calls = []
    for _ in range(n):
        invoked = float(rng.randint(0, 8))
        returned = invoked + rng.randint(0, 4)
        kind = rng.choice(["reserve", "reserve", "release", "read"])
        if kind == "read":
            calls.append(c(("read",), rng.randint(0, 4), invoked, returned))
        elif rng.random() < 0.25:
            calls.append(c((kind, rng.randint(1, 2)), None, invoked))
        else:
            calls.append(c((kind, rng.randint(1, 2)), rng.choice([OK, OK, FAIL]), invoked, returned))
    return calls


@pytest.mark.parametrize("seed", range(300))
def test_the_search_agrees_with_enumeration(seed: int) -> None:
    """The search's shortcuts (a matching read or a refusal taken at once, identical calls tried once,
    unknown calls only when they change the state) never change a verdict: small random histories,
    against every order of every subset."""
    rng = random.Random(seed)
    calls = random_history(rng, rng.randint(1, 6))
    model = BoundedCounter(capacity=4, strict_fail=seed % 2 == 0)
    found = check(model, calls).result
    assert found == ("linearizable" if brute_force(model, calls) else "NOT LINEARIZABLE"), calls


def test_a_witness_is_checked_apart_from_the_search() -> None:
    calls = [c(("reserve", 1), OK, 0, 1), c(("read",), 1, 2, 3), c(("reserve", 1), None, 0)]
    assert witnessed(COUNTER, calls, [0, 1])
    assert not witnessed(COUNTER, calls, [1, 0])  # the read before the take it saw, which returned first
    assert not witnessed(COUNTER, calls, [0])  # an answered call left out
    assert not witnessed(COUNTER, calls, [0, 2, 1])  # the read would see 2
    assert not witnessed(COUNTER, calls, [0, 0, 1])  # a call twice


def concurrent_history(
    rng: random.Random, updates: int, reads: int, clients: int, unknown: float, amounts: tuple[int, ...] = (-3, -2, -1, 1, 2, 3, 5)
) -> list[Call]:
    """A ledger as the proof records one: ``clients`` appends at a time, one reader polling, a share of
    the appends unknown to their caller (half of those applied), each call's point within its window."""
    span = updates / clients * 10
    ops = [(rng.uniform(0, span), rng.uniform(1, 20), ("append", rng.choice(amounts))) for _ in range(updates)]
    gap = span / reads
    ops += [(k * gap, rng.uniform(0.2, 0.9) * gap, ("read",)) for k in range(reads)]  # one reader: a read at a time
    timed = sorted(((inv, inv + rng.uniform(0, dur), inv + dur, inp) for inv, dur, inp in ops), key=lambda o: o[1])
    state, calls = 0, []
    for invoked, _point, returned, inp in timed:
        if inp == ("read",):
            calls.append(c(inp, state, invoked, returned))
            continue
        draw = rng.random()
        if draw < unknown:
            calls.append(c(inp, None, invoked))
            state += inp[1] if draw < unknown / 2 else 0
        else:
            calls.append(c(inp, OK, invoked, returned))
            state += inp[1]
    return calls


@pytest.mark.parametrize("seed", range(3))
def test_a_full_size_history_is_decided(seed: int) -> None:
    """As many calls as the proof's rows record (600 appends 32 at a time, 400 reads, 30% unknown)
    is decided linearizable with a witness (the budget only guards a hang)."""
    calls = concurrent_history(random.Random(seed), 600, 400, 32, 0.3)
    found = check(SumRegister(), calls, budget=120)
    assert found.result == "linearizable", found


def test_a_full_size_set_history_is_decided() -> None:
    """A post's likes as a set (its tally read by one reader): 300 distinct users liking, 32 at a time."""
    rng = random.Random(5)
    calls = [
        Call("p", ("like", f"u{i}"), call.output, call.invoked, call.returned)
        if call.input != ("read",)
        else Call("p", ("tally",), call.output, call.invoked, call.returned)
        for i, call in enumerate(concurrent_history(rng, 300, 300, 32, 0.0, amounts=(1,)))
    ]
    found = check(LikeSet(), calls, budget=120)
    assert found.result == "linearizable", found
