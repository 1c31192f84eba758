"""`make invoke-events`: every sample event through `sam local invoke` (Docker), checked.

Starts DynamoDB Local and the SQS emulator on free ports, creates the template's table and
queues, builds the functions, and invokes each event in `SEQUENCE` with `--env-vars` pointing
the functions at them (the template declares AWS_ENDPOINT_URL_DYNAMODB/_SQS for this), then
checks each answer. Needs Docker and the image SAM uses for python3.12 (docs/deploy.md "sam local
invoke"); passes `--skip-pull-image`, so a locally built stand-in image works offline. Events
whose times expire (the ledger key, the queued commands, the hot likes: gen_events.STAMPED) are
invoked from a copy stamped just before (the committed files are not touched).

The template's functions are arm64: they are built and invoked for this machine's CPU (``--arch``
to choose) from a copy of the template in .aws-sam/invoke/, as `make local-invoke` and
`make start-api` do (scripts/sam_local.py, which this script shares).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.sqs import SqsEmulator, create_queues, sqs_client  # noqa: E402
from devstack.template import read_stack  # noqa: E402
from scripts.sam_local import build, docker_gateway, event_file, host_arch, missing_image, sam  # noqa: E402

WORK = ROOT / ".aws-sam" / "invoke"
TABLE = "tally-invoke"
COGNITO = ["--parameter-overrides", "AuthMode=COGNITO"]

# (function, event, expected: an HTTP status with fields the JSON body must hold, or the exact
# answer of a non-API invocation; extra sam args). Every answer is checked for what it did, not
# only that it did not fail: the retry worker's replay by the operation record it leaves.
SEQUENCE: list[tuple[str, str, Any, list[str]]] = [
    ("LikesFunction", "likes/create_post.json", (201, {"postId": "p1", "likeTally": 0}), []),
    ("LikesFunction", "likes/get_post.json", (200, {"postId": "p1", "likeTally": 0}), []),
    ("LikesFunction", "likes/like.json", (200, {"liked": True, "changed": True}), []),
    ("LikesFunction", "likes/list_likers.json", (200, {"postId": "p1"}), []),
    ("LikesFunction", "likes/audit.json", (200, {"stored": 1, "counted": 1, "drift": 0}), []),
    ("LikesFunction", "likes/unlike.json", (200, {"liked": False, "changed": True}), []),
    ("LikesFunction", "likes/like_as_u1.json", (200, {"userId": "u1", "liked": True, "changed": True}), COGNITO),
    ("LikesFunction", "likes/like_as_u2.json", (403, {"error": "forbidden"}), COGNITO),
    ("LikesFunction", "likes/create_hot_post.json", (201, {"postId": "h1", "mode": "hot"}), []),
    ("LikeAggregatorFunction", "like_aggregator/hot_likes.json", {"batchItemFailures": []}, []),
    ("LikeAggregatorFunction", "like_aggregator/hot_likes.json", {"batchItemFailures": []}, []),  # redelivered: counted once
    ("LikesFunction", "likes/get_hot_post.json", (200, {"mode": "hot", "likeTally": 1}), []),  # u1 and u2 liked, u1 unliked
    ("ReservationsFunction", "reservations/create_resource.json", (201, {"resourceId": "tickets", "capacity": 100}), []),
    ("ReservationsFunction", "reservations/get_resource.json", (200, {"reserved": 0, "available": 100}), []),
    ("ReservationsFunction", "reservations/reserve.json", (201, {"quantity": 2, "status": "CONFIRMED"}), []),
    ("ReservationsFunction", "reservations/get_reservation.json", (200, {"quantity": 2, "status": "CONFIRMED"}), []),
    ("ReservationsFunction", "reservations/release.json", (200, {"changed": True}), []),
    ("LedgerFunction", "ledger/append.json", (201, {}), []),
    ("LedgerFunction", "ledger/get.json", (200, {"balance": 5, "pendingEntries": 1}), []),
    ("LedgerCompactionFunction", "ledger/compact.json", (200, {}), []),
    ("OrdersFunction", "orders/create_order.json", (201, {"orderId": 1}), []),
    ("OrdersFunction", "orders/get_order.json", (200, {"orderId": 1, "customerId": "c1"}), []),
    ("OrderPointerFunction", "order_pointer/order_inserts.json", {"batchItemFailures": []}, []),
    ("OrdersFunction", "orders/latest_order.json", (200, {"orderId": 2}), []),
    ("RetryWorkerFunction", "retry_worker/replay_like.json", {"batchItemFailures": []}, []),
    # the replay's outcome: the operation record says APPLIED, and u2's like is counted
    ("OperationsFunction", "operations/get_operation.json", (200, {"status": "APPLIED"}), []),
    ("LikesFunction", "likes/get_post.json", (200, {"postId": "p1", "likeTally": 2}), []),
    ("RetryWorkerFunction", "retry_worker/poison.json", {"batchItemFailures": []}, []),
]


def record_pending(endpoint: str, path: Path) -> None:
    """The PENDING operation record the API writes before it queues a command."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    from counters.core.commands import Command
    from counters.deferral.operations import Operations

    for record in json.loads(path.read_text())["Records"]:
        Operations(TABLE).record_pending(Command.from_message(record["body"]))


def main() -> int:
    for key, value in {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }.items():
        os.environ.setdefault(key, value)  # this process's own clients (table, queues, the pending record)
    arch = sys.argv[sys.argv.index("--arch") + 1] if "--arch" in sys.argv else host_arch()
    problem = missing_image(arch)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    began = time.monotonic()
    try:
        built = build(arch, WORK)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"sam build ({arch}): {time.monotonic() - began:.0f}s")
    failures = 0
    # The containers reach the host through Docker's bridge gateway: DynamoDB Local and the SQS
    # emulator listen there (not on 0.0.0.0), and only for the length of this run.
    gateway = docker_gateway()
    with DynamoDBLocal(host=gateway) as ddb_local:
        sqs = SqsEmulator(host=gateway).start()
        try:
            create_table(dynamodb_client(ddb_local.endpoint), read_stack(TABLE))
            urls, _ = create_queues(sqs_client(sqs.endpoint), TABLE)
            env_vars = WORK / "env.json"
            env_vars.write_text(
                json.dumps(
                    {
                        "Parameters": {
                            "TABLE_NAME": TABLE,
                            "RETRY_QUEUE_URL": urls["RetryQueue"],
                            "AWS_ENDPOINT_URL_DYNAMODB": ddb_local.endpoint,
                            "AWS_ENDPOINT_URL_SQS": sqs.endpoint,
                        },
                        "RetryWorkerFunction": {"RETRY_DLQ_URL": urls["RetryDLQ"]},
                    }
                )
            )
            only = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else None
            for function, event, expected, extra in SEQUENCE:
                if only is not None and event not in only:
                    continue
                path = event_file(event, WORK)
                if event == "retry_worker/replay_like.json":  # as the API did when it deferred the request (202)
                    record_pending(ddb_local.endpoint, path)
                began = time.monotonic()
                args = ["local", "invoke", function, "-t", str(built), "-e", str(path)]
                args += ["--env-vars", str(env_vars), "--skip-pull-image", *extra]
                out = sam(*args)
                took = time.monotonic() - began
                try:
                    answer = json.loads(out.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    answer = None
                if isinstance(expected, tuple) and isinstance(answer, dict):  # a status and fields of the body
                    try:
                        body = json.loads(answer.get("body") or "{}")
                    except json.JSONDecodeError:
                        body = {}
                    got = (answer.get("statusCode"), {k: body.get(k) for k in expected[1]})
                else:
                    got = answer.get("statusCode") if isinstance(expected, int) and isinstance(answer, dict) else answer
                ok = got == expected
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {function:26} {event:36} {got!s:28} {took:5.1f}s")
                if not ok:
                    print(out.stdout[-2000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
            depth = sqs_client(sqs.endpoint).get_queue_attributes(QueueUrl=urls["RetryDLQ"], AttributeNames=["ApproximateNumberOfMessages"])
            poisoned = int(depth["Attributes"]["ApproximateNumberOfMessages"])
            if only is None or "retry_worker/poison.json" in only:
                print(f"{'ok  ' if poisoned == 1 else 'FAIL'} the poison message is in RetryDLQ ({poisoned})")
                failures += poisoned != 1
        finally:
            sqs.stop()
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
