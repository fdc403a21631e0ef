#!/usr/bin/env bash
# The main job: set up and build, fetch the model weights, start fusiond on a temporary socket,
# swap the astronaut's face onto grace_hopper through `fusionctl swap`, write the result
# (default ./fusion-demo.png, or $1), print `fusionctl mem`, and stop the daemon with SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-fusion-demo.png}")
bash scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
models=${FUSION_MODELS_DIR:-$BUILD_DIR/fetched/models}
FUSION_TESTDATA_DIR=${FUSION_TESTDATA_DIR:-$BUILD_DIR/fetched/testdata} \
  bash scripts/fetch-models.sh "$models" >/dev/null
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
