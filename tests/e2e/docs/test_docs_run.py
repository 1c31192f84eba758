"""Every fenced shell and Python block of README.md and docs/*.md, run exactly as written against the
stacks `make dev` and `make dev-regions` start, each answer compared with the one the page shows
(tests/e2e/docs/README.md has the rules). The pages run once per module, in document order per page;
the tests below read that one run's results: a page that fails, the counts, and that altering any
answer README.md shows makes its comparison fail."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.docs import runner
from tests.e2e.docs.runner import ROOT, Block, DocError, Ran
from tests.e2e.docs.stacks import CREDENTIALS, DYNAMODB_PORT, Stacks

pytestmark = [pytest.mark.xdist_group("docs-run"), pytest.mark.timeout(1200)]
"""One worker: the stacks take the docs' fixed ports. The timeout is a hang guard for the whole run
(two stacks started, every block run), not a speed bound."""


@dataclass
class PageRun:
    page: str
    blocks: list[Block] = field(default_factory=list)
    ran: list[Ran] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """Running its blocks (a stack's start not included)."""


@dataclass
class DocsRun:
    pages: dict[str, PageRun]
    stacks: list[str]
    seconds: float

    def summary(self) -> str:
        total: Counter[str] = Counter()
        lines = []
        for run in self.pages.values():
            total.update(run.counts)
            if run.blocks:
                counts = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
                lines.append(f"  {run.page}: {len(run.blocks)} blocks: {counts}" + (f" ({run.seconds:.1f} s)" if run.counts["ran"] else ""))
        head = f"docs that run: {sum(total.values())} blocks, " + ", ".join(f"{k} {v}" for k, v in sorted(total.items()))
        return "\n".join([head + f" ({self.seconds:.0f} s; stacks started: {', '.join(self.stacks) or 'none'})", *lines])


def python_env() -> dict[str, str]:
    """A Python block runs as after docs/layer.md's `export` line, with the package importable (as
    after `pip install ./layers/counters`): the stack's DynamoDB Local, its credentials and Region."""
    return runner.base_env(
        {**CREDENTIALS, "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{DYNAMODB_PORT}", "PYTHONPATH": str(ROOT / "layers" / "counters")}
    )


def order(page_blocks: dict[str, list[Block]]) -> list[str]:
    """Pages whose blocks need only `make dev` first, then those that switch, then the rest: two
    stack starts for the whole run (each page's blocks still run in its own order)."""

    def key(page: str) -> tuple[int, str]:
        stacks = [b.stack[0] for b in page_blocks[page] if runner.runnable(b)]
        if not stacks:
            return 3, page
        if set(stacks) == {"dev"}:
            return 0, page
        return (1 if stacks[0] == "dev" else 2), page

    return sorted(page_blocks, key=key)


def run_docs(paths: list[Path]) -> DocsRun:
    started = time.monotonic()
    runs: dict[str, PageRun] = {}
    page_blocks: dict[str, list[Block]] = {}
    for path in paths:
        page = runner.rel(path)
        runs[page] = PageRun(page)
        try:
            page_blocks[page] = runs[page].blocks = runner.blocks(page, path.read_text())
        except DocError as error:
            runs[page].failures.append(str(error))
            page_blocks[page] = []
    stacks = Stacks()
    try:
        for page in order(page_blocks):
            run = runs[page]
            for block in page_blocks[page]:
                if block.skip:
                    run.counts[f"skipped ({block.skip})"] += 1
                elif block.run_by:
                    run.counts["run by another test"] += 1
                elif block.kind not in ("shell", "python"):
                    run.counts[f"not a command ({block.lang})"] += 1
                else:
                    try:
                        stacks.use(*block.stack)
                        began = time.monotonic()
                        ran = (
                            runner.run_shell(block, runner.base_env()) if block.kind == "shell" else runner.run_python(block, python_env())
                        )
                    except (DocError, RuntimeError, OSError) as error:
                        run.failures.append(f"{block.where}: {error}")
                        run.counts["failed to run"] += 1
                        continue
                    run.seconds += time.monotonic() - began
                    run.ran.append(ran)
                    run.counts["ran"] += 1
                    run.failures += ran.failures
                    if ran.failures and ran.stderr.strip() and block.kind == "shell":  # a Python block's failure quotes it
                        run.failures.append(f"{block.where}: its stderr:\n{ran.stderr[-3000:]}")
    finally:
        stacks.close()
    return DocsRun(runs, stacks.started, time.monotonic() - started)


@pytest.fixture(scope="module")
def docs_run() -> DocsRun:
    done = run_docs(runner.pages())
    print(done.summary())
    return done


PAGES = [runner.rel(p) for p in runner.pages()]


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_as_written(docs_run: DocsRun, page: str) -> None:
    run = docs_run.pages[page]
    assert not run.failures, f"{page} does not run as written:\n\n" + "\n\n".join(run.failures)


def test_every_block_is_run_or_marked(docs_run: DocsRun, record_property: Callable[[str, object], None]) -> None:
    """The counts (printed at the end of the session by tests/conftest.py), and that the run ran
    something: a parser that found no blocks would pass every page."""
    record_property("docs_run", docs_run.summary())
    print(docs_run.summary())
    ran = sum(run.counts["ran"] for run in docs_run.pages.values())
    assert ran >= 5, docs_run.summary()
    assert docs_run.pages["README.md"].counts["ran"] >= 2, docs_run.summary()


# --------------------------------------------------------------------------- README's answers, altered
LITERAL = re.compile(r'true|false|null|-?\d+|"(?:[^"\\]|\\.)*"')


def alterations(answer: str) -> list[tuple[str, str]]:
    """Every way to alter one literal of an answer (``# [STATUS] BODY``): the status + 1, each
    true/false flipped, each number + 1, null as 0, each string but a wildcard one with a letter
    more. Each is (label, altered answer)."""
    out = []
    status = re.match(r"^\s*([1-5]\d\d)(?=\s|$)", answer)
    if status:
        out.append((f"status {status[1]}", answer[: status.start(1)] + str(int(status[1]) + 1) + answer[status.end(1) :]))
    body_start = status.end() if status else 0
    note = answer.rfind(" (") if answer.rstrip().endswith(")") else len(answer)
    for token in LITERAL.finditer(answer, body_start, note):
        text = token[0]
        if text == '"..."':
            continue
        new = {"true": "false", "false": "true", "null": "0"}.get(text)
        if new is None:
            new = str(int(text) + 1) if text.lstrip("-").isdigit() else text[:-1] + 'Z"'
        out.append((text, answer[: token.start()] + new + answer[token.end() :]))
    return out


def readme_alterations() -> list[tuple[str, int, str, str]]:
    """(id, line, original line, altered line) for every literal of every answer README.md shows."""
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    cases = []
    for block in runner.blocks("README.md", text):
        if not runner.runnable(block) or block.kind != "shell":
            continue
        for cmd in runner.commands(block):
            if cmd.answer is None:
                continue
            source = lines[cmd.answer.line - 1]
            at = source.rindex(cmd.answer.text)
            for label, altered in alterations(cmd.answer.text):
                cases.append(
                    (f"line{cmd.answer.line}-{label}", cmd.answer.line, source, source[:at] + altered + source[at + len(cmd.answer.text) :])
                )
    return cases


README_CASES = readme_alterations()


def test_readme_has_answers_to_alter() -> None:
    assert len({line for _, line, _, _ in README_CASES}) >= 8, README_CASES


@pytest.mark.parametrize(("line", "original", "altered"), [c[1:] for c in README_CASES], ids=[c[0] for c in README_CASES])
def test_altering_any_readme_answer_fails(docs_run: DocsRun, line: int, original: str, altered: str) -> None:
    """A copy of README.md with one answer altered, parsed by the runner and compared with what the
    commands printed in this run: that command's comparison fails (and the original's passes)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[line - 1] == original
    copy = "\n".join([*lines[: line - 1], altered, *lines[line:]]) + "\n"
    readme = docs_run.pages["README.md"]
    for ran in readme.ran:
        if ran.block.kind != "shell":
            continue
        original_cmds = runner.commands(ran.block)
        (altered_block,) = [b for b in runner.blocks("README.md", copy) if b.line == ran.block.line]
        altered_cmds = runner.commands(altered_block)
        assert [c.text for c in altered_cmds if c.answer is None or c.answer.line != line] == [
            c.text for c in original_cmds if c.answer is None or c.answer.line != line
        ]
        for before, after, got in zip(original_cmds, altered_cmds, ran.outcomes, strict=True):
            if after.answer is not None and after.answer.line == line:
                assert runner.compare_answer("README.md", before.text, before.answer, got) == []
                assert runner.compare_answer("README.md", after.text, after.answer, got) != [], (altered, got)
                return
    pytest.fail(f"README.md:{line}: no command of this run has that answer")
