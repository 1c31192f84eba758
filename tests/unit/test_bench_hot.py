"""bench/hot.py's arithmetic for the standard vs hot table: tally lag, percentiles, the cost model."""

from __future__ import annotations

import pytest

from bench.hot import cost_model, lag_samples, percentile


def test_lag_is_the_first_read_at_or_above_n_minus_the_nth_acknowledgement() -> None:
    acks = [1.0, 1.1, 1.2, 2.0]
    reads = [(0.9, 0), (1.05, 0), (1.3, 2), (1.5, 3), (2.4, 4)]
    lags, missing = lag_samples(acks, reads)
    assert missing == 0
    assert lags == pytest.approx([0.3, 0.2, 0.3, 0.4])  # n=1,2 first seen at 1.3; n=3 at 1.5; n=4 at 2.4


def test_inputs_in_any_order_and_a_read_before_its_acknowledgement_is_a_negative_lag() -> None:
    acks = [2.0, 1.0]  # completion order is not n order: the count reached 1 at 1.0, 2 at 2.0
    reads = [(1.8, 2), (0.5, 0)]  # the tally showed 2 before the second caller got its answer
    lags, missing = lag_samples(acks, reads)
    assert (lags, missing) == (pytest.approx([0.8, -0.2]), 0)


def test_a_tally_that_jumps_past_n_counts_from_the_read_that_first_showed_it() -> None:
    acks = [1.0, 1.0, 1.0, 1.0]
    reads = [(1.5, 4), (1.6, 4), (2.0, 5)]
    assert lag_samples(acks, reads)[0] == pytest.approx([0.5] * 4)


def test_a_lower_read_after_a_higher_one_does_not_move_the_first_time_seen() -> None:
    lags, _ = lag_samples([1.0, 1.0], [(1.2, 2), (1.3, 1), (1.4, 2)])
    assert lags == pytest.approx([0.2, 0.2])


def test_warm_up_acknowledgements_are_left_out_and_unseen_counts_are_missing() -> None:
    acks = [1.0, 2.0, 3.0, 4.0]
    reads = [(1.1, 1), (2.5, 2), (3.5, 3)]  # 4 was never read
    lags, missing = lag_samples(acks, reads, since=2.0)
    assert lags == pytest.approx([0.5, 0.5])
    assert missing == 1


def test_no_reads_means_every_count_is_missing() -> None:
    assert lag_samples([1.0, 2.0], []) == ([], 2)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_cost_model_standard_is_two_items_written_transactionally() -> None:
    assert cost_model("standard", 120, 300, likes=10, aggregator_writes=0) == (4.0, 0.0)
    assert cost_model("standard", 120, 1500, likes=10, aggregator_writes=0) == (6.0, 0.0)  # META over 1 KB: 2 WCU, x2


def test_cost_model_hot_is_one_write_plus_the_aggregators_writes_spread_over_the_likes() -> None:
    assert cost_model("hot", 150, 700, likes=1000, aggregator_writes=100) == (1.0, pytest.approx(0.1))
    assert cost_model("hot", 150, 2100, likes=1000, aggregator_writes=100) == (1.0, pytest.approx(0.3))  # META of 3 KB
    assert cost_model("hot", 150, 700, likes=0, aggregator_writes=0) == (1.0, 0.0)
