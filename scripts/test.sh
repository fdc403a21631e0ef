#!/usr/bin/env bash
# The test command: set up, build, and run every test (ctest prints the summary line).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
# Pretrained weights and tier-B test photos (models tests need them; a no-op when verified).
FUSION_TESTDATA_DIR=${FUSION_TESTDATA_DIR:-$BUILD_DIR/fetched/testdata} \
  bash scripts/fetch-models.sh "${FUSION_MODELS_DIR:-$BUILD_DIR/fetched/models}"
cd "$BUILD_DIR"
ctest -j "${JOBS:-$(nproc)}" --output-on-failure "$@"
