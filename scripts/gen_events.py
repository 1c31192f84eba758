"""Regenerate events/ from `sam local generate-event` output, adapted per route.

Usage: .venv/bin/python scripts/gen_events.py   (needs the sam venv: `make validate` creates it)

Each entry of EVENTS names a file and the request; the base shape comes from SAM itself so
the events stay what `sam local invoke -e` expects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAM = ROOT / ".venv-sam" / "bin" / "sam"

# file, method, path, resource (SAM path), path parameters, query, body, extra headers
EVENTS: list[tuple[str, str, str, str, dict[str, str] | None, dict[str, str] | None, object, dict[str, str]]] = [
    ("likes/create_post.json", "POST", "/posts", "/posts", None, None, {"postId": "p1", "authorId": "alice", "body": "Hello, Tally"}, {}),
    ("likes/get_post.json", "GET", "/posts/p1", "/posts/{postId}", {"postId": "p1"}, None, None, {}),
    ("likes/like.json", "PUT", "/posts/p1/likes/u1", "/posts/{postId}/likes/{userId}", {"postId": "p1", "userId": "u1"}, None, None, {}),
    (
        "likes/unlike.json",
        "DELETE",
        "/posts/p1/likes/u1",
        "/posts/{postId}/likes/{userId}",
        {"postId": "p1", "userId": "u1"},
        None,
        None,
        {},
    ),
    ("likes/list_likers.json", "GET", "/posts/p1/likes", "/posts/{postId}/likes", {"postId": "p1"}, {"limit": "10"}, None, {}),
    ("likes/audit.json", "GET", "/posts/p1/audit", "/posts/{postId}/audit", {"postId": "p1"}, None, None, {}),
    # Ledgers. The Idempotency-Key is a ULID minted at 2027-01-15T08:00:00Z: a live stack
    # answers 422 idempotency_key_expired for it (keys outlive no retry window); mint a fresh
    # one to try it (README). tests/integration/test_ledger_events.py pins the clock to it.
    (
        "ledger/append.json",
        "POST",
        "/ledgers/l1/entries",
        "/ledgers/{ledgerId}/entries",
        {"ledgerId": "l1"},
        None,
        {"amount": 5},
        {"Idempotency-Key": "01MCC5RM0028T5CY4GNF6YY4HM"},
    ),
    ("ledger/get.json", "GET", "/ledgers/l1", "/ledgers/{ledgerId}", {"ledgerId": "l1"}, None, None, {}),
    ("ledger/compact.json", "POST", "/ledgers/l1/compact", "/ledgers/{ledgerId}/compact", {"ledgerId": "l1"}, None, None, {}),
]


def base_event(method: str, path: str, resource: str) -> dict:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    out = subprocess.run(
        [
            str(SAM),
            "local",
            "generate-event",
            "apigateway",
            "aws-proxy",
            "--method",
            method,
            "--path",
            path.lstrip("/"),
            "--resource",
            resource,
            "--stage",
            "dev",
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return json.loads(out)


def main() -> int:
    if not SAM.exists():
        print("sam not found: run `make validate` first to create .venv-sam", file=sys.stderr)
        return 1
    for name, method, path, resource, params, query, body, headers in EVENTS:
        event = base_event(method, path, resource)
        event["path"] = path
        event["requestContext"]["path"] = f"/dev{path}"
        event["requestContext"]["resourcePath"] = resource
        event["pathParameters"] = params
        event["queryStringParameters"] = query
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
        event["stageVariables"] = None
        event["isBase64Encoded"] = False
        event["body"] = json.dumps(body) if body is not None else None
        event["headers"] = {
            **{k: v for k, v in event["headers"].items() if k not in ("Accept",)},
            "Accept": "application/json",
            "Content-Type": "application/json",
            **headers,
        }
        event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
        target = ROOT / "events" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(event, indent=2) + "\n")
        print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
