"""``python -m devstack``: DynamoDB Local, SQS and the template's API on localhost, no Docker.

* Starts DynamoDB Local on 127.0.0.1:8000 (or uses ``AWS_ENDPOINT_URL_DYNAMODB`` if set, waiting
  up to ``--wait-dynamodb`` seconds for it to answer, then failing in one line).
* Starts an SQS emulator (moto's server) on 127.0.0.1:9324 (or uses ``AWS_ENDPOINT_URL_SQS``)
  and creates the template's queues, DLQ redrive included.
* Creates the table from template.yaml's definition, for the template's parameter defaults or
  ``--parameter-overrides Key=Value ...`` (as ``sam deploy`` takes them).
* Serves the API on http://127.0.0.1:3000, each function in its own worker processes, and
  feeds every SQS event source to its function.
* Logs one line per API request (method path status ms).
* Ctrl-C (or SIGTERM, or SIGINT to a background job) stops everything it started; DynamoDB Local also dies with it on SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

from devstack.dynamodb_local import DynamoDBLocal, EndpointUnreachable, wait_for_dynamodb
from devstack.sqs import DeliveryFaults
from devstack.stack import LocalStack
from devstack.template import ROOT


def parameter_overrides(pairs: list[str]) -> dict[str, str]:
    """``Key=Value`` pairs (each may also hold several, space-separated, as one quoted argument) as a
    dict; a key the template does not declare is refused, as CloudFormation refuses it."""
    from devstack.template import load

    declared = load()["Parameters"]
    overrides: dict[str, str] = {}
    for pair in (p for arg in pairs for p in arg.split()):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--parameter-overrides takes KEY=VALUE pairs, not {pair!r}")
        if key not in declared:
            raise ValueError(f"template.yaml has no parameter {key!r} (it has {', '.join(sorted(declared))})")
        overrides[key] = value
    return overrides


DELIVERY_KEYS = {"duplicate", "late", "stream_duplicate", "seed", "visibility", "queue_pollers"}


def delivery_options(text: str | None) -> dict[str, Any]:
    """``--deliveries`` JSON as :class:`LocalStack` arguments (delivery faults, visibility, pollers)."""
    if not text:
        return {}
    try:
        spec = json.loads(text)
    except ValueError as error:
        raise ValueError(f"--deliveries is not JSON: {error}") from None
    if not isinstance(spec, dict) or set(spec) - DELIVERY_KEYS:
        raise ValueError(f"--deliveries takes an object with keys among {', '.join(sorted(DELIVERY_KEYS))}")
    options: dict[str, Any] = {
        "delivery_faults": DeliveryFaults(
            duplicate=float(spec.get("duplicate", 0)), late=float(spec.get("late", 0)), seed=int(spec.get("seed", 0))
        ),
        "stream_duplicates": float(spec.get("stream_duplicate", 0)),
    }
    if "visibility" in spec:
        options["visibility_override"] = int(spec["visibility"])
    if "queue_pollers" in spec:
        options["queue_pollers"] = int(spec["queue_pollers"])
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000, help="API port (default 3000)")
    parser.add_argument("--dynamodb-port", type=int, default=8000, help="DynamoDB Local port (default 8000)")
    parser.add_argument("--sqs-port", type=int, default=9324, help="SQS emulator port (default 9324)")
    parser.add_argument("--table", default=os.environ.get("TALLY_TABLE", "tally-local"), help="table name (default tally-local)")
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--concurrency", type=int, default=4, help="worker processes per function")
    parser.add_argument(
        "--auth",
        choices=["NONE", "COGNITO"],
        default="NONE",
        help="the template's AuthMode (COGNITO: local tokens, python -m devstack.auth)",
    )
    parser.add_argument(
        "--parameter-overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="template parameters, as `sam deploy --parameter-overrides` takes them "
        "(e.g. GlobalTableMode=mrec ReplicaRegions=eu-west-1,us-east-1 LedgerRetryWindowSeconds=5)",
    )
    parser.add_argument(
        "--region",
        default=None,
        help="the AWS Region this stack plays (AWS_REGION and AWS_DEFAULT_REGION for it and its functions; "
        "default: AWS_REGION, else us-east-1). One DynamoDB Local keeps a database per Region.",
    )
    parser.add_argument(
        "--backend-host",
        default="127.0.0.1",
        help="address DynamoDB Local and the SQS emulator listen on (172.17.0.1: reachable from `sam local` containers on Linux)",
    )
    parser.add_argument(
        "--wait-dynamodb",
        type=float,
        default=float(os.environ.get("DEVSTACK_WAIT_DYNAMODB", "30")),
        metavar="SECONDS",
        help="how long to wait for AWS_ENDPOINT_URL_DYNAMODB to answer before giving up (default 30, env DEVSTACK_WAIT_DYNAMODB)",
    )
    parser.add_argument(
        "--deliveries",
        default=None,
        metavar="JSON",
        help="test hook (the HTTP proofs): seeded delivery faults, e.g. "
        '\'{"duplicate": 0.15, "late": 0.1, "stream_duplicate": 0.25, "seed": 7, "visibility": 2, "queue_pollers": 2}\'',
    )
    parser.add_argument("--quiet", action="store_true", help="no access log line per request")
    parser.add_argument("--metrics", action="store_true", help="print the functions' EMF metrics blobs")
    args = parser.parse_args(argv)
    try:
        overrides = parameter_overrides(args.parameter_overrides)
        deliveries = delivery_options(args.deliveries)
    except ValueError as error:
        parser.error(str(error))
    if args.region:
        os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = args.region
    os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")

    if not args.metrics:  # workers drop the EMF blob and the "No application metrics" warning of every request
        os.environ.setdefault("DEVSTACK_QUIET_METRICS", "1")

    def interrupt(*_: object) -> None:
        # The first signal stops the stack; a second one while it stops (Ctrl-C twice, or SIGTERM
        # after Ctrl-C) is ignored, so stopping is never cut short by a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # SIGTERM stops it like Ctrl-C: everything is cleaned up
    # Set, not inherited: a shell starts a background job (`python -m devstack &` without job
    # control) with SIGINT ignored, and Python then installs no handler of its own.
    signal.signal(signal.SIGINT, interrupt)
    ddb_local = None
    stack = None
    try:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        if not endpoint:
            # -sharedDb: one database whatever a client's access key and Region, so a user's own
            # script, the AWS CLI or NoSQL Workbench on :8000 sees this stack's table (docs/layer.md)
            ddb_local = DynamoDBLocal(
                port=args.dynamodb_port, log=ROOT / ".dynamodb-local.log", host=args.backend_host, shared_db=True
            ).start()
            endpoint = ddb_local.endpoint
            print(f"DynamoDB Local   {endpoint}   (started in {ddb_local.started_in:.1f}s, in memory)", flush=True)
        else:
            waited = wait_for_dynamodb(endpoint, args.wait_dynamodb)
            print(f"DynamoDB         {endpoint}   (from AWS_ENDPOINT_URL_DYNAMODB, answered after {waited:.1f}s)", flush=True)
        stack = LocalStack(
            endpoint,
            args.table,
            args.host,
            args.port,
            args.stage,
            args.concurrency,
            sqs_endpoint=os.environ.get("AWS_ENDPOINT_URL_SQS") or None,
            sqs_port=args.sqs_port,
            sqs_host=args.backend_host,
            params={"AuthMode": args.auth, **overrides},
            access_log=None if args.quiet else sys.stdout,
            **deliveries,
        )
        stack.start()
        print(f"Table            {args.table}   (from template.yaml, Region {os.environ['AWS_REGION']})", flush=True)
        if overrides:
            print("Parameters       " + " ".join(f"{k}={v}" for k, v in overrides.items()), flush=True)
        print("\n".join(stack.describe()), flush=True)
        print("Ctrl-C to stop.", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    except EndpointUnreachable as error:
        print(f"python -m devstack: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        # A second Ctrl-C while stopping must not leave half of it running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if stack is not None:
            stack.stop()
        if ddb_local:
            ddb_local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
