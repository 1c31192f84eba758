"""The key window's one setting: template parameter IdempotencyWindowDays -> IDEMPOTENCY_WINDOW_DAYS
on every function (the local stack too) -> Settings.idempotency_window_days -> the orders' key records."""

from __future__ import annotations

import pytest

from counters.core.settings import SettingsError
from counters.services.orders import Orders, OrderSettings, window_text
from devstack.template import read_stack


def test_every_function_gets_the_window_from_the_template_default_31_days() -> None:
    stack = read_stack("t")
    assert {fn.environment.get("IDEMPOTENCY_WINDOW_DAYS") for fn in stack.functions.values()} == {"31"}
    assert (
        read_stack("t", params={"IdempotencyWindowDays": "45"}).functions["RetryWorkerFunction"].environment["IDEMPOTENCY_WINDOW_DAYS"]
        == "45"
    )


def test_the_orders_read_it_once_from_their_settings() -> None:
    env = read_stack("t", params={"IdempotencyWindowDays": "2"}).functions["OrdersFunction"].environment
    orders = Orders.from_settings(OrderSettings.from_env({**env, "TABLE_NAME": "t"}))
    assert orders.key_window_seconds == 2 * 24 * 3600
    assert Orders.from_settings(OrderSettings(table_name="t")).key_window_seconds == 31 * 24 * 3600


def test_a_window_below_one_day_is_refused_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="IDEMPOTENCY_WINDOW_DAYS=0"):
        Orders.from_settings(OrderSettings.from_env({"TABLE_NAME": "t", "IDEMPOTENCY_WINDOW_DAYS": "0"}))


def test_the_refusal_names_the_window() -> None:
    assert (window_text(31 * 24 * 3600), window_text(24 * 3600), window_text(90)) == ("31 days", "1 day", "90 s")
