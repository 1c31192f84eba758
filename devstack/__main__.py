"""``python -m devstack``: DynamoDB Local + the template's API on localhost, no Docker.

* Starts DynamoDB Local on 127.0.0.1:8000 (or uses ``AWS_ENDPOINT_URL_DYNAMODB`` if set).
* Creates the table from template.yaml's definition.
* Serves the API on http://127.0.0.1:3000, each function in its own worker processes.
* Delivers the table's stream to the functions with ``Type: DynamoDB`` events (devstack.streams).
* Ctrl-C stops everything it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from devstack.api import LocalApi
from devstack.dynamodb_local import DynamoDBLocal, create_table, dynamodb_client
from devstack.streams import StreamPoller
from devstack.template import ROOT, read_stack


def local_env(endpoint: str) -> None:
    """What every function process inherits: the endpoint, a region and dummy credentials."""
    os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000, help="API port (default 3000)")
    parser.add_argument("--dynamodb-port", type=int, default=8000, help="DynamoDB Local port (default 8000)")
    parser.add_argument("--table", default=os.environ.get("TALLY_TABLE", "tally-local"), help="table name (default tally-local)")
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--concurrency", type=int, default=4, help="worker processes per function")
    args = parser.parse_args(argv)

    ddb_local = None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    if not endpoint:
        ddb_local = DynamoDBLocal(port=args.dynamodb_port, log=ROOT / ".dynamodb-local.log").start()
        endpoint = ddb_local.endpoint
        print(f"DynamoDB Local   {endpoint}   (started in {ddb_local.started_in:.1f}s, in memory)", flush=True)
    else:
        print(f"DynamoDB         {endpoint}   (from AWS_ENDPOINT_URL_DYNAMODB)", flush=True)
    local_env(endpoint)
    api = streams = None
    try:
        stack = read_stack(args.table, params={"Stage": args.stage})
        create_table(dynamodb_client(endpoint), stack)
        print(f"Table            {stack.table_name}   (from template.yaml)", flush=True)
        api = LocalApi(stack, args.host, args.port, stage=args.stage, concurrency=args.concurrency)
        api.warm()
        api.start()
        print(f"API              {api.url}", flush=True)
        for route in stack.routes:
            print(f"  {route.method:7} {route.path:40} -> {route.function}", flush=True)
        streams = StreamPoller.for_stack(stack, endpoint).start()
        for sub in streams.subs:
            print(f"  STREAM  {stack.table_name + ' (' + sub.starting_position + ')':40} -> {sub.function}", flush=True)
        print("Ctrl-C to stop.", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
    finally:
        if streams:
            streams.stop()
        if api:
            api.stop()
        if ddb_local:
            ddb_local.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
