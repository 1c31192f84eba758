#!/usr/bin/env bash
# The directory of a working python3.12, for `sam build` (the functions' runtime is python3.12
# and SAM's Python builder looks for that exact binary on PATH). Tries, in order: python3.12 on
# PATH (a pyenv shim counts when PYENV_VERSION or a .python-version selects a 3.12), then the
# newest $(pyenv root)/versions/3.12.*/bin (PYENV_ROOT or ~/.pyenv without pyenv). Prints the
# directory; otherwise one line saying how to get one, and exits 1.
set -u
works() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

if found=$(command -v python3.12) && works "$found"; then
  "$found" -c 'import os, sys; print(os.path.dirname(sys.executable))'
  exit 0
fi
root=$( (pyenv root) 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
while read -r candidate; do
  if [ -n "$candidate" ] && works "$candidate"; then
    dirname "$candidate"
    exit 0
  fi
done < <(ls -d "$root"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V -r)
echo "python3.12 not found (sam build needs it for the functions' runtime): install it (pyenv install 3.12, or apt-get install python3.12) or put it on PATH" >&2
exit 1
