#!/usr/bin/env bash
# The site check (`make docs`: scripts/check_site.py) opens every built page in headless Chromium.
# Install Debian's `chromium` with apt when no Chromium is on PATH and we can.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
  command -v "$name" >/dev/null 2>&1 && exit 0
done
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "Installing chromium (the docs site check opens every page in headless Chromium)..." >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "Chromium is required for the docs site check; install it (Debian: apt-get install chromium) and retry." >&2
exit 1
