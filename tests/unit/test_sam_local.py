"""scripts/sam_local.py: what `make start-api` removes when it stops, and what it refuses to start without."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from devstack.template import ROOT
from scripts import sam_local


class FakeDocker:
    """`docker` answering ps/inspect/rm from a table of containers and their mount sources."""

    def __init__(self, containers: dict[str, list[str]], images: set[str] | None = None) -> None:
        self.containers, self.images = containers, images or set()
        self.removed: list[str] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        out, code = "", 0
        if args[:2] == ("ps", "-aq"):
            assert args[2:] == ("--filter", f"label={sam_local.SAM_LABEL}")
            out = "\n".join(self.containers)
        elif args[0] == "inspect":
            out = "\n".join(self.containers[args[-1]])
        elif args[:2] == ("rm", "-f"):
            self.removed += args[2:]
        elif args[:2] == ("image", "inspect"):
            code = 0 if args[2] in self.images else 1
        return subprocess.CompletedProcess(list(args), code, out, "" if code == 0 else "Error: No such image")


def test_only_this_builds_containers_are_removed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    built = tmp_path / "local" / "build" / "template.yaml"
    fake = FakeDocker(
        {
            "a1": [str(built.parent / "LikesFunction"), str(built.parent / "CountersLayer")],
            "b2": [str(tmp_path / "other-checkout" / "build" / "LikesFunction")],  # another run's: left alone
            "c3": [str(built.parent / "OrdersFunction")],
        }
    )
    monkeypatch.setattr(sam_local, "docker", fake)
    assert sam_local.remove_containers(built) == 2
    assert fake.removed == ["a1", "c3"]


def test_a_missing_runtime_image_is_named_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sam_local.shutil, "which", lambda _: "/usr/bin/docker")
    monkeypatch.setattr(sam_local, "docker", FakeDocker({}))
    problem = sam_local.missing_image("x86_64")
    assert problem is not None and "public.ecr.aws/lambda/python:3.12-x86_64" in problem and "scripts/build-standin-image.sh" in problem
    assert "\n" not in problem
    monkeypatch.setattr(sam_local, "docker", FakeDocker({}, {"public.ecr.aws/lambda/python:3.12-x86_64"}))
    assert sam_local.missing_image("x86_64") is None


def test_the_template_is_built_for_the_hosts_cpu(tmp_path: Path) -> None:
    text = sam_local.template_for("x86_64", tmp_path).read_text()
    assert "arm64" not in text and "x86_64" in text
    assert sam_local.template_for("arm64", tmp_path).read_text() == (ROOT / "template.yaml").read_text()


def test_events_that_expire_are_stamped_copies(tmp_path: Path) -> None:
    assert sam_local.event_file("likes/like.json", tmp_path) == ROOT / "events" / "likes" / "like.json"
    stamped: Any = sam_local.event_file("ledger/append.json", tmp_path)
    assert stamped.is_relative_to(tmp_path) and stamped.read_text() != (ROOT / "events" / "ledger" / "append.json").read_text()


def test_the_layer_is_built_for_the_same_cpu_as_the_functions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An x86_64 build of the functions with an aarch64 layer would fail at import (pydantic-core)."""
    calls: list[tuple[tuple[str, ...], dict[str, str] | None]] = []

    def fake_sam(*args: str, env: dict[str, str] | None = None, **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append((args, env))
        return subprocess.CompletedProcess(list(args), 0, "", "")

    monkeypatch.setattr(sam_local, "sam", fake_sam)
    sam_local.build("x86_64", tmp_path)
    sam_local.build("arm64", tmp_path)
    assert [env for _, env in calls] == [{"LAYER_ARCH": "x86_64"}, {"LAYER_ARCH": "aarch64"}]
    makefile = (ROOT / "layers" / "counters" / "Makefile").read_text()
    assert "LAYER_ARCH ?= aarch64" in makefile and "manylinux2014_$(LAYER_ARCH)" in makefile
