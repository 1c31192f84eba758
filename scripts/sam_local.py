"""`sam local` on this machine's CPU: `make local-invoke`, `make start-api`, and what
scripts/invoke_events.py shares with them.

The template's functions are arm64. On an x86_64 machine without arm64 emulation (binfmt +
qemu) an arm64 container cannot run, so the functions are built from a copy of the template
with every arm64 replaced by the host's architecture (in .aws-sam/<work>/, never committed). The
code, layer, handlers and events are the same; only the CPU the container claims differs, and the
layer's files are found in each function's directory (:func:`inline_layer`: SAM rebuilt the image
for a layer defined in the template on every invoke). Every
run passes ``--skip-pull-image``: the runtime's image (python:3.X) must be on the machine (pulled, or built
offline by scripts/build-standin-image.sh), and is checked before anything is built.

Usage (python3.X, the template's Runtime, on PATH for `sam build`; the Makefile finds one):
  python scripts/sam_local.py invoke FUNCTION EVENT [sam args...]   EVENT: a path, or one under events/
  python scripts/sam_local.py start-api [sam args...]               PORT (env) defaults to 3001
  (--rebuild anywhere: build even when nothing changed; --no-seed: invoke without seeding)
`sam build` runs only when what it builds from changed (:func:`ensure_built`: a SHA-256 of
template.yaml, functions/ and layers/counters/, stamped in the build directory after each build).
Before `invoke`, what the event needs (events/needs.toml: the post p1 for a like...) is seeded
into the table events/env.local.json names, through the functions' handlers in this process
(:func:`seed_needs`, scripts/event_needs.py), so every sample event works on a fresh stack in any
order; SAM, started first, reads the event from its stdin once that is done (:func:`invoke`).
Both pass ``--env-vars events/env.local.json`` (the devstack's DynamoDB Local and SQS emulator on
docker0's address: `make dev ARGS="--backend-host 172.17.0.1"`).

Two things the built copy would otherwise lose or keep:

* **samconfig.toml.** SAM CLI reads samconfig.toml from the directory of the template ``-t``
  names, here .aws-sam/local/build/, which has none: ``[default.local_start_api.parameters]``
  (``warm_containers = "EAGER"``) and ``[default.local_invoke.parameters]`` never applied. They
  are passed as flags (:func:`samconfig_flags`) before the caller's own, which win.
* **The timeout.** The template's ``FunctionTimeoutSeconds`` (Globals, 10 s) is raised to
  :data:`LOCAL_TIMEOUT_SECONDS` in one ``--parameter-overrides`` that also holds the caller's
  (:func:`with_overrides`; theirs win: ``ARGS="--parameter-overrides FunctionTimeoutSeconds=120"``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from scripts.gen_events import STAMPED, stamped  # noqa: E402

SAM = ROOT / ".venv-sam" / "bin" / "sam"
ENV_LOCAL = ROOT / "events" / "env.local.json"
SAM_LABEL = "sam.cli.container.type=lambda"  # SAM CLI labels every function container it starts
SAMCONFIG = ROOT / "samconfig.toml"
LOCAL_TIMEOUT_SECONDS = 60
"""``FunctionTimeoutSeconds`` under sam local: at load 10-19 on 2 cores an invocation took 18-41 s
(docs/deploy.md), and the template's 10 s failed 8 of 29 checks."""


def samconfig_flags(command: str, path: Path = SAMCONFIG) -> list[str]:
    """``[default.<command>.parameters]`` of samconfig.toml as command-line flags
    (``warm_containers = "EAGER"`` -> ``--warm-containers EAGER``; ``true`` -> the bare flag)."""
    params = tomllib.loads(path.read_text()).get("default", {}).get(command, {}).get("parameters", {})
    flags: list[str] = []
    for key, value in params.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False:
            flags += [flag, str(value)]
    return flags


def with_overrides(extra: list[str], overrides: dict[str, str]) -> list[str]:
    """``extra`` with one ``--parameter-overrides``: ``overrides`` first, then the caller's own
    (SAM keeps the last value of a key, and only the last ``--parameter-overrides`` given)."""
    rest: list[str] = []
    given: list[str] = []
    args = iter(extra)
    for arg in args:
        if arg == "--parameter-overrides":  # its values run to the next option
            for value in args:
                if value.startswith("-"):
                    rest.append(value)
                    break
                given.append(value)
        elif arg.startswith("--parameter-overrides="):
            given.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return [*rest, "--parameter-overrides", *(f"{k}={v}" for k, v in overrides.items()), *given]


def local_args(command: str, extra: list[str]) -> list[str]:
    """The flags every sam local command gets before and with the caller's: samconfig's for
    ``command`` (they do not apply by themselves, see the module doc), the raised timeout."""
    return with_overrides([*samconfig_flags(command), *extra], {"FunctionTimeoutSeconds": str(LOCAL_TIMEOUT_SECONDS)})


def host_arch() -> str:
    return "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def runtime_version() -> str:
    """The functions' Python, ``3.X`` of template.yaml's ``Runtime: python3.X`` (Globals)."""
    found = re.search(r"^ +Runtime: python(3\.\d+) *$", (ROOT / "template.yaml").read_text(), re.MULTILINE)
    if not found:
        raise RuntimeError("no 'Runtime: python3.X' line in template.yaml")
    return found[1]


def runtime_image(arch: str) -> str:
    """The image `sam local` runs the functions in (their runtime's), for ``arch``."""
    return f"public.ecr.aws/lambda/python:{runtime_version()}-{arch}"


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("docker") or "/usr/bin/docker", *args], capture_output=True, text=True)


def missing_image(arch: str) -> str | None:
    """Why the runtime image cannot be used (one line), or None when it is on the machine."""
    if shutil.which("docker") is None:
        return "docker not found: install Docker (apt-get install docker.io) and start dockerd"
    image = runtime_image(arch)
    out = docker("image", "inspect", image)
    if out.returncode == 0:
        return None
    if "Cannot connect" in out.stderr or "permission denied" in out.stderr:
        return f"docker cannot reach its daemon ({out.stderr.strip().splitlines()[-1]}): start dockerd"
    if arch == "x86_64":
        return f"no image {image} on this machine: docker pull it, or build a stand-in offline: scripts/build-standin-image.sh"
    return f"no image {image} on this machine: docker pull {image}"


def sam_env() -> dict[str, str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
    env.update({"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"})  # DynamoDB Local/the emulator accept any
    env.pop("AWS_SESSION_TOKEN", None)
    # `sam local invoke` asks STS for the account id first (GetCallerIdentity, for AWS::AccountId)
    # and falls back to a default when that fails, as it always does with these credentials: ~7 s
    # of retried connections to AWS without network. A closed local port fails it at once.
    env.update({"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"})
    return env


def sam(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SAM), *args], cwd=ROOT, env={**sam_env(), **(env or {})}, text=True, capture_output=True, **kwargs)


def layer_arch(arch: str) -> str:
    """The CPU the layer's compiled wheels are for (layers/counters/Makefile's LAYER_ARCH)."""
    return "x86_64" if arch == "x86_64" else "aarch64"


def template_for(arch: str, work: Path) -> Path:
    """The template, with its functions' architecture set to ``arch`` (a copy in ``work``)."""
    source = (ROOT / "template.yaml").read_text()
    work.mkdir(parents=True, exist_ok=True)
    target = work / "template.yaml"
    target.write_text(source if arch == "arm64" else re.sub(r"\barm64\b", arch, source))
    return target


def build_args(arch: str, work: Path) -> list[str]:
    """``sam build``'s arguments (after ``sam``) for ``arch`` into ``work``/build."""
    built, cache = work / "build", work / f"cache-{arch}"
    args = ["build", "-t", str(template_for(arch, work)), "--base-dir", str(ROOT), "--build-dir", str(built)]
    return [*args, "--language-extensions", "--cached", "--cache-dir", str(cache)]


def build(arch: str, work: Path) -> Path:
    """`sam build` of the template for ``arch`` into ``work``/build; returns the built template."""
    # the layer's wheels (pydantic-core...) must match the functions' CPU, as the template's copy says
    out = sam(*build_args(arch, work), env={"LAYER_ARCH": layer_arch(arch)})
    if out.returncode:
        raise RuntimeError(f"sam build ({arch}) failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return work / "build" / "template.yaml"


BUILD_INPUTS = ("template.yaml", "functions", "layers/counters")
"""What `sam build` reads (under the repository's root): the template, the functions' code
directories (their requirements.txt too) and the layer's ``ContentUri`` (its package, Makefile
and requirements.txt). Anything else (tests, docs, events, the devstack) changes no build."""
NOT_INPUTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist"}
"""Directories under the inputs that are their byproducts (bytecode, caches, a local pip build),
skipped with ``*.egg-info`` and ``*.pyc`` files (all in .gitignore)."""
STAMP = ".inputs.sha256"
"""The file in the build directory holding the digest of the inputs it was built from."""


def input_files(root: Path = ROOT) -> list[Path]:
    """Every file of :data:`BUILD_INPUTS` under ``root``, sorted, byproducts left out."""
    files: list[Path] = []
    for name in BUILD_INPUTS:
        top = root / name
        if top.is_file():
            files.append(top)
            continue
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d not in NOT_INPUTS and not d.endswith(".egg-info")]
            files += [Path(folder, n) for n in names if not n.endswith(".pyc")]
    return sorted(files)


def inputs_digest(arch: str, work: Path, root: Path = ROOT) -> str:
    """SHA-256 over what a build for ``arch`` depends on: ``sam build``'s command line (the CPU,
    the directories), the layer's CPU, and each input file's path and content (content, not
    mtime: a ``git checkout`` that rewrites a file unchanged rebuilds nothing)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([build_args(arch, work), layer_arch(arch)]).encode())
    for path in input_files(root):
        digest.update(f"\0{path.relative_to(root)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


LAYER_REF = "    Layers:\n    - Ref: CountersLayer\n"
"""The template's Globals naming the layer, as `sam build` writes the built template."""


def inline_layer(built: Path) -> bool:
    """The built layer's files hard-linked into each built function's directory (``/var/task``
    in the container, ahead of ``/opt/python`` on ``sys.path``) and the layer taken out of the
    built template's Globals. SAM CLI rebuilds the function's image on every `sam local invoke`
    when a layer is defined in the template (``is_defined_within_template``, its
    samcli/local/docker/lambda_image.py: "Building image..."; ~20 s of each invoke here); with
    no layer it reuses the runtime image. The same files, found at another path. False when the
    built template names no layer (nothing done)."""
    text = built.read_text()
    if LAYER_REF not in text:
        return False
    layer = built.parent / "CountersLayer" / "python"
    for function in sorted(p for p in built.parent.iterdir() if p.is_dir() and p.name != "CountersLayer"):
        clash = {entry.name for entry in layer.iterdir()} & {entry.name for entry in function.iterdir()}
        if clash:
            raise RuntimeError(f"{function.name} has its own {', '.join(sorted(clash))}, which the layer has too: cannot inline it")
        shutil.copytree(layer, function, copy_function=os.link, dirs_exist_ok=True)
    built.write_text(text.replace(LAYER_REF, "    Layers:\n", 1))
    return True


def ensure_built(arch: str, work: Path, rebuild: bool = False, root: Path = ROOT) -> tuple[Path, bool]:
    """The built template for ``arch`` in ``work``, and whether `sam build` ran for it: only when
    ``rebuild``, no build is there, or the digest of its inputs (:func:`inputs_digest`) differs
    from the one stamped after the last build that succeeded. The stamp is removed before a
    build and written after it: a build that fails or is interrupted builds again next time."""
    built, stamp = work / "build" / "template.yaml", work / "build" / STAMP
    digest = inputs_digest(arch, work, root)
    if not rebuild and built.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return built, False
    stamp.unlink(missing_ok=True)
    built = build(arch, work)
    inline_layer(built)
    stamp.write_text(digest + "\n")
    return built, True


def docker_gateway() -> str:
    """The host's address on Docker's default bridge (docker0), where containers reach it."""
    ip = shutil.which("ip")
    if ip is None:
        raise RuntimeError("`ip` (iproute2) not found: needed to find docker0's address")
    out = subprocess.run([ip, "-4", "-o", "addr", "show", "docker0"], check=True, capture_output=True, text=True).stdout
    found = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    if not found:
        raise RuntimeError("no IPv4 address on docker0: is dockerd running with its default bridge?")
    return found[1]


def event_file(name: str, work: Path) -> Path:
    """The event ``name`` (under events/, or a path): for one whose times expire (gen_events.STAMPED:
    the ledger key, the queued commands, the hot likes) a copy stamped now, in ``work``."""
    path = Path(name)
    if not path.is_absolute() and not path.exists():
        path = ROOT / "events" / name
    relative = path.resolve().relative_to(ROOT / "events") if path.resolve().is_relative_to(ROOT / "events") else None
    if relative is None or str(relative) not in STAMPED:
        return path
    copy = work / "stamped" / relative
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(json.dumps(stamped(str(relative), json.loads(path.read_text()), time.time_ns() // 1_000_000)))
    return copy


def containers_of(built: Path) -> list[str]:
    """The function containers SAM started from this build (their code is mounted from ``built``'s
    directory), running or not: another checkout's or tool's containers are left alone."""
    ids = docker("ps", "-aq", "--filter", f"label={SAM_LABEL}").stdout.split()
    mine = []
    for container in ids:
        mounts = docker("inspect", "-f", "{{range .Mounts}}{{.Source}}\n{{end}}", container).stdout.split()
        if any(Path(m).is_relative_to(built.parent) for m in mounts):
            mine.append(container)
    return mine


def remove_containers(built: Path) -> int:
    left = containers_of(built)
    if left:
        docker("rm", "-f", *left)
    return len(left)


def start_api_args(built: Path, extra: list[str]) -> list[str]:
    """``sam local start-api``'s arguments (after ``sam``) for ``built`` and the caller's ``extra``."""
    args = ["local", "start-api", "-t", str(built), "--env-vars", str(ENV_LOCAL), "--skip-pull-image"]
    return [*args, "--port", os.environ.get("PORT", "3001"), *local_args("local_start_api", extra)]


def invoke_args(function: str, event: Path, built: Path, extra: list[str], env_vars: Path = ENV_LOCAL) -> list[str]:
    """``sam local invoke``'s arguments (after ``sam``): ``function`` with ``event``."""
    args = ["local", "invoke", function, "-t", str(built), "-e", str(event), "--env-vars", str(env_vars), "--skip-pull-image"]
    return [*args, *local_args("local_invoke", extra)]


def start_api(built: Path, extra: list[str]) -> int:
    """`sam local start-api` in the foreground. On SIGTERM, SIGINT or SIGHUP: SAM gets SIGINT (its
    own shutdown), then whatever function containers of this build are still there are removed
    (with --warm-containers EAGER, SAM left some running on SIGTERM)."""
    args = start_api_args(built, extra)
    stopped_at: list[float] = []
    process: subprocess.Popen[bytes] | None = None

    def stop(_signum: int, _frame: Any) -> None:
        stopped_at.append(time.monotonic())
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)

    # Handled here before SAM starts, so SAM gets SIGINT's default (a KeyboardInterrupt, its own
    # shutdown) even when this process was started with SIGINT ignored (a shell's `cmd &`).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    process = subprocess.Popen([str(SAM), *args], cwd=ROOT, env=sam_env(), start_new_session=True)
    try:
        while True:
            try:
                code = process.wait(timeout=1)
                break
            except subprocess.TimeoutExpired:
                if stopped_at and time.monotonic() - stopped_at[0] > 15:  # SAM did not stop: stop it
                    os.killpg(process.pid, signal.SIGKILL)
    finally:
        removed = remove_containers(built)
        print(f"start-api stopped; removed {removed} function container(s) SAM left behind", file=sys.stderr)
    return 0 if stopped_at else code


def event_name(event: str) -> str | None:
    """``event`` as events/needs.toml names it (``likes/like.json``), or None outside events/."""
    path = Path(event) if Path(event).exists() or Path(event).is_absolute() else ROOT / "events" / event
    path = path.resolve()
    return str(path.relative_to(ROOT / "events")) if path.is_relative_to(ROOT / "events") else None


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def unreachable(endpoint: str) -> bool:
    found = re.match(r"https?://([^:/]+)(?::(\d+))?", endpoint)
    if not found:
        return True
    try:
        socket.create_connection((found[1], int(found[2] or 80)), timeout=3).close()
    except OSError:
        return True
    return False


def seed_problem(event: str, env_vars: Path = ENV_LOCAL) -> str | None:
    """Why what ``event`` needs cannot be seeded (one line, with the fix), or None."""
    name = event_name(event)
    endpoint = json.loads(env_vars.read_text())["Parameters"]["AWS_ENDPOINT_URL_DYNAMODB"]
    if name is not None and unreachable(endpoint):
        return (
            f"nothing answers at {endpoint} (the DynamoDB Local of {shown(env_vars)}, where {name}'s needs are seeded): "
            'start the devstack there (make dev ARGS="--backend-host 172.17.0.1"), or pass --no-seed'
        )
    return None


def seed_needs(event: str, env_vars: Path = ENV_LOCAL) -> str | None:
    """Seed what ``event`` needs (events/needs.toml) into the table ``env_vars`` points the
    functions at, through their handlers in this process (scripts/event_needs.py); a one-line
    problem with its fix when that cannot be done, else None."""
    from scripts import event_needs

    name, problem = event_name(event), seed_problem(event, env_vars)
    if name is None or problem is not None:
        return problem
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION"):
        os.environ.setdefault(key, sam_env()[key])  # this process's own clients: the local credentials and Region
    began = time.monotonic()
    runner = event_needs.HandlerRunner.from_env_vars(env_vars)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the seeding handlers' EMF: stdout is the invocation's answer
            made = event_needs.ensure(name, runner, report=lambda line: print(line, file=sys.stderr))
    except event_needs.SeedError as exc:
        return str(exc)
    print(f"{name}: what it needs is there ({len(made)} seeded now, {time.monotonic() - began:.1f}s)", file=sys.stderr)
    return None


def invoke(function: str, event: str, built: Path, extra: list[str], work: Path, seed: bool) -> int:
    """`sam local invoke` of ``event`` (read from its stdin), what the event needs seeded meanwhile.
    SAM reads the event before it reads the template or starts a container, so it waits for the
    seeding however long that takes, and the seconds SAM spends starting up are not added to it."""
    process = subprocess.Popen([str(SAM), *invoke_args(function, Path("-"), built, extra)], cwd=ROOT, env=sam_env(), stdin=subprocess.PIPE)
    assert process.stdin is not None
    problem = seed_needs(event) if seed else None
    if problem is not None:
        process.kill()
        process.wait()
        print(problem, file=sys.stderr)
        return 1
    process.stdin.write(event_file(event, work).read_bytes())  # stamped now, if its times expire
    process.stdin.close()
    return process.wait()


def main(argv: list[str]) -> int:
    rebuild, seed = "--rebuild" in argv, "--no-seed" not in argv
    argv = [a for a in argv if a not in ("--rebuild", "--no-seed")]
    if not argv or argv[0] not in ("invoke", "start-api") or (argv[0] == "invoke" and len(argv) < 3):
        print(__doc__, file=sys.stderr)
        return 2
    arch = host_arch()
    problem = missing_image(arch)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    if argv[0] == "invoke" and seed:  # before the build: a devstack that is not running stops it at once
        problem = seed_problem(argv[2])
        if problem:
            print(problem, file=sys.stderr)
            return 1
    work = ROOT / ".aws-sam" / "local"
    began = time.monotonic()
    try:
        built, did = ensure_built(arch, work, rebuild)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    took = time.monotonic() - began
    if did:
        print(f"sam build ({arch}): {took:.0f}s", file=sys.stderr)
    else:
        print(
            f"sam build ({arch}) skipped: its inputs are unchanged since the last build ({took:.2f}s to check; --rebuild forces one)",
            file=sys.stderr,
        )
    if argv[0] == "invoke":
        function, event, extra = argv[1], argv[2], argv[3:]
        return invoke(function, event, built, extra, work, seed)
    return start_api(built, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
