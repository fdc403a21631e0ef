#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh: what fusiond and fusionctl need, no test packages),
# build fusiond and fusionctl only, fetch the model weights, start fusiond on a temporary socket,
# swap the astronaut's face onto grace_hopper through `fusionctl swap`, write the result
# (default ./fusion-demo.png, or $1), print `fusionctl mem`, and stop the daemon with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-fusion-demo.png}")
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# ccache caches the TUs of the precompiled ATen header (FUSION_TORCH_PCH) only with these.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}
# The same build dir as scripts/build.sh (scripts/test.sh): a first configure here leaves the
# tests out (GTest and Google Benchmark are test packages); scripts/build.sh turns them on later
# and reuses every object built here (same flags: fault injection is on in both, as it is in the
# test build). An existing configure (tests on or off) is kept as it is.
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFUSION_BUILD_TESTS=OFF -DFUSION_FAULT_INJECTION=ON -DFUSION_TORCH_PCH=ON \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target fusiond fusionctl >/dev/null
models=${FUSION_MODELS_DIR:-$BUILD_DIR/fetched/models}
bash scripts/fetch-models.sh --models-only "$models" >/dev/null
tmp=$(mktemp -d)
sock="$tmp/fusiond.sock"
"$BUILD_DIR/daemon/fusiond" --socket "$sock" --device cpu --device-memory-limit 2GiB \
  --models-dir "$models" --state-dir "$tmp/state" 2>"$tmp/fusiond.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
ctl() { "$BUILD_DIR/client/fusionctl" --socket "$sock" "$@"; }
ctl health
ctl swap --source tests/data/faces/astronaut_eileen_collins_512.png \
  --target tests/data/faces/grace_hopper_512x600.jpg -o "$out" --json
echo "result written to $out"
ctl mem
kill -TERM $pid
wait $pid
echo "fusiond stopped cleanly (exit 0)"
