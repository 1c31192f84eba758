"""The benchmarks (``make bench``, ``python -m bench.hot``): run from the repository, against
DynamoDB Local, with dummy credentials and a region unless the environment gives them."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "counters")]
for _name, _value in (
    ("AWS_ACCESS_KEY_ID", "bench"),
    ("AWS_SECRET_ACCESS_KEY", "bench"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
    ("AWS_REGION", "us-east-1"),
    ("TALLY_STREAM_CONSUMERS", "1"),  # the benchmarks drain the stream themselves (hot likes)
):
    os.environ.setdefault(_name, _value)
