"""`make validate` prints each SAM translator notice once, not once per translation (issue 27
item 10: 24 times). samtranslator is in the sam-cli venv only, so this logs as it does, by name."""

from __future__ import annotations

import logging

import pytest

from scripts.samtranslator_notices import show_each_once

NOTICE = "Feature 'deployment_preference_condition_fix' not available in Feature Toggle Config."


def test_a_notice_logged_on_every_translation_prints_once(capsys: pytest.CaptureFixture[str]) -> None:
    handler = show_each_once()
    try:
        assert show_each_once() is handler  # importing both checks installs it once
        toggle = logging.getLogger("samtranslator.feature_toggle.feature_toggle")
        for _ in range(24):  # one per translation, as make validate's two checks do
            toggle.warning(NOTICE)
        logging.getLogger("samtranslator.metrics.metrics").warning("There are unpublished metrics.")
        toggle.warning("another notice")
        err = capsys.readouterr().err.splitlines()
        assert err.count(f"samtranslator.feature_toggle.feature_toggle: {NOTICE} (shown once)") == 1
        assert len(err) == 3  # every distinct notice still shows, once
    finally:
        logging.getLogger("samtranslator").removeHandler(handler)
