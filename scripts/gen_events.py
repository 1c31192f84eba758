"""Regenerate events/ from `sam local generate-event` output, adapted per route.

Usage: make events                 (every event; needs the sam venv, which `make events` creates)
       make ledger-key             (only a fresh Idempotency-Key in events/ledger/append.json)

Each entry of EVENTS names a file and the request; the base shape comes from SAM itself so
the events stay what `sam local invoke -e` expects. tests/tooling/test_events.py checks that the
committed events carry exactly these requests.

The ledger append's Idempotency-Key is a ULID minted when the event is generated: the ledger
refuses keys older than its retry window (LedgerRetryWindowSeconds, 10 minutes), so no static
key can work whenever it is invoked. Re-mint it right before `sam local invoke` with
events/ledger/append.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAM = ROOT / ".venv-sam" / "bin" / "sam"
sys.path.insert(0, str(ROOT / "layers" / "counters"))

from counters.primitives.ledger import new_key  # noqa: E402
from counters.services.likes.model import SPREAD  # noqa: E402
from counters.store.post_items import hot_pk, lane_of  # noqa: E402

LEDGER_APPEND = "ledger/append.json"
LEDGER_KEY = "<minted when generated>"  # replaced by a ULID for now (see the module docstring)

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
    # a hot post (its likes are counted by LikeAggregatorFunction: events/like_aggregator/hot_likes.json)
    (
        "likes/create_hot_post.json",
        "POST",
        "/posts",
        "/posts",
        None,
        None,
        {"postId": "h1", "authorId": "alice", "body": "Hot take", "mode": "hot"},
        {},
    ),
    ("likes/get_hot_post.json", "GET", "/posts/h1", "/posts/{postId}", {"postId": "h1"}, None, None, {}),
    ("likes/list_likers.json", "GET", "/posts/p1/likes", "/posts/{postId}/likes", {"postId": "p1"}, {"limit": "10"}, None, {}),
    ("likes/audit.json", "GET", "/posts/p1/audit", "/posts/{postId}/audit", {"postId": "p1"}, None, None, {}),
    # Ledgers. The Idempotency-Key is minted at generation time (LEDGER_KEY);
    # tests/integration/test_ledger_events.py pins the clock to whatever key the file holds.
    (
        LEDGER_APPEND,
        "POST",
        "/ledgers/l1/entries",
        "/ledgers/{ledgerId}/entries",
        {"ledgerId": "l1"},
        None,
        {"amount": 5},
        {"Idempotency-Key": LEDGER_KEY},
    ),
    ("ledger/get.json", "GET", "/ledgers/l1", "/ledgers/{ledgerId}", {"ledgerId": "l1"}, None, None, {}),
    ("ledger/compact.json", "POST", "/ledgers/l1/compact", "/ledgers/{ledgerId}/compact", {"ledgerId": "l1"}, None, None, {}),
    (
        "operations/get_operation.json",
        "GET",
        "/operations/0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "/operations/{operationId}",
        {"operationId": "0f1e2d3c4b5a69788796a5b4c3d2e1f0"},
        None,
        None,
        {},
    ),
    # reservations (the reservation id is uuid5 of resourceId + Idempotency-Key: counters.services.reservations.reservation_id)
    (
        "reservations/create_resource.json",
        "POST",
        "/resources",
        "/resources",
        None,
        None,
        {"resourceId": "tickets", "capacity": 100, "strategy": "marker", "shards": 1},
        {},
    ),
    ("reservations/get_resource.json", "GET", "/resources/tickets", "/resources/{resourceId}", {"resourceId": "tickets"}, None, None, {}),
    (
        "reservations/reserve.json",
        "POST",
        "/resources/tickets/reservations",
        "/resources/{resourceId}/reservations",
        {"resourceId": "tickets"},
        None,
        {"quantity": 2},
        {"Idempotency-Key": "order-1001"},
    ),
    (
        "reservations/get_reservation.json",
        "GET",
        "/resources/tickets/reservations/705fb079-23f0-50ab-8c07-845ca70a1af0",
        "/resources/{resourceId}/reservations/{reservationId}",
        {"resourceId": "tickets", "reservationId": "705fb079-23f0-50ab-8c07-845ca70a1af0"},
        None,
        None,
        {},
    ),
    (
        "reservations/release.json",
        "DELETE",
        "/resources/tickets/reservations/705fb079-23f0-50ab-8c07-845ca70a1af0",
        "/resources/{resourceId}/reservations/{reservationId}",
        {"resourceId": "tickets", "reservationId": "705fb079-23f0-50ab-8c07-845ca70a1af0"},
        None,
        None,
        {},
    ),
    (
        "orders/create_order.json",
        "POST",
        "/orders",
        "/orders",
        None,
        None,
        {"customerId": "c1", "items": [{"sku": "sku-1", "quantity": 2}, {"sku": "sku-2", "quantity": 1}]},
        {"Idempotency-Key": "3f0c8a52-order-sample"},
    ),
    ("orders/get_order.json", "GET", "/orders/1", "/orders/{orderId}", {"orderId": "1"}, None, None, {}),
    ("orders/latest_order.json", "GET", "/orders/latest", "/orders/latest", None, None, None, {}),
]

# file, list of (message id, command) for the retry worker's SQS events
SQS_EVENTS: list[tuple[str, list[tuple[str, dict]]]] = [
    (
        "retry_worker/replay_like.json",
        [
            (
                "6f1c1e52-3f0e-4b7e-9a51-4d2f0c6f1a01",
                {
                    "op": "like",
                    "payload": {"postId": "p1", "userId": "u2", "at": 1795370000000},  # when the API received it (ms)
                    "token": "b5f1",
                    "operation_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
                    "created_at": 1795370000,
                    "version": 1,
                },
            )
        ],
    ),
    (
        "retry_worker/poison.json",
        [
            (
                "6f1c1e52-3f0e-4b7e-9a51-4d2f0c6f1a02",
                {
                    "op": "no_such_operation",
                    "payload": {},
                    "token": "t",
                    "operation_id": "1f1e2d3c4b5a69788796a5b4c3d2e1f0",
                    "created_at": 1795370000,
                    "version": 1,
                },
            )
        ],
    ),
]


# AuthMode COGNITO: the same requests as API Gateway passes them after its Cognito authorizer
# verified the ID token (claims flattened to strings). `sam local invoke` needs
# `--parameter-overrides AuthMode=COGNITO` for the function to read them.
COGNITO_EVENTS: list[tuple[str, str, dict[str, str]]] = [
    ("likes/like.json", "likes/like_as_u1.json", {"sub": "u1", "cognito:username": "u1", "token_use": "id"}),
    ("likes/like.json", "likes/like_as_u2.json", {"sub": "u2", "cognito:username": "u2", "token_use": "id"}),  # 403: the path says u1
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


def order_inserts_event() -> dict:
    """`sam local generate-event dynamodb update`, reshaped into the table's stream as the order
    pointer function receives it: ORDER#2 and ORDER#1 inserted (out of order), and a MODIFY of
    the sequence item that the event filter would drop (the handler ignores it too)."""
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    out = subprocess.run([str(SAM), "local", "generate-event", "dynamodb", "update"], check=True, capture_output=True, text=True, env=env)
    base = json.loads(out.stdout)["Records"]
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/tally-dev-CountersTable/stream/2026-01-01T00:00:00.000"
    records = []
    for template, pk, image in (
        (base[0], "ORDER#2", {"orderId": {"N": "2"}, "customerId": {"S": "c1"}}),
        (base[0], "ORDER#1", {"orderId": {"N": "1"}, "customerId": {"S": "c1"}}),
        (base[1], "SEQ#ORDER", {"value": {"N": "2"}}),
    ):
        record = json.loads(json.dumps(template))
        keys = {"PK": {"S": pk}, "SK": {"S": "META"}}
        record["dynamodb"].update({"Keys": keys, "NewImage": {**keys, **image}, "StreamViewType": "NEW_IMAGE"})
        record["dynamodb"].pop("OldImage", None)
        record["dynamodb"]["SequenceNumber"] = str(4421584500000000017450439091 + len(records))
        record["eventID"] = f"{len(records) + 1:032x}"
        record["eventSourceARN"] = arn
        records.append(record)
    return {"Records": records}


HOT_POST = "h1"
# (eventName, user, liked, delta): what hot likes write under the post's spread keys, in stream order
HOT_LIKES: list[tuple[str, str, bool, int]] = [
    ("INSERT", "u1", True, 1),  # u1 likes
    ("INSERT", "u2", True, 1),  # u2 likes
    ("MODIFY", "u1", False, -1),  # u1 unlikes: the item stays as a tombstone; the tally nets +1
]
HOT_LIKES_FIRST_SEQ = 4421584500000000017450440000
HOT_LIKES_AT_MS = 1795370000000  # when the requests were received (ms); the records' creation time is this, in s


def hot_likes_event() -> dict:
    """`sam local generate-event dynamodb update`, reshaped into what LikeAggregatorFunction receives
    from the table's stream (NEW_IMAGE, after the template's filter): the like items of hot post h1
    under its spread keys, each carrying its ``delta``."""
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    out = subprocess.run([str(SAM), "local", "generate-event", "dynamodb", "update"], check=True, capture_output=True, text=True, env=env)
    base = json.loads(out.stdout)["Records"]
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/tally-dev-CountersTable/stream/2026-01-01T00:00:00.000"
    records = []
    liked_at: dict[str, int] = {}
    for n, (name, user, liked, delta) in enumerate(HOT_LIKES):
        record = json.loads(json.dumps(base[0] if name == "INSERT" else base[1]))
        keys = {"PK": {"S": hot_pk(HOT_POST, lane_of(user, SPREAD))}, "SK": {"S": f"LIKE#USER#{user}"}}
        at = HOT_LIKES_AT_MS + n * 1000
        request = f"{n + 1:032x}"
        image = {
            **keys,
            "postId": {"S": HOT_POST},
            "userId": {"S": user},
            "liked": {"BOOL": liked},
            "delta": {"N": str(delta)},
            "changedAt": {"N": str(at)},
            "changedBy": {"S": request},
            "requestId": {"S": request},
        }
        if liked:
            liked_at[user] = at // 1000
        else:  # a tombstone keeps the like's likedAt and expires 15 days after its stamp (toggle.expires_at)
            image["expiresAt"] = {"N": str(at // 1000 + 15 * 24 * 3600)}
        if user in liked_at:
            image["likedAt"] = {"N": str(liked_at[user])}
        record["dynamodb"].update(
            {"Keys": keys, "NewImage": image, "StreamViewType": "NEW_IMAGE", "ApproximateCreationDateTime": at // 1000}
        )
        record["dynamodb"].pop("OldImage", None)
        record["dynamodb"]["SequenceNumber"] = str(HOT_LIKES_FIRST_SEQ + n)
        record["dynamodb"]["SizeBytes"] = 180
        record["eventName"] = name
        record["eventID"] = f"{n + 101:032x}"
        record["eventSourceARN"] = arn
        records.append(record)
    return {"Records": records}


def sqs_base() -> dict:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    out = subprocess.run(
        [str(SAM), "local", "generate-event", "sqs", "receive-message"], check=True, capture_output=True, text=True, env=env
    ).stdout
    return json.loads(out)


def fresh_ledger_key() -> str:
    """Write a ULID minted now into events/ledger/append.json (no sam needed); returns it."""
    path = ROOT / "events" / LEDGER_APPEND
    event = json.loads(path.read_text())
    key = new_key()
    event["headers"]["Idempotency-Key"] = key
    event["multiValueHeaders"]["Idempotency-Key"] = [key]
    path.write_text(json.dumps(event, indent=2) + "\n")
    return key


def md5_of_body(body: str) -> str:
    """SQS's ``md5OfBody``: the MD5 of the body's UTF-8 bytes."""
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()


def sqs_body(command: dict) -> str:
    return json.dumps(command, separators=(",", ":"), sort_keys=True)


STAMPED = (LEDGER_APPEND, "retry_worker/replay_like.json", "retry_worker/poison.json", "like_aggregator/hot_likes.json")
"""The committed events whose times are stamped when they are invoked (:func:`stamped`)."""


def stamped(name: str, event: dict, now_ms: int) -> dict:
    """The committed event ``name`` as if it were sent at ``now_ms``: a copy, the file untouched.

    The committed files carry fixed times, and what they drive expires: a ledger key after the
    retry window (10 minutes), a queued command's operation record 7 days after its
    ``created_at`` (DynamoDB Local enforces the TTL), a replayed like past the replay horizon
    (14 days). So whoever invokes them stamps them first (scripts/invoke_events.py):

    * ``ledger/append.json``: a ULID minted at ``now_ms``;
    * ``retry_worker/*.json``: each command's ``created_at`` (s) and ``payload.at`` (ms, when
      the API received the request) at ``now_ms``, ``md5OfBody`` recomputed, SQS's timestamps;
    * ``like_aggregator/hot_likes.json``: every time in the records moved by whole seconds so
      the last record is from just before ``now_ms`` (their spacing and order kept).

    Any other event is returned as it is (an API event's 2015 ``requestTimeEpoch`` is more than
    5 minutes away, so the function orders it by its own clock).
    """
    event = json.loads(json.dumps(event))
    if name == LEDGER_APPEND:
        key = new_key(now_ms / 1000)
        event["headers"]["Idempotency-Key"], event["multiValueHeaders"]["Idempotency-Key"] = key, [key]
    elif name.startswith("retry_worker/"):
        for record in event["Records"]:
            command = json.loads(record["body"])
            command["created_at"] = now_ms // 1000
            if "at" in command.get("payload", {}):
                command["payload"]["at"] = now_ms
            record["body"] = sqs_body(command)
            record["md5OfBody"] = md5_of_body(record["body"])
            record["attributes"]["SentTimestamp"] = str(now_ms)
            record["attributes"]["ApproximateFirstReceiveTimestamp"] = str(now_ms + 1)
    elif name == "like_aggregator/hot_likes.json":
        last_s = max(int(r["dynamodb"]["NewImage"]["changedAt"]["N"]) for r in event["Records"]) // 1000
        shift_s = now_ms // 1000 - 1 - last_s
        for record in event["Records"]:
            change, image = record["dynamodb"], record["dynamodb"]["NewImage"]
            change["ApproximateCreationDateTime"] += shift_s
            image["changedAt"]["N"] = str(int(image["changedAt"]["N"]) + shift_s * 1000)
            for field in ("likedAt", "expiresAt"):
                if field in image:
                    image[field]["N"] = str(int(image[field]["N"]) + shift_s)
    return event


def write_api_event(entry: tuple[str, str, str, str, dict[str, str] | None, dict[str, str] | None, object, dict[str, str]]) -> None:
    """One API Gateway event of EVENTS, from `sam local generate-event apigateway aws-proxy`."""
    name, method, path, resource, params, query, body, headers = entry
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
        **{k: (new_key() if v == LEDGER_KEY else v) for k, v in headers.items()},
    }
    event["multiValueHeaders"] = {k: [v] for k, v in event["headers"].items()}
    target = ROOT / "events" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(event, indent=2) + "\n")
    print(f"wrote {target.relative_to(ROOT)}")


def main() -> int:
    if "--ledger-key-only" in sys.argv[1:]:
        key = fresh_ledger_key()
        print(f"events/{LEDGER_APPEND}: Idempotency-Key {key} (valid for LedgerRetryWindowSeconds, default 10 minutes)")
        return 0
    if not SAM.exists():
        print("sam not found: run `make validate` first to create .venv-sam", file=sys.stderr)
        return 1
    target = ROOT / "events" / "order_pointer" / "order_inserts.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(order_inserts_event(), indent=2) + "\n")
    print(f"wrote {target.relative_to(ROOT)}")
    target = ROOT / "events" / "like_aggregator" / "hot_likes.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(hot_likes_event(), indent=2) + "\n")
    print(f"wrote {target.relative_to(ROOT)}")
    for entry in EVENTS:
        write_api_event(entry)
    for source, name, claims in COGNITO_EVENTS:
        event = json.loads((ROOT / "events" / source).read_text())
        event["requestContext"]["authorizer"] = {"claims": claims}
        target = ROOT / "events" / name
        target.write_text(json.dumps(event, indent=2) + "\n")
        print(f"wrote {target.relative_to(ROOT)}")
    for name, messages in SQS_EVENTS:
        template = sqs_base()["Records"][0]
        records = []
        for message_id, command in messages:
            body = sqs_body(command)
            records.append(
                {
                    **template,
                    "messageId": message_id,
                    "body": body,
                    "md5OfBody": md5_of_body(body),
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:tally-dev-RetryQueue",
                }
            )
        target = ROOT / "events" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"Records": records}, indent=2) + "\n")
        print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
