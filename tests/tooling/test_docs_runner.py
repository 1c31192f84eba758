"""The docs runner's rules on made-up pages (no stack): markers, answers, matching, the curl status."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from tests.e2e.docs import runner
from tests.e2e.docs.runner import DocError


def page(text: str) -> list[runner.Block]:
    return runner.blocks("docs/x.md", text)


@pytest.mark.parametrize(
    ("pattern", "actual", "expected"),
    [
        ('{"a":1}', '{"a":1}', True),
        ('{"a":1}', '{"a":2}', False),
        ('{"a":1}', '{"a":1} ', False),
        ('...,"changed":false}', '{"x":1,"changed":false}', True),
        ('...,"changed":false}', '{"x":1,"changed":true}', False),
        ('...,"changed":false', '{"x":1,"changed":false}', False),
        ('{"message":"..."}', '{"message":"any text"}', True),
        ('{"a":...}', '{"a":[1,\n2]}', True),
        ("...\nlast", "pip says\nthings\nlast", True),
        ("first...", "second", False),
    ],
)
def test_a_body_matches_the_whole_output_with_wildcards(pattern: str, actual: str, expected: bool) -> None:
    assert runner.matches(pattern, actual) is expected


@pytest.mark.parametrize(
    ("comment", "status", "body", "note"),
    [
        (' 400 {"error":"x"}', 400, '{"error":"x"}', None),
        (' {"a":1}   (a note)', None, '{"a":1}', "a note"),
        (" 422", 422, None, None),
        (' 200 {"a":1} (the same)', 200, '{"a":1}', "the same"),
        (' ...,"b":2}', None, '...,"b":2}', None),
    ],
)
def test_an_answer_parses(comment: str, status: int | None, body: str | None, note: str | None) -> None:
    answer = runner.parse_answer(comment, 1)
    assert answer is not None
    assert (answer.status, answer.body, answer.note) == (status, body, note)


def test_a_note_alone_is_no_answer_and_prose_is_refused() -> None:
    assert runner.parse_answer(" (replication: about a second)", 1) is None
    for prose in (" 200, same entryId", " the order", " 422 idempotency_key_reused", " in eu-west-1: {}"):
        with pytest.raises(DocError, match="is not an answer"):
            runner.parse_answer(prose, 1)


def test_commands_continuations_and_answers_below() -> None:
    (block,) = page(
        '```bash\nJ=\'x\'\ncurl -s a \\\n  -d \'{"#":1}\'   # 201 {"a":1}\ncurl -s b\n# {"b":2}\n\n# a plain comment\ncurl -s c   # (a note)\n```\n'
    )
    cmds = runner.commands(block)
    assert [c.text.split()[0] for c in cmds] == ["J='x'", "curl", "curl", "curl"]
    assert cmds[1].text.endswith('# 201 {"a":1}') and cmds[1].answer is not None and cmds[1].answer.status == 201
    assert cmds[2].answer is not None and cmds[2].answer.body == '{"b":2}'
    assert cmds[0].answer is None and cmds[3].answer is None


def test_markers() -> None:
    blocks = page(
        "<!-- docs: skip aws -->\n```bash\naws s3 ls\n```\n\n<!-- docs: stack dev-regions --mode mrsc -->\n```bash\ncurl x\n```\n"
        "\n```python\nprint(1)\n```\n\n```text\n1\n```\n"
    )
    assert [b.skip for b in blocks] == ["aws", None, None, None]
    assert blocks[1].stack == ("dev-regions", ("--mode", "mrsc"))
    assert blocks[2].stack == ("dev", ()) and blocks[2].output == "1"
    assert [runner.runnable(b) for b in blocks] == [False, True, True, False]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("```\nmake dev\n```\n", "no language and no marker"),
        ("<!-- docs: skip -->\n```bash\nx\n```\n", "needs a reason"),
        ("<!-- docs: skip later -->\n```bash\nx\n```\n", "needs a reason"),
        ("<!-- docs: run-by tests/nothing.py -->\n```bash\nx\n```\n", "no such file"),
        ("<!-- docs: run-by tests/e2e/docs/runner.py -->\n```bash\nx\n```\n", "never names docs/x.md"),
        ("<!-- docs: stack prod -->\n```bash\nx\n```\n", "takes NAME"),
        ("<!-- docs: maybe -->\n```bash\nx\n```\n", "unknown marker"),
        ("```bash\nx\n", "never closed"),
    ],
)
def test_a_page_that_breaks_the_rules_fails(text: str, error: str) -> None:
    with pytest.raises(DocError, match=error):
        page(text)


def test_an_indented_fence_in_a_list_item() -> None:
    (block,) = page("- redrive:\n  <!-- docs: skip aws -->\n  ```bash\n  aws sqs x \\\n      --y\n  ```\n")
    assert block.skip == "aws" and block.text == "aws sqs x \\\n    --y"


@pytest.fixture
def server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            status = 404 if self.path == "/missing" else 200
            body = b'{"path":"' + self.path.encode() + b'"}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def test_each_command_its_output_and_its_curl_status(server: str) -> None:
    (block,) = page(
        "```bash\n"
        f'curl -s {server}/a   # 200 {{"path":"/a"}}\n'
        f"curl -s {server}/missing   # 404 {{...}}\n"
        f"curl -s {server}/b | grep -o b   # b\n"
        "X=1\n"
        "```\n"
    )
    with pytest.raises(DocError):  # `# b` is not an answer: BODY starts with { [ " or ...
        runner.commands(block)
    (block,) = page(f'```bash\ncurl -s {server}/a   # 200 {{"path":"/a"}}\ncurl -s {server}/missing   # 404 {{...}}\nX=1\n```\n')
    ran = runner.run_shell(block, runner.base_env())
    assert ran.failures == [], ran.failures
    assert [(o.stdout, o.status, o.rc) for o in ran.outcomes] == [('{"path":"/a"}', 200, 0), ('{"path":"/missing"}', 404, 0), ("", None, 0)]


def test_a_wrong_status_a_wrong_body_and_a_failing_command_fail(server: str) -> None:
    (block,) = page(f'```bash\ncurl -s {server}/missing   # 200 {{...}}\ncurl -s {server}/a   # {{"path":"/b"}}\nfalse\n```\n')
    failures = runner.run_shell(block, runner.base_env()).failures
    assert len(failures) == 3, failures
    assert "status 200" in failures[0] and "got status 404" in failures[0]
    assert '{"path":"/a"}' in failures[1]
    assert "exit code 1" in failures[2]


def test_a_python_block_and_its_output() -> None:
    blocks = page("```python\nprint('a')\nprint('b')\n```\n\n```text\na\n...\n```\n\n```python\nprint('c')\n```\n\n```text\nd\n```\n")
    assert runner.run_python(blocks[0], runner.base_env()).failures == []
    assert "the page shows the output" in runner.run_python(blocks[2], runner.base_env()).failures[0]
    (broken,) = page("```python\nraise SystemExit(3)\n```\n")
    assert "exited 3" in runner.run_python(broken, runner.base_env()).failures[0]


def test_a_block_that_hangs_is_stopped_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "HANG_GUARD", 1)
    (block,) = page('```bash\necho \'"one"\'   # "one"\nuntil false; do sleep 0.1; done\necho two\n```\n')
    ran = runner.run_shell(block, runner.base_env())
    assert [o.rc for o in ran.outcomes] == [0, -2, -1]
    assert len(ran.failures) == 2, ran.failures
    assert "stopped after 1 s, in its command 1: until false" in ran.failures[0], ran.failures
    assert "never ran" in ran.failures[1] and "echo two" in ran.failures[1], ran.failures
