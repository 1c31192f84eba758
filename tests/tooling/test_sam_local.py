"""scripts/sam_local.py and scripts/invoke_events.py: what `make start-api` removes when it stops, what it
refuses to start without, what the local targets pass to sam, and how `make invoke-events` reports."""

from __future__ import annotations

import json
import os
import shutil
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


# -- the build stamp: `sam build` only when an input changed ---------------------------------------
@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A copy of the build's inputs (template.yaml, functions/, layers/counters/) to change."""
    root = tmp_path / "repo"
    skip = shutil.ignore_patterns(*sam_local.NOT_INPUTS, "*.egg-info", "*.pyc")
    root.mkdir()
    shutil.copy(ROOT / "template.yaml", root / "template.yaml")
    shutil.copytree(ROOT / "functions", root / "functions", ignore=skip)
    shutil.copytree(ROOT / "layers" / "counters", root / "layers" / "counters", ignore=skip)
    return root


class FakeBuild:
    """`sam_local.build` writing a built template (or failing), counting its runs."""

    def __init__(self) -> None:
        self.runs, self.fail = 0, False

    def __call__(self, arch: str, work: Path) -> Path:
        self.runs += 1
        if self.fail:
            raise RuntimeError("sam build (x86_64) failed")
        built = work / "build" / "template.yaml"
        built.parent.mkdir(parents=True, exist_ok=True)
        built.write_text(f"built for {arch}\n")
        return built


def test_an_unchanged_build_is_not_rebuilt_and_a_changed_input_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, inputs: Path) -> None:
    fake = FakeBuild()
    monkeypatch.setattr(sam_local, "build", fake)
    work = tmp_path / "work"

    def runs_after(change: Any = None, **kwargs: Any) -> int:
        if change is not None:
            change()
        before = fake.runs
        built, did = sam_local.ensure_built("x86_64", work, root=inputs, **kwargs)
        assert built == work / "build" / "template.yaml" and did == (fake.runs > before)
        return fake.runs - before

    assert runs_after() == 1  # nothing built yet
    assert runs_after() == 0  # nothing changed
    assert runs_after() == 0
    handler = inputs / "functions" / "likes" / "app.py"
    assert runs_after(lambda: handler.write_text(handler.read_text() + "\n# changed\n")) == 1
    assert runs_after() == 0
    requirements = inputs / "layers" / "counters" / "requirements.txt"
    assert runs_after(lambda: requirements.write_text(requirements.read_text() + "\n")) == 1
    layer = inputs / "layers" / "counters" / "counters" / "core" / "engine.py"
    assert runs_after(lambda: layer.write_text(layer.read_text() + "\n")) == 1
    template = inputs / "template.yaml"
    assert runs_after(lambda: template.write_text(template.read_text().replace("MemorySize: ", "MemorySize:  ", 1))) == 1
    assert runs_after(lambda: (inputs / "functions" / "likes" / "helper.py").write_text("X = 1\n")) == 1  # a new file
    assert runs_after(lambda: (inputs / "functions" / "likes" / "helper.py").unlink()) == 1  # a removed one
    assert runs_after(lambda: (inputs / "functions" / "likes" / "__pycache__").mkdir(exist_ok=True)) == 0
    assert runs_after(lambda: (inputs / "functions" / "likes" / "__pycache__" / "app.cpython-313.pyc").write_bytes(b"x")) == 0
    egg = inputs / "layers" / "counters" / "tally_counters.egg-info"  # what `pip install -e` / `pip install .` leave
    assert runs_after(lambda: (egg.mkdir(), (egg / "PKG-INFO").write_text("x"))) == 0
    assert (
        runs_after(
            lambda: ((inputs / "layers" / "counters" / "build").mkdir(), (inputs / "layers" / "counters" / "build" / "x").write_text("x"))
        )
        == 0
    )
    assert runs_after(lambda: os.utime(handler)) == 0  # a touch that changes no content: the same build
    assert runs_after(rebuild=True) == 1  # --rebuild
    assert runs_after(lambda: (inputs / "README.md").write_text("not an input\n")) == 0
    assert runs_after(lambda: (work / "build" / "template.yaml").unlink()) == 1  # the build was removed


def test_a_build_for_another_cpu_or_one_that_failed_is_built_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, inputs: Path) -> None:
    fake = FakeBuild()
    monkeypatch.setattr(sam_local, "build", fake)
    work = tmp_path / "work"
    sam_local.ensure_built("x86_64", work, root=inputs)
    assert sam_local.inputs_digest("x86_64", work, inputs) != sam_local.inputs_digest("arm64", work, inputs)
    sam_local.ensure_built("arm64", work, root=inputs)
    assert fake.runs == 2
    handler = inputs / "functions" / "likes" / "app.py"
    handler.write_text(handler.read_text() + "\n# changed\n")
    fake.fail = True
    with pytest.raises(RuntimeError):
        sam_local.ensure_built("arm64", work, root=inputs)
    assert not (work / "build" / sam_local.STAMP).exists()  # the earlier build's stamp is gone with it
    fake.fail = False
    handler.write_text(handler.read_text().removesuffix("\n# changed\n"))  # back to what was built before the failure
    assert sam_local.ensure_built("arm64", work, root=inputs)[1] is True


def test_the_inputs_are_what_the_template_builds_from() -> None:
    """Every function's CodeUri and the layer's ContentUri lie under BUILD_INPUTS."""
    resources = load()["Resources"]
    uris = [r["Properties"].get("CodeUri") or r["Properties"].get("ContentUri") for r in resources.values()]
    dirs = {u.rstrip("/") for u in uris if isinstance(u, str)}
    assert dirs and all(any(d == i or d.startswith(i + "/") for i in sam_local.BUILD_INPUTS) for d in dirs), dirs
    files = {str(p.relative_to(ROOT)) for p in sam_local.input_files()}
    assert {"template.yaml", "layers/counters/requirements.txt", "layers/counters/Makefile", "functions/likes/app.py"} <= files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)


# -- events/needs.toml: what each sample event needs, seeded before it is invoked -------------------
def test_every_sample_event_is_declared_in_needs_toml_for_its_function() -> None:
    from scripts import event_needs

    needs = event_needs.load()
    samples = {str(p.relative_to(ROOT / "events")) for p in (ROOT / "events").rglob("*.json")} - {"env.local.json"}
    assert set(needs["events"]) == samples
    functions = set(load()["Resources"])
    assert all(spec["function"] in functions for spec in needs["events"].values())
    for check in invoke_events.SEQUENCE:  # make invoke-events invokes each with the same function
        assert needs["events"][check.event]["function"] == check.function, check.event
    for seed, spec in needs["seeds"].items():
        assert {spec["probe"], spec.get("create") or spec["pending"]} <= samples, seed
    for name in needs["events"]:
        assert set(event_needs.seeds_for(name, needs)) <= set(needs["seeds"])  # no unknown seed, no cycle


def test_seeds_come_after_what_their_create_event_needs() -> None:
    from scripts import event_needs

    needs = event_needs.load()
    assert event_needs.seeds_for("reservations/release.json", needs) == ["resource_tickets", "reservation_order_1001"]
    assert event_needs.seeds_for("orders/latest_order.json", needs) == ["order_1", "latest_order_pointer"]
    assert event_needs.seeds_for("operations/get_operation.json", needs) == ["post_p1", "like_u2_pending", "like_u2_replayed"]
    assert event_needs.seeds_for("likes/create_post.json", needs) == []


def test_the_layer_is_inlined_into_each_built_function(tmp_path: Path) -> None:
    """SAM rebuilds the image on every invoke for a layer defined in the template: the built layer's
    files are hard-linked into each function's directory and the layer left out of the built template."""
    build = tmp_path / "build"
    (build / "CountersLayer" / "python" / "counters").mkdir(parents=True)
    (build / "CountersLayer" / "python" / "counters" / "__init__.py").write_text("VERSION = 1\n")
    for name in ("LikesFunction", "OrdersFunction"):
        (build / name).mkdir()
        (build / name / "app.py").write_text("import counters\n")
    template = build / "template.yaml"
    globals_ = "Globals:\n  Function:\n"
    template.write_text(globals_ + sam_local.LAYER_REF + "    - Fn::If:\n      - HasAdotLayer\n")
    assert sam_local.inline_layer(template) is True
    for name in ("LikesFunction", "OrdersFunction"):
        linked = build / name / "counters" / "__init__.py"
        assert linked.read_text() == "VERSION = 1\n"
        assert linked.stat().st_ino == (build / "CountersLayer" / "python" / "counters" / "__init__.py").stat().st_ino
    assert template.read_text() == globals_ + "    Layers:\n    - Fn::If:\n      - HasAdotLayer\n"
    assert sam_local.inline_layer(template) is False  # nothing left to inline
    (build / "LikesFunction" / "extra").mkdir()
    template.write_text(globals_ + sam_local.LAYER_REF)
    (build / "CountersLayer" / "python" / "extra").mkdir()
    with pytest.raises(RuntimeError, match="LikesFunction has its own .*extra"):
        sam_local.inline_layer(template)


def test_the_built_template_names_the_layer_as_inline_layer_expects() -> None:
    """What `sam build` writes for Globals' Layers (the template's own, in block style)."""
    text = (ROOT / "template.yaml").read_text()
    assert "    Layers:\n      - !Ref CountersLayer\n" in text


def test_sams_account_id_lookup_fails_at_once() -> None:
    """SAM's own STS call (its AWS::AccountId) cannot succeed with the local credentials: it is sent to
    a closed local port, once, instead of AWS's endpoint with retries (~7 s of every invoke)."""
    env = sam_local.sam_env()
    assert env["AWS_ACCESS_KEY_ID"] == "local" and env["AWS_ENDPOINT_URL_STS"] == "http://127.0.0.1:9" and env["AWS_MAX_ATTEMPTS"] == "1"


def test_sam_reads_the_event_from_stdin_once_the_seeding_is_done(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any) -> None:
    """`make local-invoke` starts SAM first; SAM gets the event (stamped if its times expire) on its
    stdin only after what it needs is seeded, and is stopped, without it, when that fails."""
    fake = tmp_path / "sam"
    record = tmp_path / "record.json"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"json.dump({{'args': sys.argv[1:], 'event': sys.stdin.read()}}, open({str(record)!r}, 'w'))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sam_local, "SAM", fake)
    seeded: list[str] = []
    monkeypatch.setattr(sam_local, "seed_needs", lambda event: seeded.append(event) or (None if not record.exists() else "too late"))
    built = tmp_path / "build" / "template.yaml"
    assert sam_local.invoke("LikesFunction", "likes/like.json", built, [], tmp_path, seed=True) == 0
    got = json.loads(record.read_text())
    assert seeded == ["likes/like.json"]
    assert flag_values(got["args"], "-e") == ["-"] and got["args"][:3] == ["local", "invoke", "LikesFunction"]
    assert got["event"] == (ROOT / "events" / "likes" / "like.json").read_text()
    sam_local.invoke("LedgerFunction", "ledger/append.json", built, [], tmp_path, seed=False)
    assert (
        json.loads(json.loads(record.read_text())["event"])["headers"]["Idempotency-Key"]
        != json.loads((ROOT / "events" / "ledger" / "append.json").read_text())["headers"]["Idempotency-Key"]
    )  # stamped now
    assert seeded == ["likes/like.json"]  # --no-seed

    record.unlink()
    monkeypatch.setattr(sam_local, "seed_needs", lambda event: "nothing answers at http://172.17.0.1:8000: start the devstack")
    assert sam_local.invoke("LikesFunction", "likes/like.json", built, [], tmp_path, seed=True) == 1
    assert "start the devstack" in capsys.readouterr().err
    assert not record.exists()  # SAM was stopped before it had an event
