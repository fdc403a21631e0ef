#!/usr/bin/env bash
# Frames per second and per-stage ms per frame of a video job, and fusiond's peak RSS, for a
# 1280x720 H.264 clip with one face (grace_hopper panned, a sine-tone AAC track) of SECONDS
# and of twice that (issue #13: memory independent of the video's length).
# usage: bench/video_fps.sh [BUILD_DIR] [SECONDS] [extra fusionctl swap flags, e.g. --simple]
# Needs the ffmpeg CLI and the fetched models (scripts/fetch-models.sh). Prints figures; not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}; SECONDS_=${2:-4}; shift $(($# < 2 ? $# : 2))
W=$(mktemp -d); P=; trap '[ -n "$P" ] && kill $P 2>/dev/null; rm -rf "$W"' EXIT
SRC=tests/data/faces/astronaut_eileen_collins_512.png
clip() {  # $1 seconds -> $W/clip_$1.mp4: 30 fps, a 1280x720 pan over Grace on a blurred copy of her
  ffmpeg -hide_banner -loglevel error -nostdin -y -loop 1 -framerate 30 -t "$1" -i tests/data/faces/grace_hopper_512x600.jpg \
    -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$1" -filter_complex \
    "[0:v]scale=1280:720,boxblur=20[bg];[0:v]scale=480:562[fg];[bg][fg]overlay=x='300+40*t':y=80,format=yuv420p[v]" \
    -map "[v]" -map 1:a -c:v libx264 -preset veryfast -crf 20 -c:a aac -b:a 96k "$W/clip_$1.mp4"
}
S=$W/s.sock
"$BUILD/daemon/fusiond" --socket "$S" --device cpu --device-memory-limit 1GiB --state-dir "$W/state" \
  --models-dir "$BUILD/fetched/models" >"$W/log" 2>&1 &
P=$!
for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.1; done
run() {  # $1 seconds, then extra swap flags
  local secs=$1; shift
  clip "$secs"
  echo 5 >"/proc/$P/clear_refs"  # VmHWM := VmRSS
  local rss0; rss0=$(awk '/VmRSS/{print int($2/1024)}' "/proc/$P/status")
  "$BUILD/client/fusionctl" --socket "$S" swap --source "$SRC" --target "$W/clip_$secs.mp4" -o "$W/out.mp4" --json "$@" \
    >"$W/r.json" 2>/dev/null
  local peak; peak=$(awk '/VmHWM/{print int($2/1024)}' "/proc/$P/status")
  /usr/bin/python3 - "$W/r.json" "$secs" "$rss0" "$peak" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = r['frames_total']
print(f"{sys.argv[2]} s 1280x720: {n} frames, {r['frames_swapped']} swapped, {r['frames_per_second']:.2f} frames/s; "
      f"fusiond RSS before {sys.argv[3]} MiB, peak {sys.argv[4]} MiB")
print("  per frame: " + ", ".join(f"{s['name']} {s['ms'] / n:.0f} ms ({s['mode']})" for s in r['stages']))
PY
}
"$BUILD/client/fusionctl" --socket "$S" swap --source "$SRC" --target tests/data/faces/grace_hopper_512x600.jpg \
  -o "$W/warm.png" >/dev/null 2>&1  # models resident first
run "$SECONDS_" "$@"
run $((SECONDS_ * 2)) "$@"
