#!/bin/sh
# Build the operator's virtualenv from the lock files: `hack/image-venv.sh VENV [SOURCE]`.
#
# The Dockerfile runs exactly this, and so does tests/chart/test_image_venv.py (no Docker engine
# is needed to check that the image's dependencies install and its entrypoint starts). Every
# distribution comes from a lock file with its hash, and nothing else is resolved: --no-deps,
# then `pip check` proves the lock complete. The wheel of the operator itself is built by a
# separate venv holding the locked build backend, which never reaches VENV.
set -eu
venv=$1
src=${2:-.}
python=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/build"
"$work/build/bin/pip" install --quiet --require-hashes --no-deps -r "$src/build-requirements.lock"
"$work/build/bin/pip" wheel --quiet --no-deps --no-build-isolation --wheel-dir "$work/wheels" "$src"

"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --require-hashes --no-deps -r "$src/requirements.lock"
"$venv/bin/pip" install --quiet --no-deps "$work"/wheels/lws_operator-*.whl
"$venv/bin/pip" check
