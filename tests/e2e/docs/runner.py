"""Docs that run: the fenced blocks of README.md and docs/*.md, parsed, executed as written and
compared with the answers the pages show. The rules are in tests/e2e/docs/README.md; this module is
the parser (``blocks``, ``commands``), the matcher (``matches``) and the executor (``run_shell``,
``run_python``). The stacks the blocks run against are tests/e2e/docs/stacks.py's."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GENERATED = {"docs/proof-results.md", "docs/bench-results.md"}
"""Pages a tool writes (their blocks are the tool's output, not commands)."""

SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py", "python3"}
OUTPUT = "text"
"""A ``text`` fence directly after a run block holds that block's whole stdout."""
SKIP_REASONS = {
    "aws": "needs an AWS account",
    "docker": "needs Docker (sam local)",
    "long-running": "a long-running target (make dev, make test...): the harness starts the stacks itself",
    "illustration": "not a command: a layout, an API sketch, a pseudo-output",
    "release": "a maintainer's release step: it changes the repository",
}
STACKS = {"dev": "make dev (python -m devstack)", "dev-regions": "make dev-regions (python -m devstack.regions)"}
MARKER = re.compile(r"^\s*<!--\s*docs:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
WILDCARD = "..."


def pages() -> list[Path]:
    """README.md and docs/*.md, the generated pages left out (docs/api/ is not *.md in docs/)."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if rel(p) not in GENERATED]


def rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


class DocError(Exception):
    """A page breaks the rules (an unknown marker, an unmarked block, an answer that does not parse)."""


# --------------------------------------------------------------------------- blocks
@dataclass
class Block:
    page: str
    line: int
    """1-based line of the opening fence."""
    lang: str
    text: str
    marker: str | None
    output: str | None = None
    """The ``text`` fence right after it (its expected stdout), if any."""
    output_line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """``shell``, ``python``, ``unlabelled`` (must be marked) or ``other`` (not a command)."""
        if self.lang in SHELL:
            return "shell"
        if self.lang in PYTHON:
            return "python"
        return "unlabelled" if not self.lang else "other"

    @property
    def skip(self) -> str | None:
        """The skip reason word, if marked ``skip REASON``."""
        if self.marker and self.marker.split()[0] == "skip":
            return self.marker.split()[1]
        return None

    @property
    def run_by(self) -> str | None:
        if self.marker and self.marker.split()[0] == "run-by":
            return self.marker.split()[1]
        return None

    @property
    def stack(self) -> tuple[str, tuple[str, ...]]:
        """The stack the block runs against: ``dev`` unless marked ``stack NAME [ARGS...]``."""
        if self.marker and self.marker.split()[0] == "stack":
            name, *args = self.marker.split()[1:]
            return name, tuple(args)
        return "dev", ()


def blocks(page: str, text: str) -> list[Block]:
    """Every fenced block of a page, with the marker on the line directly before its fence and, for
    a block followed (after blank lines only) by a ``text`` fence, that fence as its output."""
    lines = text.splitlines()
    found: list[Block] = []
    i, previous_end = 0, -1
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, info = opened["indent"], opened["fence"], opened["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        if j == len(lines):
            raise DocError(f"{page}:{i + 1}: a fence that is never closed")
        before = MARKER.match(lines[i - 1]) if i > 0 else None
        block = Block(page, i + 1, info.split()[0].lower() if info else "", "\n".join(body), before["body"] if before else None)
        previous = found[-1] if found else None
        gap = lines[previous_end + 1 : i] if previous else []
        if (
            previous
            and block.kind == "other"
            and block.lang == OUTPUT
            and previous.kind in ("shell", "python")
            and not any(g.strip() for g in gap)
        ):
            previous.output, previous.output_line = block.text, block.line
        found.append(block)
        previous_end = j
        i = j + 1
    for block in found:
        check_marker(block)
    return found


def check_marker(block: Block) -> None:
    if block.marker is None:
        if block.kind == "unlabelled":
            raise DocError(
                f"{block.where}: a fence with no language and no marker: label it (bash, python, text) or mark it <!-- docs: skip illustration -->"
            )
        return
    words = block.marker.split()
    verb = words[0] if words else ""
    if verb == "skip":
        if len(words) < 2 or words[1] not in SKIP_REASONS:
            raise DocError(
                f"{block.where}: <!-- docs: skip REASON --> needs a reason among {', '.join(SKIP_REASONS)}, not {block.marker!r}"
            )
    elif verb == "run-by":
        if len(words) != 2:
            raise DocError(f"{block.where}: <!-- docs: run-by tests/path/test_x.py --> names one file, not {block.marker!r}")
        runner = ROOT / words[1]
        if not runner.is_file():
            raise DocError(f"{block.where}: run-by {words[1]}: no such file")
        if block.page not in runner.read_text():
            raise DocError(
                f"{block.where}: run-by {words[1]}: that file never names {block.page}, so it cannot be the test that runs this page's block"
            )
    elif verb == "stack":
        if len(words) < 2 or words[1] not in STACKS:
            raise DocError(f"{block.where}: <!-- docs: stack NAME [ARGS] --> takes NAME among {', '.join(STACKS)}, not {block.marker!r}")
        if block.kind not in ("shell", "python"):
            raise DocError(f"{block.where}: a stack marker on a block that is not run ({block.lang or 'no language'})")
    else:
        raise DocError(f"{block.where}: unknown marker <!-- docs: {block.marker} --> (skip REASON, run-by FILE, stack NAME)")


def runnable(block: Block) -> bool:
    return block.kind in ("shell", "python") and block.skip is None and block.run_by is None


# --------------------------------------------------------------------------- answers
@dataclass
class Answer:
    """What a page shows a command answers: ``[STATUS] [BODY] [(note)]`` after ``#``."""

    text: str
    status: int | None
    body: str | None
    note: str | None
    line: int


ANSWER = re.compile(r"^(?:(?P<status>[1-5]\d\d)(?=\s|$)\s*)?(?P<rest>.*?)\s*$")
NOTE = re.compile(r"^(?P<body>.*?)\s*\((?P<note>[^()]*)\)$")
BODY_START = ("{", "[", '"', WILDCARD)


def parse_answer(text: str, line: int) -> Answer | None:
    """``None`` for a note alone (``# (anything)``); a DocError for a comment that is neither."""
    got = ANSWER.match(text.strip())
    assert got is not None
    status = int(got["status"]) if got["status"] else None
    rest, note = got["rest"], None
    if noted := NOTE.match(rest):
        rest, note = noted["body"], noted["note"]
    if not rest:
        return Answer(text.strip(), status, None, note, line) if status is not None else None
    if not rest.startswith(BODY_START):
        raise DocError(
            f'{line}: {text.strip()!r} is not an answer: write `# [STATUS] BODY [(note)]` (BODY starts with {{, [, " or ...) or `# (a note)`'
        )
    return Answer(text.strip(), status, rest, note, line)


@dataclass
class Command:
    text: str
    """As written (continuation lines included), the trailing comment too."""
    line: int
    answer: Answer | None = None


def split_comment(line: str) -> tuple[str, str | None]:
    """The line's code and its trailing comment (a ``#`` after whitespace, outside quotes), if any."""
    quote: str | None = None
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :]
    return line, None


def commands(block: Block) -> list[Command]:
    """A shell block's commands (a line and its ``\\`` continuations), each with its answer: its
    trailing comment, or the comment line right after it if it has none."""
    found: list[Command] = []
    lines = block.text.splitlines()
    i = 0
    last: Command | None = None
    while i < len(lines):
        number = block.line + 1 + i
        stripped = lines[i].strip()
        if not stripped:
            last = None
            i += 1
            continue
        if stripped.startswith("#"):
            if last is not None and last.answer is None:
                last.answer = parse_answer_at(stripped[1:], block, number)
            last = None
            i += 1
            continue
        start = i
        while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
        text = "\n".join(lines[start : i + 1])
        _, comment = split_comment(lines[i])
        last = Command(text, block.line + 1 + start)
        if comment is not None:
            last.answer = parse_answer_at(comment, block, number if start == i else block.line + 1 + i)
        found.append(last)
        i += 1
    return found


def parse_answer_at(comment: str, block: Block, line: int) -> Answer | None:
    try:
        return parse_answer(comment, line)
    except DocError as error:
        raise DocError(f"{block.page}:{error}") from None


# --------------------------------------------------------------------------- matching
def matches(pattern: str, actual: str) -> bool:
    """``pattern`` is the whole of ``actual``, each ``...`` standing for any text (newlines too)."""
    pieces = pattern.split(WILDCARD)
    regex = ".*".join(re.escape(p) for p in pieces)
    return re.fullmatch(regex, actual, re.S) is not None


# --------------------------------------------------------------------------- execution
@dataclass
class Outcome:
    """One command's (or one Python block's) run: what it printed, its exit code, the HTTP status
    curl last got while it ran (``None``: no curl ran)."""

    stdout: str
    rc: int
    status: int | None


@dataclass
class Ran:
    block: Block
    outcomes: list[Outcome]
    stdout: str
    stderr: str
    failures: list[str] = field(default_factory=list)


SEP = "\x1f"


def curl_shim(directory: Path) -> Path:
    """A ``curl`` first on PATH that runs the real one with the same arguments and appends the HTTP
    status it got to $DOCS_STATUS_FILE (through ``-w '%{stderr}...'`` with stderr redirected there:
    stdout, what the page's pipes and answers see, is untouched). A curl that passes its own
    ``-w``/``--write-out`` is run as is and records no status."""
    real = shutil.which("curl")
    if real is None:
        raise DocError("the docs' blocks need curl on PATH")
    shim = directory / "curl"
    shim.write_text(
        "#!/bin/bash\n"
        'for a in "$@"; do case "$a" in -w|--write-out|-w*|--write-out=*) exec ' + real + ' "$@";; esac; done\n'
        f'exec {real} "$@" -w "%{{stderr}}@@status %{{http_code}}\\n" 2>>"$DOCS_STATUS_FILE"\n'
    )
    shim.chmod(0o755)
    return shim


def shell_script(cmds: list[Command]) -> str:
    """The block's commands exactly as written, in order, in one bash; between them, lines that
    mark where each begins (on stdout and in the status file) and record its exit code."""
    parts = []
    for n, cmd in enumerate(cmds):
        parts.append(f'printf \'{SEP}%d{SEP}\' {n}; echo "@@begin {n}" >>"$DOCS_STATUS_FILE"')
        parts.append(cmd.text)
        parts.append(f'echo "@@end {n} $?" >>"$DOCS_STATUS_FILE"')
    return "\n".join(parts) + "\n"


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without its DynamoDB/SQS endpoints (a user's shell has none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(extra or {})
    return env


HANG_GUARD = 300
"""Seconds one block may run: a hang guard (an `until` loop that never ends, a replication wait of
about a second), not a speed bound. A block past it is stopped (its process group killed) and
reported with the command it was in."""


def execute(argv: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[str, str, int | None]:
    """stdout, stderr and the exit code (``None``: killed by the hang guard), from the repo's root."""
    process = subprocess.Popen(  # noqa: S603 - bash or this interpreter, on the docs' own text
        argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(stdin, timeout=HANG_GUARD)
        return out, err, process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return out, err, None


def run_shell(block: Block, env: dict[str, str]) -> Ran:
    cmds = commands(block)
    with tempfile.TemporaryDirectory(prefix="docs-") as tmp:
        shim_dir = Path(tmp) / "bin"
        shim_dir.mkdir()
        curl_shim(shim_dir)
        status_file = Path(tmp) / "status"
        status_file.touch()
        run_env = {**env, "PATH": f"{shim_dir}:{env.get('PATH', '')}", "DOCS_STATUS_FILE": str(status_file)}
        stdout, stderr, code = execute(["bash", "-c", shell_script(cmds)], run_env)
        log = status_file.read_text()
    outputs = stdout.split(SEP)
    # outputs: ['', '0', out0, '1', out1, ...]
    by_index = {int(outputs[k]): outputs[k + 1] for k in range(1, len(outputs) - 1, 2)}
    statuses: dict[int, list[int]] = {}
    rcs: dict[int, int] = {}
    current = None
    for line in log.splitlines():
        if line.startswith("@@begin "):
            current = int(line.split()[1])
            statuses[current] = []
        elif line.startswith("@@end "):
            _, n, rc = line.split()
            rcs[int(n)] = int(rc)
            current = None
        elif line.startswith("@@status ") and current is not None:
            statuses[current].append(int(line.split()[1]))
    outcomes = [Outcome(by_index.get(n, ""), rcs.get(n, -1), last(statuses.get(n))) for n in range(len(cmds))]
    ran = Ran(
        block,
        outcomes,
        "".join(by_index.get(n, "") for n in range(len(cmds))),
        stderr + "".join(line + "\n" for line in log.splitlines() if not line.startswith("@@")),
    )
    if code is None:
        running = current if current is not None else "?"
        outcomes[running if isinstance(running, int) else 0].rc = -2
        ran.failures.append(
            f"{block.where}: stopped after {HANG_GUARD} s, in its command {running}: "
            + (cmds[running].text if isinstance(running, int) else "(unknown)")
        )
    ran.failures += compare_shell(block, cmds, outcomes) + compare_output(block, ran.stdout)
    return ran


def last(statuses: list[int] | None) -> int | None:
    """The status of a command's last request (an `until` loop's last try), ``None`` if none."""
    return statuses[-1] if statuses else None


def compare_shell(block: Block, cmds: list[Command], outcomes: list[Outcome]) -> list[str]:
    """Each command: exit code 0; its answer's status (if shown) is curl's; its body pattern matches
    its stdout (trailing newlines dropped)."""
    failures = []
    for cmd, got in zip(cmds, outcomes, strict=True):
        where = f"{block.page}:{cmd.line}"
        if got.rc == -1:
            failures.append(f"{where}: never ran (the shell stopped before it)\n  $ {cmd.text}")
            continue
        if got.rc == -2:  # the hang guard stopped it: reported once, for the block
            continue
        if got.rc != 0:
            failures.append(f"{where}: exit code {got.rc}\n  $ {cmd.text}\n  printed {got.stdout!r}")
        failures += compare_answer(where, cmd.text, cmd.answer, got)
    return failures


def compare_answer(where: str, text: str, answer: Answer | None, got: Outcome) -> list[str]:
    if answer is None:
        return []
    failures = []
    if answer.status is not None and got.status != answer.status:
        seen = "no curl status (none ran, or it passed its own -w)" if got.status is None else f"status {got.status}"
        failures.append(f"{where}: the page shows status {answer.status}, the command got {seen}\n  $ {text}")
    if answer.body is not None and not matches(answer.body, got.stdout.rstrip("\n")):
        failures.append(f"{where}: the page shows\n    {answer.body}\n  the command printed\n    {got.stdout.rstrip()}\n  $ {text}")
    return failures


def compare_output(block: Block, stdout: str) -> list[str]:
    if block.output is None or matches(block.output.rstrip("\n"), stdout.rstrip("\n")):
        return []
    return [f"{block.page}:{block.output_line}: the page shows the output\n{block.output}\n  the block printed\n{stdout.rstrip()}"]


def run_python(block: Block, env: dict[str, str]) -> Ran:
    """The block as one script, ``python -`` from the repo root, in a fresh interpreter."""
    stdout, stderr, code = execute([sys.executable, "-"], env, block.text)
    ran = Ran(block, [Outcome(stdout, -2 if code is None else code, None)], stdout, stderr)
    if code is None:
        ran.failures.append(f"{block.where}: the Python block was stopped after {HANG_GUARD} s")
    elif code != 0:
        ran.failures.append(f"{block.where}: the Python block exited {code}\n{stderr[-3000:]}")
    ran.failures += compare_output(block, stdout)
    return ran
