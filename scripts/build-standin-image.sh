#!/usr/bin/env bash
# A stand-in for the image `sam local invoke` uses for the functions' runtime (template.yaml's
# Runtime, python3.X) on x86_64, built offline (no container registry needed): a Debian bookworm
# minbase rootfs (debootstrap, from the Debian mirror apt uses), a local CPython 3.X and, from
# PyPI, awslambdaric + boto3, with a /var/runtime/bootstrap that runs the Runtime Interface
# Client on $_HANDLER / the handler SAM passes. Tagged public.ecr.aws/lambda/python:3.X-x86_64,
# so `sam local invoke --skip-pull-image` uses it. Nothing of it is committed.
#
# Usage (as root, with dockerd running): scripts/build-standin-image.sh [python3.X prefix]
#   default prefix: the one above scripts/lambda-python-dir.sh's directory (PATH, pyenv or uv)
set -euo pipefail
VERSION=$(sed -n 's/^ *Runtime: python\(3\.[0-9][0-9]*\) *$/\1/p' "$(dirname "$0")/../template.yaml" | head -n 1)
PREFIX="${1:-$(dirname "$("$(dirname "$0")/lambda-python-dir.sh" "$VERSION")")}"
TAG=public.ecr.aws/lambda/python:$VERSION-x86_64
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ROOTFS="$WORK/rootfs"

command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
debootstrap --variant=minbase \
  --include=libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,ca-certificates \
  bookworm "$ROOTFS" http://deb.debian.org/debian >"$WORK/debootstrap.log"

# CPython at its own prefix (its rpath points there), /var/lang -> it, as in the Lambda images.
mkdir -p "$ROOTFS$PREFIX" "$ROOTFS/var/task" "$ROOTFS/opt"
tar -C "$PREFIX" --exclude="./lib/python$VERSION/test" --exclude="./lib/python$VERSION/site-packages/*" \
  --exclude='*/__pycache__' --exclude="./lib/python$VERSION/idlelib" --exclude="./lib/python$VERSION/tkinter" -cf - . |
  tar -C "$ROOTFS$PREFIX" -xf -
ln -sfn "$PREFIX" "$ROOTFS/var/lang"
"$PREFIX/bin/python$VERSION" -m pip install -q --disable-pip-version-check --target "$ROOTFS/var/runtime" awslambdaric boto3

cat >"$ROOTFS/var/runtime/bootstrap" <<BOOTSTRAP
#!/bin/sh
# Stand-in for the python$VERSION base image's bootstrap: the Runtime Interface Client on the handler.
export PYTHONPATH="/var/task:/opt/python/lib/python$VERSION/site-packages:/opt/python:/var/runtime"
export LD_LIBRARY_PATH="/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib"
cd "\${LAMBDA_TASK_ROOT:-/var/task}"
exec /var/lang/bin/python$VERSION -m awslambdaric "\${_HANDLER:-\$AWS_LAMBDA_FUNCTION_HANDLER}"
BOOTSTRAP
chmod +x "$ROOTFS/var/runtime/bootstrap"

tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' --change 'ENV PATH=/var/lang/bin:/usr/local/bin:/usr/bin:/bin' \
  --change 'WORKDIR /var/task' --change 'ENTRYPOINT ["/var/runtime/bootstrap"]' - "$TAG"
echo "built $TAG"
