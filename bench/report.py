"""The docs writer: docs/bench-results.md's sections as Markdown lines (header, throughput,
contention, the hot post, footer) and the file itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench import ROOT, hot, spread
from bench.baselines import SCENARIOS
from bench.harness import Cell, Plan

DOC = ROOT / "docs" / "bench-results.md"  # written by every full run (docs/bench.md explains it)


def load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def header(argv: Sequence[str]) -> list[str]:
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md") else ""
    return [
        "# Benchmarks (`make bench`)",
        "",
        "Written by `make bench` (`python -m bench`: bench/__main__.py runs bench/coldstart.py, bench/harness.py "
        "over bench/baselines.py, bench/hot.py, bench/spread.py; bench/report.py writes this file) on every run: do not edit by hand.",
        "What is measured and how to read it: [bench.md](bench.md).",
        "",
        f"Measured on commit `{commit}`{dirty}, {time.strftime('%Y-%m-%d %H:%M %Z')}; {machine()}; "
        f"load average {load():.1f} at the start; `python -m bench {' '.join(argv)}`.",
        "",
    ]


def throughput(cells: list[Cell], plan: Plan) -> list[str]:
    lines = [
        "## Throughput on DynamoDB Local: layer vs a minimal hand-written boto3 call doing the same requests",
        "",
        f"Each cell: {plan.rounds} rounds, each one baseline batch and one layer batch of the same number of operations "
        f"(sized for ~{plan.round_seconds:g} s, at least 20 and 2 per client), the order alternating from round to round "
        "(with one client the two sides alternate call by call within a round). "
        "Overhead = layer time / baseline time within a round (= baseline ops/s / layer ops/s): the median over rounds, "
        "its interquartile range and its min-max. Target: <= 1.10x. Client CPU = this process's CPU per operation "
        "(DynamoDB Local runs in another process): the layer's own cost, free of the network and of the other processes' noise.",
        "",
        "| operation | clients | ops x rounds | layer ops/s | baseline ops/s | overhead (median) | IQR | min-max "
        "| client CPU ms/op layer / baseline | succeeded layer / baseline | WCU/op reported | RCU/op reported | WCU/op on DynamoDB (cost model) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    models = {s.name: s for s in SCENARIOS}
    errors = []
    for cell in cells:
        s, row = models[cell.scenario], cell.row()
        med, q1, q3, lo, hi = row["spread"]
        lines.append(
            f"| {cell.scenario} | {cell.clients} | {cell.per_round} x {plan.rounds} | {row['layer_ops']:.0f} | {row['base_ops']:.0f} "
            f"| {med:.2f}x | {q1:.2f}-{q3:.2f} | {lo:.2f}-{hi:.2f} | {row['cpu'][0]:.2f} / {row['cpu'][1]:.2f} "
            f"| {row['ok'][0]:.0%} / {row['ok'][1]:.0%} | {row['wcu']:.1f} | {row['rcu']:.1f} | {s.model_wcu:.0f} ({s.model_note}) |"
        )
        if any(row["errors"]):
            errors.append(f"{cell.scenario} x{cell.clients}: {row['errors'][0]} layer / {row['errors'][1]} baseline calls raised")
    lines += [
        "",
        "OCC rows count every call, also those that ran out of their 8 attempts (succeeded < 100%, WCU/op < 1); both sides "
        "back off the same way (full jitter, 20 ms doubling, capped at 500 ms) and read the item again after the backoff. "
        "DynamoDB Local reports a constant for multi-item transactions, so the cost-model column is what real DynamoDB bills.",
    ]
    if errors:
        lines += ["", "Calls that raised (counted as not succeeded): " + "; ".join(errors) + "."]
    return lines


def contention(contended: list[tuple[str, int, float, float]], contention_ops: int) -> list[str]:
    if not contended:
        return []
    lines = [
        "",
        f"## Contention: one hot counter, {contention_ops} calls per cell, 20 attempts "
        "(DynamoDB Local runs transactions one at a time, so crt never conflicts here)",
        "",
        "| approach | clients | calls/s | attempts per success |",
        "|---|---:|---:|---:|",
    ]
    for label, clients, rate, amplification in contended:
        lines.append(f"| {label} | {clients} | {rate:.0f} | {amplification:.2f} |")
    return lines


def hot_posts(*, quick: bool) -> list[str]:
    """bench/hot.py's standard vs hot table (one post, the limit model), as Markdown lines.

    Each row on a DynamoDB Local of its own (:func:`bench.hot.run_posts`): the one the throughput and
    contention sections filled answers several times slower by then (one run: 15 standard and 26 hot
    likes/s at load 1.5, against 150-240 on a fresh one at load 3-11), and so does one instance
    from row to row."""
    seconds, warm = (8.0, 2.0) if quick else (15.0, 3.0)
    scale, transaction_ms, clients = hot.POSTS_SCALE, 5.0, 8
    before = load()
    rows = hot.run_posts(None, scale=scale, transaction_ms=transaction_ms, clients=clients, seconds=seconds, warm=warm)
    return [
        "",
        f"## One hot post: `standard` vs `hot` likes under the limit model (bench/hot.py, {clients} clients, {seconds:g} s per row)",
        "",
        f"Distinct users like one post; {hot.describe(scale, transaction_ms)} The hot row's tally is kept by the "
        "LikeAggregatorFunction's handler run from DynamoDB Local's stream by the local stack's poller (the last row: "
        f"with Lambda's {hot.LAMBDA_WINDOW:g} s batching window emulated), its META writes on the same limited client. A reader reads META "
        "(consistent GetItem) every 50 ms; lag(n) = the first read showing tally >= n minus the n-th acknowledgement, "
        f"after the first {warm:g} s. Each row on a DynamoDB Local of its own, warmed {hot.JVM_WARM:g} s first. Load average {before:.1f} before the rows, "
        f"{load():.1f} after; docs/bench.md explains the columns and what binds.",
        "",
        hot.post_table(rows),
        "",
        *hot.verdict(rows, scale),
    ]


def spread_posts(*, quick: bool) -> list[str]:
    """bench/spread.py's section: one hot post at spread 8 to 64 under the limit model, its
    unmodelled control row, and the step a growing spread absorbs (docs/bench.md)."""
    seconds, after = (8.0, 40.0) if quick else (15.0, 60.0)
    return spread.section(seconds=seconds, after=after)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {sys.version.split()[0]}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def footer(began: float) -> list[str]:
    return ["", f"The run took {(time.perf_counter() - began) / 60:.1f} minutes; load average {load():.1f} at the end."]


def write(text: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(f"\nwritten to {out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out}")
