#!/usr/bin/env bash
# DynamoDB Local needs Java 17+. Install a headless JRE with apt when it is missing and we can.
set -euo pipefail
major() { java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'; }
if command -v java >/dev/null 2>&1 && [ "$(major)" -ge 17 ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "Installing openjdk-17-jre-headless (DynamoDB Local needs Java 17)..." >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "Java 17+ is required for DynamoDB Local; install it (e.g. openjdk-17-jre-headless) and retry." >&2
exit 1
