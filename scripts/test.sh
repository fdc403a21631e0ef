#!/usr/bin/env bash
# The test command: set up, build, and run every test (ctest prints the summary line).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest -j "${JOBS:-$(nproc)}" --output-on-failure "$@"
