#!/usr/bin/env bash
# The main job: set up and build, start fusiond on a temporary socket, show its memory state
# with fusionctl, and stop it with SIGTERM. (The face swap joins here when jobs land.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
tmp=$(mktemp -d)
sock="$tmp/fusiond.sock"
"$BUILD_DIR/daemon/fusiond" --socket "$sock" --device cpu --device-memory-limit 2GiB \
  --state-dir "$tmp/state" 2>"$tmp/fusiond.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
"$BUILD_DIR/client/fusionctl" --socket "$sock" health
"$BUILD_DIR/client/fusionctl" --socket "$sock" mem
kill -TERM $pid
wait $pid
echo "fusiond stopped cleanly (exit 0); its log:"
cat "$tmp/fusiond.log"
