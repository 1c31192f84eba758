"""``LikesMaxSpread`` (template) -> ``LIKES_MAX_SPREAD`` -> the growth cap of the likes service, in
both functions that write likes; growth stays off where it is refused (global tables)."""

from __future__ import annotations

import pytest

from counters.services.likes import Likes
from counters.services.likes.model import LikeSettings
from devstack.template import read_stack

BASE = {"TABLE_NAME": "t", "AWS_REGION": "us-east-1"}


def test_the_setting_caps_growth_and_defaults_to_never() -> None:
    assert Likes.from_settings(LikeSettings.from_env(BASE)).toggling.max_spread == 8
    assert Likes.from_settings(LikeSettings.from_env({**BASE, "LIKES_MAX_SPREAD": "32"})).toggling.max_spread == 32


@pytest.mark.parametrize("mode", ["mrec", "mrsc"])
def test_growth_stays_off_on_a_global_table(mode: str) -> None:
    env = {**BASE, "LIKES_MAX_SPREAD": "64", "GLOBAL_TABLE_MODE": mode, "TABLE_REGIONS": "us-east-1,eu-west-1,us-west-2"}
    if mode == "mrsc":
        env["HOME_REGION"] = "us-east-1"
    assert Likes.from_settings(LikeSettings.from_env(env)).toggling.max_spread == 8


def test_both_functions_that_write_likes_get_the_parameter() -> None:
    stack = read_stack("t")
    for name in ("LikesFunction", "RetryWorkerFunction"):
        assert stack.functions[name].environment["LIKES_MAX_SPREAD"] == "8", name
