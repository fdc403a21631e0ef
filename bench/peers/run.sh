#!/usr/bin/env bash
# The peer benchmark in one command: fusiond's own forward against ONNX Runtime and
# OpenCV dnn on the same weights and input, at 1 and 2 threads; prints a markdown table (also
# written to $OUT/table.md). Run by hand; not part of scripts/test.sh or CI.
#
#   bench/peers/run.sh [ID...]          (default: every network that has a mirror)
#
# Environment: BUILD_DIR (default build), FUSION_MODELS_DIR (default $BUILD_DIR/fetched/models,
# as scripts/fetch-models.sh fills it), PEERS_BIN (a fusion_peer_bench already built: then
# run.sh neither configures nor builds, nor runs scripts/setup.sh; default: build
# $BUILD_DIR/bench/peers/fusion_peer_bench), PEERS_OUT (default $BUILD_DIR/peers), PEERS_ARGS (extra
# driver.py flags, e.g. "--rounds 20 --iters 3 --threads 1,2", or "--bf16" to time fusiond's
# fp32 and bf16 fast paths side by side), PEERS_TOLERANCE (the mirror
# check's absolute tolerance, default 1e-4).
# Steps: setup (scripts/setup.sh, bench/peers/setup.sh: ONNX Runtime from PyPI into its venv);
# build fusion_peer_bench; dump each network's input and fusiond output; PyTorch mirrors checked
# against them (1e-4) and exported to ONNX (mirrors/export.py); the interleaved timing
# (driver.py, run with the venv's python).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-build}
MODELS_DIR=${FUSION_MODELS_DIR:-$BUILD_DIR/fetched/models}
OUT=${PEERS_OUT:-$BUILD_DIR/peers}
IMAGE=tests/data/faces/astronaut_eileen_collins_512.png
PY=/usr/bin/python3  # Debian's python3 (python3-torch, python3-onnx), not a pyenv shim
DEFAULT_IDS=(tiny_face_detector_416 face_recognition_150 face_landmark_68_112 ssd_mobilenetv1_512
  esrgan_slim_x2_64 esrgan_slim_x4_64 esrgan_medium_x2_64 esrgan_medium_x4_64)
IDS=("${@:-${DEFAULT_IDS[@]}}")

if [ -z "${PEERS_BIN:-}" ]; then bash scripts/setup-test.sh; fi
bash bench/peers/setup.sh
# shellcheck source=bench/peers/venv.sh
. bench/peers/venv.sh  # PEERS_PYTHON: the venv setup.sh filled
if [ ! -f "$MODELS_DIR/face-api/tiny_face_detector_model.bin" ]; then
  echo "run.sh: no weights in $MODELS_DIR; run scripts/fetch-models.sh first (or set FUSION_MODELS_DIR)" >&2
  exit 1
fi
if [ -n "${PEERS_BIN:-}" ]; then
  if [ ! -x "$PEERS_BIN" ]; then
    echo "run.sh: PEERS_BIN=$PEERS_BIN is not an executable fusion_peer_bench" >&2
    exit 1
  fi
  BIN=$PEERS_BIN
else
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then  # the configure of scripts/build.sh
    cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target fusion_peer_bench >&2
  BIN=$BUILD_DIR/bench/peers/fusion_peer_bench
fi
mkdir -p "$OUT"
# fp32: the mirrors are checked against it to 1e-4 (a bf16 default is timed by driver.py --bf16).
FUSION_ONEDNN_PRECISION=fp32 "$BIN" dump --models-dir "$MODELS_DIR" --image "$IMAGE" --out "$OUT" "${IDS[@]}" 2> >(grep --line-buffered -v 'iCCP' >&2) >&2
"$PY" bench/peers/mirrors/export.py --models-dir "$MODELS_DIR" --out "$OUT" "${IDS[@]}" >&2
# shellcheck disable=SC2086  # PEERS_ARGS is a list of flags
"$PEERS_PYTHON" bench/peers/driver.py --bin "$BIN" --models-dir "$MODELS_DIR" --image "$IMAGE" --out "$OUT" \
  ${PEERS_ARGS:-} "${IDS[@]}" 2> >(grep --line-buffered -v 'iCCP' >&2) | tee "$OUT/table.md"
