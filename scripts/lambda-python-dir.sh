#!/usr/bin/env bash
# The directory of a working python3.X for `sam build`, where 3.X is the functions' runtime: the
# template's `Runtime: python3.X` (Globals), or $1 (e.g. 3.14). SAM's Python builder looks for that
# exact binary on PATH. Tries, in order: python3.X on PATH (a pyenv shim counts when
# PYENV_VERSION or a .python-version selects a 3.X), the newest $(pyenv root)/versions/3.X.*/bin
# (PYENV_ROOT or ~/.pyenv without pyenv), then uv's managed Pythons (`uv python find 3.X`, after `uv python install 3.X`).
# Prints the directory; otherwise one line saying how to get one, and exits 1.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=${1:-$(sed -n 's/^ *Runtime: python\(3\.[0-9][0-9]*\) *$/\1/p' "$here/../template.yaml" | head -n 1)}
if [ -z "$version" ]; then
  echo "no 'Runtime: python3.X' line in template.yaml: pass the version (e.g. $0 3.14)" >&2
  exit 2
fi
binary=python$version
works() { "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" >/dev/null 2>&1; }

if found=$(command -v "$binary") && works "$found"; then
  "$found" -c 'import os, sys; print(os.path.dirname(sys.executable))'
  exit 0
fi
root=$( (pyenv root) 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
while read -r candidate; do
  if [ -n "$candidate" ] && works "$candidate"; then
    dirname "$candidate"
    exit 0
  fi
done < <(ls -d "$root"/versions/"$version".*/bin/"$binary" 2>/dev/null | sort -V -r)
if command -v uv >/dev/null 2>&1 && found=$(uv python find "$version" 2>/dev/null); then
  candidate="$(dirname "$found")/$binary"
  if works "$candidate"; then
    dirname "$candidate"
    exit 0
  fi
fi
# Debian 12 and Ubuntu 22.04/24.04 have no python3.13/python3.14 package (apt-get install fails):
# pyenv builds one from python.org's source; uv downloads a prebuilt one (python-build-standalone).
echo "$binary not found (sam build needs the functions' runtime, template.yaml's Runtime): pyenv install $version (https://github.com/pyenv/pyenv#installation), or pip install uv && uv python install $version, then run this again" >&2
exit 1
