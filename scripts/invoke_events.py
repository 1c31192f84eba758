"""`make invoke-events`: every sample event through `sam local invoke` (Docker), checked.

Starts DynamoDB Local and the SQS emulator on free ports, creates the template's table and
queues, builds the functions, and invokes each event in `SEQUENCE` with `--env-vars` pointing
the functions at them (the template declares AWS_ENDPOINT_URL_DYNAMODB/_SQS for this), then
checks each answer. Needs Docker and the image SAM uses for the template's Runtime (docs/deploy.md "sam local
invoke"); passes `--skip-pull-image`, so a locally built stand-in image works offline. Events
whose times expire (the ledger key, the queued commands, the hot likes: gen_events.STAMPED) are
invoked from a copy stamped just before (the committed files are not touched).

The template's functions are arm64: they are built and invoked for this machine's CPU (``--arch``
to choose) from a copy of the template in .aws-sam/invoke/, as `make local-invoke` and
`make start-api` do (scripts/sam_local.py, which this script shares), with the template's
``FunctionTimeoutSeconds`` raised as they raise it (``sam_local.LOCAL_TIMEOUT_SECONDS``).

A check whose prerequisite did not hold (``Check.needs``: ``get_order`` after a ``create_order``
that timed out) is reported as skipped because of it, not as a second failure.
``make invoke-events ARGS="--only orders/create_order.json,orders/get_order.json"`` runs only those.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]

from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client  # noqa: E402
from devstack.sqs import SqsEmulator, create_queues, sqs_client  # noqa: E402
from devstack.template import read_stack  # noqa: E402
from scripts.sam_local import docker_gateway, ensure_built, event_file, host_arch, invoke_args, missing_image, sam  # noqa: E402

WORK = ROOT / ".aws-sam" / "invoke"
TABLE = "tally-invoke"
COGNITO = ("--parameter-overrides", "AuthMode=COGNITO")  # merged with the raised timeout (sam_local.invoke_args)
REPLAY = "retry_worker/replay_like.json"
POISON = "retry_worker/poison.json"


class Check(NamedTuple):
    """One invocation and what it must answer: an HTTP status with fields the JSON body must hold,
    or the exact answer of a non-API invocation."""

    function: str
    event: str
    expected: Any
    extra: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    """Events whose last check must have held for this one to mean anything (the post it reads, the
    order it gets...). If one failed or was skipped, this check is reported as skipped because of it,
    not as a second failure; one left out by ``--only`` does not hold it back."""


# Every answer is checked for what it did, not only that it did not fail: the retry worker's replay
# by the operation record it leaves.
SEQUENCE: list[Check] = [
    Check("LikesFunction", "likes/create_post.json", (201, {"postId": "p1", "likeTally": 0})),
    Check("LikesFunction", "likes/get_post.json", (200, {"postId": "p1", "likeTally": 0}), needs=("likes/create_post.json",)),
    Check("LikesFunction", "likes/like.json", (200, {"liked": True, "changed": True}), needs=("likes/create_post.json",)),
    Check("LikesFunction", "likes/list_likers.json", (200, {"postId": "p1"}), needs=("likes/like.json",)),
    Check("LikesFunction", "likes/audit.json", (200, {"stored": 1, "counted": 1, "drift": 0}), needs=("likes/like.json",)),
    Check("LikesFunction", "likes/unlike.json", (200, {"liked": False, "changed": True}), needs=("likes/like.json",)),
    Check(
        "LikesFunction",
        "likes/like_as_u1.json",
        (200, {"userId": "u1", "liked": True, "changed": True}),
        COGNITO,
        ("likes/create_post.json",),
    ),
    Check("LikesFunction", "likes/like_as_u2.json", (403, {"error": "forbidden"}), COGNITO, ("likes/create_post.json",)),
    Check("LikesFunction", "likes/create_hot_post.json", (201, {"postId": "h1", "mode": "hot"})),
    Check("LikeAggregatorFunction", "like_aggregator/hot_likes.json", {"batchItemFailures": []}, needs=("likes/create_hot_post.json",)),
    # redelivered: counted once
    Check("LikeAggregatorFunction", "like_aggregator/hot_likes.json", {"batchItemFailures": []}, needs=("like_aggregator/hot_likes.json",)),
    # u1 and u2 liked, u1 unliked
    Check("LikesFunction", "likes/get_hot_post.json", (200, {"mode": "hot", "likeTally": 1}), needs=("like_aggregator/hot_likes.json",)),
    Check("ReservationsFunction", "reservations/create_resource.json", (201, {"resourceId": "tickets", "capacity": 100})),
    Check(
        "ReservationsFunction",
        "reservations/get_resource.json",
        (200, {"reserved": 0, "available": 100}),
        needs=("reservations/create_resource.json",),
    ),
    Check(
        "ReservationsFunction",
        "reservations/reserve.json",
        (201, {"quantity": 2, "status": "CONFIRMED"}),
        needs=("reservations/create_resource.json",),
    ),
    Check(
        "ReservationsFunction",
        "reservations/get_reservation.json",
        (200, {"quantity": 2, "status": "CONFIRMED"}),
        needs=("reservations/reserve.json",),
    ),
    Check("ReservationsFunction", "reservations/release.json", (200, {"changed": True}), needs=("reservations/reserve.json",)),
    Check("LedgerFunction", "ledger/append.json", (201, {})),
    Check("LedgerFunction", "ledger/get.json", (200, {"balance": 5, "pendingEntries": 1}), needs=("ledger/append.json",)),
    Check("LedgerCompactionFunction", "ledger/compact.json", (200, {}), needs=("ledger/append.json",)),
    Check("OrdersFunction", "orders/create_order.json", (201, {"orderId": 1})),
    Check("OrdersFunction", "orders/get_order.json", (200, {"orderId": 1, "customerId": "c1"}), needs=("orders/create_order.json",)),
    Check("OrderPointerFunction", "order_pointer/order_inserts.json", {"batchItemFailures": []}, needs=("orders/create_order.json",)),
    Check("OrdersFunction", "orders/latest_order.json", (200, {"orderId": 2}), needs=("order_pointer/order_inserts.json",)),
    Check("RetryWorkerFunction", REPLAY, {"batchItemFailures": []}, needs=("likes/create_post.json",)),
    # the replay's outcome: the operation record says APPLIED, and u2's like is counted
    Check("OperationsFunction", "operations/get_operation.json", (200, {"status": "APPLIED"}), needs=(REPLAY,)),
    Check(
        "LikesFunction",
        "likes/get_post.json",
        (200, {"postId": "p1", "likeTally": 2}),
        needs=("likes/unlike.json", "likes/like_as_u1.json", REPLAY),
    ),
    Check("RetryWorkerFunction", POISON, {"batchItemFailures": []}),
]


def answer_of(stdout: str, expected: Any) -> Any:
    """What an invocation answered, in the shape of ``expected`` (``None``: no answer, e.g. a timeout)."""
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return None
    if isinstance(expected, tuple) and isinstance(answer, dict):  # a status and fields of the body
        try:
            body = json.loads(answer.get("body") or "{}")
        except json.JSONDecodeError:
            body = {}
        return (answer.get("statusCode"), {k: body.get(k) for k in expected[1]})
    return answer


def run_checks(
    checks: list[Check],
    invoke: Callable[[Check], subprocess.CompletedProcess[str]],
    only: set[str] | None = None,
    report: Callable[[str], None] = print,
) -> dict[str, str]:
    """Each check in turn (those ``only`` names, if given): ``invoke`` it unless a check it needs did
    not hold. Returns each event's last status: ``ok``, ``FAIL`` or ``skip``."""
    status: dict[str, str] = {}
    for check in checks:
        if only is not None and check.event not in only:
            continue
        blocker = next((need for need in check.needs if status.get(need, "ok") != "ok"), None)
        if blocker is not None:
            status[check.event] = "skip"
            report(
                f"skip {check.function:26} {check.event:36} needs {blocker}, which {'failed' if status[blocker] == 'FAIL' else 'was skipped'}"
            )
            continue
        began = time.monotonic()
        out = invoke(check)
        took = time.monotonic() - began
        got = answer_of(out.stdout, check.expected)
        status[check.event] = "ok" if got == check.expected else "FAIL"
        report(f"{status[check.event]:4} {check.function:26} {check.event:36} {got!s:28} {took:5.1f}s")
        if status[check.event] != "ok":
            print(out.stdout[-2000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
    return status


def record_pending(endpoint: str, path: Path) -> None:
    """The PENDING operation record the API writes before it queues a command."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    from counters.core.commands import Command
    from counters.deferral.operations import Operations

    for record in json.loads(path.read_text())["Records"]:
        Operations(TABLE).record_pending(Command.from_message(record["body"]))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make invoke-events", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", type=lambda v: set(v.split(",")), help="comma-separated events (as in SEQUENCE) to invoke, the rest left out"
    )
    parser.add_argument("--arch", choices=["arm64", "x86_64"], default=host_arch(), help="the CPU to build for (default: this machine's)")
    args = parser.parse_args(argv)
    unknown = (args.only or set()) - {c.event for c in SEQUENCE}
    if unknown:
        parser.error(f"--only names no event of SEQUENCE: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str]) -> int:
    options = parse(argv)
    for key, value in {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }.items():
        os.environ.setdefault(key, value)  # this process's own clients (table, queues, the pending record)
    arch = options.arch
    problem = missing_image(arch)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    began = time.monotonic()
    try:
        built, did = ensure_built(arch, WORK)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"sam build ({arch}): {time.monotonic() - began:.0f}s" if did else f"sam build ({arch}) skipped: its inputs are unchanged")
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

            def invoke(check: Check) -> subprocess.CompletedProcess[str]:
                path = event_file(check.event, WORK)
                if check.event == REPLAY:  # as the API did when it deferred the request (202)
                    record_pending(ddb_local.endpoint, path)
                return sam(*invoke_args(check.function, path, built, list(check.extra), env_vars))

            status = run_checks(SEQUENCE, invoke, options.only)
            if POISON in status:
                if status[POISON] == "ok":
                    depth = sqs_client(sqs.endpoint).get_queue_attributes(
                        QueueUrl=urls["RetryDLQ"], AttributeNames=["ApproximateNumberOfMessages"]
                    )
                    poisoned = int(depth["Attributes"]["ApproximateNumberOfMessages"])
                    print(f"{'ok  ' if poisoned == 1 else 'FAIL'} the poison message is in RetryDLQ ({poisoned})")
                    status["RetryDLQ"] = "ok" if poisoned == 1 else "FAIL"
                else:
                    print(f"skip the poison message in RetryDLQ: needs {POISON}, which failed")
        finally:
            sqs.stop()
    failed, skipped = sum(s == "FAIL" for s in status.values()), sum(s == "skip" for s in status.values())
    print(f"{failed} failed, {skipped} skipped because of them")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
