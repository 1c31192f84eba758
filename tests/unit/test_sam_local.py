"""scripts/sam_local.py and scripts/invoke_events.py: what `make start-api` removes when it stops, what it
refuses to start without, what the local targets pass to sam, and how `make invoke-events` reports."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devstack.template import ROOT, load
from scripts import invoke_events, sam_local


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
    assert problem is not None and sam_local.runtime_image("x86_64") in problem and "scripts/build-standin-image.sh" in problem
    assert "\n" not in problem
    monkeypatch.setattr(sam_local, "docker", FakeDocker({}, {sam_local.runtime_image("x86_64")}))
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


# -- what the local targets pass to sam (issue 27, item 6) ----------------------------------------
def flag_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def overrides(args: list[str]) -> list[str]:
    """The values of the one --parameter-overrides in ``args``."""
    assert args.count("--parameter-overrides") == 1, args
    start = args.index("--parameter-overrides") + 1
    end = next((i for i in range(start, len(args)) if args[i].startswith("-")), len(args))
    return args[start:end]


def test_start_api_applies_samconfigs_warm_containers(tmp_path: Path) -> None:
    """SAM reads samconfig.toml next to the template -t names (the built copy: none there), so
    ``warm_containers = "EAGER"`` is passed as a flag; the caller's own flag comes after and wins."""
    built = tmp_path / "build" / "template.yaml"
    args = sam_local.start_api_args(built, [])
    assert args[:4] == ["local", "start-api", "-t", str(built)]
    assert flag_values(args, "--warm-containers") == ["EAGER"]
    assert 'warm_containers = "EAGER"' in (ROOT / "samconfig.toml").read_text()  # the value comes from there
    assert flag_values(sam_local.start_api_args(built, ["--warm-containers", "LAZY"]), "--warm-containers") == ["EAGER", "LAZY"]


def test_samconfig_sections_become_flags(tmp_path: Path) -> None:
    config = tmp_path / "samconfig.toml"
    config.write_text('version = 0.1\n[default.local_invoke.parameters]\nwarm_containers = "LAZY"\ndebug = true\nskip = false\n')
    assert sam_local.samconfig_flags("local_invoke", config) == ["--warm-containers", "LAZY", "--debug"]
    assert sam_local.samconfig_flags("local_start_api", config) == []


def test_the_local_targets_raise_the_function_timeout(tmp_path: Path) -> None:
    """The template's Globals timeout is a parameter; sam local gets it raised, in the one
    --parameter-overrides that also carries the caller's (theirs last: they win)."""
    template = load()
    assert template["Globals"]["Function"]["Timeout"] == {"Ref": "FunctionTimeoutSeconds"}
    assert template["Parameters"]["FunctionTimeoutSeconds"]["Default"] == 10
    raised = f"FunctionTimeoutSeconds={sam_local.LOCAL_TIMEOUT_SECONDS}"
    assert sam_local.LOCAL_TIMEOUT_SECONDS > 10
    built, event = tmp_path / "template.yaml", tmp_path / "event.json"
    assert overrides(sam_local.invoke_args("LikesFunction", event, built, [])) == [raised]
    assert overrides(sam_local.start_api_args(built, [])) == [raised]
    cognito = sam_local.invoke_args("LikesFunction", event, built, ["--parameter-overrides", "AuthMode=COGNITO", "--debug"])
    assert overrides(cognito) == [raised, "AuthMode=COGNITO"] and "--debug" in cognito
    mine = sam_local.invoke_args("LikesFunction", event, built, ["--parameter-overrides=FunctionTimeoutSeconds=120"])
    assert overrides(mine) == [raised, "FunctionTimeoutSeconds=120"]  # SAM keeps a key's last value: 120


# -- make invoke-events ---------------------------------------------------------------------------
def answers(check: invoke_events.Check) -> subprocess.CompletedProcess[str]:
    """What sam prints when the invocation answers as expected (its last stdout line)."""
    expected = check.expected
    answer = {"statusCode": expected[0], "body": json.dumps(expected[1])} if isinstance(expected, tuple) else expected
    return subprocess.CompletedProcess([], 0, "START RequestId...\n" + json.dumps(answer) + "\n", "")


def test_one_failure_does_not_cascade(capsys: pytest.CaptureFixture[str]) -> None:
    """create_order times out (no answer): get_order, and what needs the order, are skipped because of it."""
    invoked: list[str] = []

    def invoke(check: invoke_events.Check) -> subprocess.CompletedProcess[str]:
        invoked.append(check.event)
        if check.event == "orders/create_order.json":
            return subprocess.CompletedProcess([], 0, "", "Function 'OrdersFunction' timed out after 60 seconds")
        return answers(check)

    lines: list[str] = []
    status = invoke_events.run_checks(invoke_events.SEQUENCE, invoke, report=lines.append)
    assert [e for e, s in status.items() if s == "FAIL"] == ["orders/create_order.json"]
    skipped = {e for e, s in status.items() if s == "skip"}
    assert skipped == {"orders/get_order.json", "order_pointer/order_inserts.json", "orders/latest_order.json"}
    assert not skipped & set(invoked)
    assert any(
        line.startswith("skip") and "orders/get_order.json" in line and "needs orders/create_order.json, which failed" in line
        for line in lines
    )
    assert all(s == "ok" for e, s in status.items() if e not in skipped | {"orders/create_order.json"})


def test_only_runs_the_events_named_and_their_left_out_prerequisites_do_not_hold_them_back() -> None:
    options = invoke_events.parse(["--only", "orders/get_order.json,likes/like.json"])
    status = invoke_events.run_checks(invoke_events.SEQUENCE, answers, options.only, report=lambda _: None)
    assert status == {"likes/like.json": "ok", "orders/get_order.json": "ok"}
    with pytest.raises(SystemExit):
        invoke_events.parse(["--only", "orders/no_such_event.json"])  # a typo is refused, not ignored
    with pytest.raises(SystemExit):
        invoke_events.parse(["--olny", "likes/like.json"])


def test_every_prerequisite_is_checked_before_what_needs_it() -> None:
    seen: set[str] = set()
    for check in invoke_events.SEQUENCE:
        assert set(check.needs) <= seen, (check.event, set(check.needs) - seen)
        seen.add(check.event)


def test_make_invoke_events_passes_args() -> None:
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "invoke-events", "ARGS=--only likes/like.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "scripts/invoke_events.py --only likes/like.json" in out.stdout, out.stdout
