"""bench/hot.py's arithmetic for the standard vs hot table: tally lag, percentiles, the cost model."""

from __future__ import annotations

import pytest

from bench.hot import LAMBDA_WINDOW, PostRow, cost_model, lag_samples, percentile, post_table, verdict


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


def row(mode: str, model: str, rate: float, likes: int, throttles: int = 0, load: float = 1.0, window: float = 0.0) -> PostRow:
    modelled = model != "no model"
    return PostRow(
        mode=mode,
        model=model,
        clients=8,
        rate=rate,
        likes=likes,
        gave_up=0,
        throttles=throttles,
        conflicts=0,
        like_wcu_reported=1.0,
        agg_wcu_reported=0.1,
        like_wcu_model=1.0 if modelled else None,
        agg_wcu_model=0.1 if modelled else None,
        like_wcu_cost=1.0 if mode == "hot" else 4.0,
        agg_wcu_cost=0.1 if mode == "hot" else 0.0,
        agg_writes=10,
        agg_retries=0,
        like_retries=throttles,  # every throttle here is a like's
        reads=100,
        rcu_reported=1.0,
        rcu_model=1.0 if modelled else None,
        lags=[0.1] * 98 + [0.5, 3.0],
        lag_missing=0,
        drained=0.05,
        audit=f"{likes} = {likes}",
        lanes=8 if mode == "hot" else 1,
        load=load,
        window=window,
    )


def test_verdict_model_binds_when_hot_reaches_the_ceiling_throttled_and_the_machine_does_more() -> None:
    rows = [
        row("standard", "no model", 200.0, 2000),
        row("standard", "m", 2.5, 30, throttles=1500),
        row("hot", "m", 155.0, 1800, throttles=400),
        row("hot", "no model", 240.0, 2800),
    ]
    text = "\n".join(verdict(rows, scale=50))
    assert "**62.0x** (target >= 10x: met)" in text
    assert "p99 500 ms" in text  # nearest rank: the 99th of 100 lags
    assert "160 likes/s" in text and "the model binds: the rate is at its ceiling" in text
    assert "standard: 2.5 likes/s under the model (50.0 throttles" in text.replace("- What binds standard: ", "standard: ")
    assert "machine binds" not in text
    assert "batching window" not in text  # no windowed row


def test_verdict_reports_the_row_with_lambdas_batching_window_apart() -> None:
    window = LAMBDA_WINDOW  # the template's, read from its event source
    rows = [row("standard", "m", 2.5, 30), row("hot", "m", 155.0, 1800, throttles=400), row("hot", "m", 150.0, 1700, window=window)]
    text = "\n".join(verdict(rows, scale=50))
    assert "**62.0x**" in text  # from the local stack's row, not the windowed one
    assert f"{window:g} s batching window emulated" in text and "170 likes per aggregator write" in text
    assert f"| hot, {window:g} s batching window |" in post_table(rows)


def test_verdict_machine_binds_when_hot_stays_below_the_ceiling_unthrottled() -> None:
    rows = [row("standard", "m", 6.0, 60, throttles=600), row("hot", "m", 150.0, 1500), row("hot", "no model", 155.0, 1550)]
    text = "\n".join(verdict(rows, scale=20))
    assert "400 likes/s" in text and "**the machine binds**" in text and "lower bound" in text
    assert "25.0x" in text


def test_post_table_has_one_line_per_row_and_the_ratio_against_standard_under_the_same_limits() -> None:
    rows = [row("standard", "m", 2.0, 20), row("hot", "m", 100.0, 1000)]
    lines = post_table(rows).splitlines()
    assert len(lines) == 4
    assert "| 50.0x |" in lines[3] and "1.00 + 0.10 = 1.10" in lines[3] and "100 / 500 (100)" in lines[3]
