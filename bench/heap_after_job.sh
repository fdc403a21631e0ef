#!/usr/bin/env bash
# RSS of fusiond before, at the peak of, and 10 s after an 80 MP JPEG job (the figures
# in docs/HOSTILE-INPUTS.md).
# usage: bench/heap_after_job.sh [BUILD_DIR] [VAR=VALUE ...]   (extra args: fusiond's environment,
#        e.g. MALLOC_CONF=... or LD_PRELOAD=... to compare allocators)
# Needs python3-opencv, the fetched models and test photos (scripts/fetch-models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}; shift || true
W=$(mktemp -d); trap 'kill $P 2>/dev/null; rm -rf "$W"' EXIT
SRC=tests/data/faces/astronaut_eileen_collins_512.png
# 10328x7760: the mosaic enlarged, four enlarged Grace Hoppers on it (faces the detector finds).
/usr/bin/python3 - "$W" "$BUILD" <<'PY'
import cv2, sys
w, build = sys.argv[1], sys.argv[2]
b = cv2.resize(cv2.imread(build + '/fetched/testdata/faces/mosaic_3840x2896.jpg'), (10328, 7760), interpolation=cv2.INTER_CUBIC)
g = cv2.resize(cv2.imread('tests/data/faces/grace_hopper_512x600.jpg'), (1792, 2100), interpolation=cv2.INTER_CUBIC)
for x, y in [(500, 500), (4000, 800), (7500, 600), (3000, 4800)]:
    b[y:y + 2100, x:x + 1792] = g
cv2.imwrite(w + '/big.jpg', b, [cv2.IMWRITE_JPEG_QUALITY, 90])
cv2.imwrite(w + '/small.jpg', cv2.resize(b, (1291, 970), interpolation=cv2.INTER_AREA))
PY
S=$W/s.sock
env "$@" "$BUILD/daemon/fusiond" --socket "$S" --device cpu --device-memory-limit 4GiB --state-dir "$W/state" \
  --models-dir "$BUILD/fetched/models" >"$W/log" 2>&1 &
P=$!
for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.1; done
rss() { awk '/VmRSS/{print int($2/1024)}' "/proc/$P/status"; }
ctl() { "$BUILD/client/fusionctl" --socket "$S" swap --source "$SRC" --target "$1" -o "$W/out.jpg" >/dev/null; }
ctl "$W/small.jpg"  # the models resident, as before any large job
sleep 10
before=$(rss); echo 5 >"/proc/$P/clear_refs"  # VmHWM := VmRSS
t0=$(date +%s.%N); ctl "$W/big.jpg"; t1=$(date +%s.%N)
peak=$(awk '/VmHWM/{print int($2/1024)}' "/proc/$P/status"); sleep 10; after=$(rss)
printf 'job %.1f s; RSS before %d MiB; peak %d MiB; 10 s after %d MiB (%+d MiB)\n' \
  "$(echo "$t1 - $t0" | bc)" "$before" "$peak" "$after" $((after - before))
