#!/usr/bin/env bash
# bench/live: live-session latency through the real binaries. Makes two clips with the ffmpeg
# CLI from the bundled photos (tests/data/faces: grace_hopper moving over a blurred copy of
# itself) — 640x360 at 15 fps and 1280x720 at 10 fps, SECONDS_LONG s each (default 30: 450 and 300
# frames, so p99 is not one frame's figure; the first frame, detected in its path, is one of
# them) — starts build/daemon/fusiond on
# a temporary socket, and runs `fusionctl live --json` on each clip alone, paced at the clip's
# frame rate, swapping astronaut_eileen_collins in. Prints one line per clip: the JSON object
# (frames in/out/dropped, in_order, latency p50/p95/p99 in ms, send -> result received).
# With BESIDE=1, each clip runs again while a low-priority 1080p video job (30 fps, 20 s, another
# kind of client) runs, and the line after says how far that job got meanwhile.
#
# SECONDS_LONG: the clips' length in seconds (30). FUSIOND_FLAGS: more fusiond flags (e.g. --log-level debug); FUSIOND_LOG: where to keep its log.
#
#   [BESIDE=1] bench/live/run.sh [BUILD_DIR] [DEVICE]     # defaults: build, cpu
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
device=${2:-cpu}
faces=$src/tests/data/faces
tmp=$(mktemp -d)
trap 'if [ -n "${daemon:-}" ]; then kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null || true; fi; if [ -n "${FUSIOND_LOG:-}" ]; then cp "$tmp/fusiond.log" "$FUSIOND_LOG"; fi; rm -rf "$tmp"' EXIT

seconds=${SECONDS_LONG:-30}
# clip W H FPS FG_W FG_H OUT: the photo (FG_W x FG_H) swaying right and back over a blurred
# backdrop (a 30-s period; from a quarter of the free width to three quarters).
clip() {
  ffmpeg -hide_banner -loglevel error -y -loop 1 -framerate "$3" -t "$seconds" -i "$faces/grace_hopper_512x600.jpg" \
    -filter_complex "[0]split[a][b];[a]scale=$1:$2,boxblur=20[bg];[b]scale=$4:$5[fg];[bg][fg]overlay=x='($1-$4)/2-($1-$4)/4*cos(2*PI*t/30)':y=($2-$5)/2,format=yuv420p[v]" \
    -map "[v]" -c:v libx264 -preset veryfast -crf 20 -movflags +faststart "$6"
}
clip 640 360 15 256 300 "$tmp/live360p15.mp4"
clip 1280 720 10 512 600 "$tmp/live720p10.mp4"
# BESIDE=1: each clip also beside a low-priority 1080p video job (30 fps, 20 s) of the batch kind.
if [ -n "${BESIDE:-}" ]; then
  ffmpeg -hide_banner -loglevel error -y -loop 1 -framerate 30 -t 20 -i "$faces/grace_hopper_512x600.jpg" \
    -filter_complex "[0]split[a][b];[a]scale=1920:1080,boxblur=20[bg];[b]scale=512:600[fg];[bg][fg]overlay=x='300+40*t':y=240,format=yuv420p[v]" \
    -map "[v]" -c:v libx264 -preset veryfast -crf 20 -movflags +faststart "$tmp/batch1080.mp4"
fi

sock=$tmp/f.sock
"$build/daemon/fusiond" --socket "$sock" --device "$device" --device-memory-limit 2GiB \
  --state-dir "$tmp/state" ${FUSIOND_FLAGS:-} --models-dir "$build/fetched/models" 2> "$tmp/fusiond.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
ctl() { "$build/client/fusionctl" --socket "$sock" "$@"; }
# beside_job CLIP: a low-priority 1080p video job from another client runs meanwhile.
beside_job() {
  ctl swap --source "$faces/grace_hopper_512x600.jpg" --target "$tmp/batch1080.mp4" \
    --priority low --no-wait
}
for c in live360p15 live720p10; do
  # A first session warms the models (loads and uploads are not the figure).
  ctl live --source "$faces/astronaut_eileen_collins_512.png" --input "$tmp/$c.mp4" -o "$tmp/warm.mp4" \
    --pace 1000 --json > /dev/null
  printf '%s %s alone ' "$c" "$device"
  ctl live --source "$faces/astronaut_eileen_collins_512.png" --input "$tmp/$c.mp4" -o "$tmp/$c.out.mp4" --json
  if [ -n "${BESIDE:-}" ]; then
    job=$(beside_job)
    sleep 3  # the job is into its frames
    printf '%s %s beside-low-1080p-video ' "$c" "$device"
    ctl live --source "$faces/astronaut_eileen_collins_512.png" --input "$tmp/$c.mp4" -o "$tmp/$c.out.mp4" --json
    done_during=$(ctl job "$job" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["frames_done"], "of", j["frames_total"], j["state"])')
    echo "  the low job: $done_during frames when the session ended"
    ctl cancel "$job" > /dev/null 2>&1 || true
  fi
done
