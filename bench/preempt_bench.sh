#!/usr/bin/env bash
# Priorities under load, one job at a time (--max-concurrent-jobs 1): a video job at
# VIDEO_PRIORITY (default low) runs while another job of normal priority, an image swap, is
# submitted every EVERY_MS (default 3000) ms, each as the last one ends at the earliest. Prints
# the video's frames/s alone and under the stream, and each image job's latency (submit to
# result): with VIDEO_PRIORITY=low the video yields at its next stage (docs/PERFORMANCE.md);
# with VIDEO_PRIORITY=normal it does not (the image jobs wait for it: how it was before).
# The clip: SIZE (default 1280x720), SECONDS (default 4) s at 30 fps, one face panned (as
# bench/video_fps.sh). Every result is also compared with the alone run's bytes (cmp).
# usage: [SIZE=1920x1080] [EVERY_MS=3000] [VIDEO_PRIORITY=low] bench/preempt_bench.sh [BUILD_DIR] [SECONDS]
# Needs the ffmpeg CLI and the fetched models. Prints figures; not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}; SECS=${2:-4}
SIZE=${SIZE:-1280x720}; W_=${SIZE%x*}; H_=${SIZE#*x}
EVERY_MS=${EVERY_MS:-3000}; VIDEO_PRIORITY=${VIDEO_PRIORITY:-low}
W=$(mktemp -d); P=; trap '[ -n "$P" ] && kill $P 2>/dev/null; rm -rf "$W"' EXIT
SRC=tests/data/faces/astronaut_eileen_collins_512.png
PHOTO=tests/data/faces/grace_hopper_512x600.jpg
fw=$((H_ * 480 / 720 / 2 * 2)); fh=$((H_ * 562 / 720 / 2 * 2))
ffmpeg -hide_banner -loglevel error -nostdin -y -loop 1 -framerate 30 -t "$SECS" -i "$PHOTO" -filter_complex \
  "[0:v]scale=$W_:$H_,boxblur=20[bg];[0:v]scale=$fw:$fh[fg];[bg][fg]overlay=x='$((W_ / 4))+$((W_ / 32))*mod(t\,10)':y=$((H_ / 9)),format=yuv420p[v]" \
  -map "[v]" -c:v libx264 -preset veryfast -crf 20 "$W/clip.mp4"
S=$W/s.sock
"$BUILD/daemon/fusiond" --socket "$S" --device cpu --device-memory-limit 256MiB --state-dir "$W/state" \
  --models-dir "$BUILD/fetched/models" --max-concurrent-jobs 1 >"$W/log" 2>&1 &
P=$!
for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.1; done
CTL=("$BUILD/client/fusionctl" --socket "$S")
now_ms() { date +%s%3N; }
fps() { /usr/bin/python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["frames_per_second"])' "$1"; }
# An ended job's wait for a slot: started - created, ms.
waited() { "${CTL[@]}" job "$1" --json | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["started_unix_ms"]-j["created_unix_ms"])'; }

# A warm-up image job (models loaded), then the video alone.
"${CTL[@]}" swap --source "$SRC" --target "$PHOTO" -o "$W/warm.png" >/dev/null 2>&1
"${CTL[@]}" swap --source "$SRC" --target "$W/clip.mp4" --priority "$VIDEO_PRIORITY" -o "$W/alone.mp4" --json >"$W/alone.json" 2>/dev/null
idle0=$(now_ms); "${CTL[@]}" swap --source "$SRC" --target "$PHOTO" -o "$W/idle.png" >/dev/null 2>&1; idle_ms=$(($(now_ms) - idle0))

# The video again, with the stream of image jobs until it ends.
ID=$("${CTL[@]}" swap --source "$SRC" --target "$W/clip.mp4" --priority "$VIDEO_PRIORITY" --no-wait 2>/dev/null)
state() { "${CTL[@]}" job "$ID" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
LAT=(); WAIT=(); BEFORE=0  # image jobs submitted while the video ran; BEFORE: of them, ended before it
while [ "$(state)" = QUEUED ] || [ "$(state)" = RUNNING ]; do
  t0=$(now_ms)
  "${CTL[@]}" swap --source "$SRC" --target "$PHOTO" -o "$W/img.png" --json >"$W/img.json" 2>/dev/null
  t1=$(now_ms)
  [ "$(state)" = RUNNING ] && BEFORE=$((BEFORE + 1))
  LAT+=($((t1 - t0)))
  WAIT+=("$(waited "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$W/img.json")")")
  sleep "$(/usr/bin/python3 -c "print(max(0, ($EVERY_MS - ($t1 - $t0)) / 1000))")"
done
"${CTL[@]}" result "$ID" -o "$W/loaded.mp4" --json >"$W/loaded.json"
same=$(cmp -s "$W/alone.mp4" "$W/loaded.mp4" && echo "byte-identical" || echo "DIFFERENT")
echo "$SIZE, $SECS s, video at priority $VIDEO_PRIORITY, a normal image job every $EVERY_MS ms, one job at a time:"
echo "  video alone: $(fps "$W/alone.json") frames/s; under the stream: $(fps "$W/loaded.json") frames/s; result $same"
echo "  image job on the idle daemon: $idle_ms ms"
/usr/bin/python3 - "${LAT[*]}" "${WAIT[*]}" "$BEFORE" <<'PY'
import statistics, sys
v = sorted(int(x) for x in sys.argv[1].split())
w = sorted(int(x) for x in sys.argv[2].split())
print(f"  image jobs submitted while the video ran: {len(v)}, {sys.argv[3]} of them ended before it; latency "
      f"median {statistics.median(v):.0f} ms, max {v[-1]} ms (submit to result); wait for a slot "
      f"(started - created) median {statistics.median(w):.0f} ms, max {w[-1]} ms")
PY
grep -c "yielded" "$W/log" | sed 's/^/  the video yielded (times): /'
