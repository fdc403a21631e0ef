#!/usr/bin/env bash
# Sets up the machine for the tests (scripts/setup-test.sh, which runs scripts/setup.sh) and
# builds everything, tests and benchmarks included, into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# A build/ that scripts/run-demo.sh configured precompiles ATen (FUSION_TORCH_PCH): ccache
# caches those TUs only with these.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}
# Configured again when scripts/run-demo.sh configured it without the tests (its objects are
# kept: the same flags).
if [ ! -f "$BUILD_DIR/build.ninja" ] ||
   grep -q '^FUSION_BUILD_TESTS:BOOL=OFF$' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSION_BUILD_TESTS=ON \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
