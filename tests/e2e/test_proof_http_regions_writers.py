"""The HTTP multi-Region proof sees writer-rule violations on MRSC too (proof/http_regions.py).

On MRSC the three Regions share one store and one stream, so only the process that sent a write
knows its Region: each Region's function workers log every item they write (testkit/write_log.py)
and the proof feeds the log to the emulator's writer check. Here the post family is declared
REFUSED on MRSC (for the proof's check only: the functions still create posts), so the likes row,
which creates its posts through ``POST /posts``, must break on it, as the in-process proof would."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from unittest import mock

import pytest

import testkit.regions
from counters.store.writers import REFUSED, rules
from proof import http_regions
from proof.http import details
from testkit.regions import Mode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_an_mrsc_http_row_breaks_on_a_write_against_its_familys_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    declared = [dataclasses.replace(w, mrsc=REFUSED) if w.item == "post" else w for w in rules()]
    monkeypatch.setattr(testkit.regions, "writer_rules", lambda: declared)
    with (
        mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "proof", "AWS_SECRET_ACCESS_KEY": "proof"}),
        http_regions.GlobalStack(Mode.MRSC, 20261127, tmp_path / "functions.log", concurrency=1) as stack,
    ):
        report = http_regions.likes(stack, "hot", 4)
        stack.flag(report)
    assert report.verdict == "VIOLATED", details([report])
    broken = [w for w in report.wrong if w.startswith("writer rule:")]
    assert broken and all("wrote post PK='POST#hr-hot-" in w and "refused on MRSC by its writer rule" in w for w in broken), report.wrong
    checked = [n for n in report.notes if "writes by the Regions' functions checked" in n]
    assert checked and int(checked[0].split()[0]) > 2, report.notes  # the likes too, not only the posts
