"""``make bench``: cold-import, throughput and capacity per operation, measured in one run.

The jobs, one module each: bench/coldstart.py (handler imports vs ``import boto3``, and where they
go), bench/baselines.py (the scenarios: the layer's call and a hand-written boto3 one),
bench/harness.py (timed alternating rounds, contention), bench/hot.py (one hot post), bench/spread.py (one
hot post at spread 8 to 64, and a step of load its growing spread absorbs),
bench/regions.py (across Regions on the emulator: convergence after heal, write units per mode, the escrow's
transfer latency), bench/report.py (the Markdown and docs/bench-results.md). This module parses the command line and
runs them in order.

Prints Markdown tables and writes them to docs/bench-results.md (overwritten by every full run, with
the commit, date and machine). Not part of the tests: numbers vary by machine; ratios against
a baseline measured in the same run are what count. ``--quick`` runs a smaller version;
``--only occ`` measures some throughput scenarios (printed, not written).

* Cold start: median wall time of ``import <handler module>`` in a fresh interpreter (the
  layer and the function folder on ``sys.path``, the template's environment) vs
  ``import boto3`` measured the same way.
* Throughput: operations/s on DynamoDB Local at 1, 8 and 32 concurrent clients, for the
  layer's primitive and for a hand-written minimal boto3 call making the same requests
  (same client settings; OCC: same reads, same backoff). Each cell runs several rounds of
  one baseline batch and one layer batch of the same size (~0.5 s), alternating which goes
  first; overhead ratio = layer time / baseline time per round, reported as the median over
  rounds with its IQR and min-max (target <= 1.10), beside the client CPU per operation.
* Capacity: RCU/WCU per operation as DynamoDB reports it (``ReturnConsumedCapacity``) and,
  for multi-item transactions, from the cost model (DynamoDB Local reports a constant):
  a transactional write costs 2 WCU per item up to 1 KB (prepare + commit).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench import ROOT, coldstart, harness, regions, report
from bench.baselines import SCENARIOS
from bench.harness import Plan
from devstack.dynamodb_local import DynamoDBLocal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="5 rounds of ~0.2 s batches, 3 import runs (a few minutes)")
    parser.add_argument("--rounds", type=int, help="alternating baseline/layer rounds per cell (default 9)")
    parser.add_argument("--round-seconds", type=float, help="target duration of one batch (default 0.5)")
    parser.add_argument("--import-runs", type=int)
    parser.add_argument("--contention-ops", type=int, help="calls per contention cell (default 100)")
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument(
        "--only",
        help="throughput scenarios whose name contains this (comma-separated; 'hot': the hot-post table; 'spread': the spread table "
        "and the step); skips cold start and contention",
    )
    parser.add_argument(
        "--regions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the across-Regions tables on the emulator (bench/regions.py; default: on, off with --only unless it names 'regions')",
    )
    coldstart.add_python_option(parser)
    parser.add_argument("--out", type=Path, help=f"where the tables go (default {report.DOC.relative_to(ROOT)}; not written with --only)")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    plan = Plan(rounds=5, round_seconds=0.2) if args.quick else Plan()
    plan.rounds = args.rounds or plan.rounds
    plan.round_seconds = args.round_seconds or plan.round_seconds
    import_runs = args.import_runs or (3 if args.quick else 7)
    contention_ops = args.contention_ops or (50 if args.quick else 100)
    scenarios = SCENARIOS
    if args.only:
        wanted = args.only.split(",")
        scenarios = [s for s in SCENARIOS if any(w in s.name for w in wanted)]

    with_regions = args.regions if args.regions is not None else (not args.only or "regions" in args.only.split(","))

    began = time.perf_counter()
    lines = report.header(argv if argv is not None else sys.argv[1:])
    if not args.only:
        for python in args.python or [sys.executable]:
            lines += coldstart.section(import_runs, python)
    cells, contended = [], []
    if scenarios or not args.only:
        with DynamoDBLocal() as ddb_local:
            os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = ddb_local.endpoint
            cells = harness.throughput(ddb_local.endpoint, plan, levels, scenarios)
            contended = [] if args.only else harness.contention(ddb_local.endpoint, contention_ops, levels)
    posts = report.hot_posts(quick=args.quick) if not args.only or "hot" in args.only.split(",") else []
    spreads = report.spread_posts(quick=args.quick) if not args.only or "spread" in args.only.split(",") else []
    across = regions.run(quick=args.quick) if with_regions else []
    lines += (
        (report.throughput(cells, plan) if cells else [])
        + report.contention(contended, contention_ops)
        + posts
        + spreads
        + across
        + report.footer(began)
    )
    text = "\n".join(lines)
    print(text)
    out = args.out or (None if args.only else report.DOC)
    if out is not None:
        report.write(text, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
