"""`make validate`'s offline translations in one interpreter: scripts/check_auth_modes.py, then
scripts/check_region_modes.py (each also runs alone), so each SAM translator notice prints once
(scripts/samtranslator_notices.py). Exits non-zero when either check fails."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import check_auth_modes  # noqa: E402
import check_region_modes  # noqa: E402


def main() -> int:
    auth = check_auth_modes.main()
    regions = check_region_modes.main()
    return 1 if auth or regions else 0


if __name__ == "__main__":
    sys.exit(main())
