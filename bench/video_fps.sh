#!/usr/bin/env bash
# A video job on this machine: frames/s, per-stage ms per frame (and each stage's most degraded
# ladder mode: "device" everywhere = no frame in CPU fallback), identity distance median/worst,
# fusiond's peak RSS, and the result checked against the input with the ffmpeg/ffprobe CLIs:
# frame count, frame rate, duration, and the audio stream's packets (ffmpeg -c copy -f md5).
# The clip: SIZE (default 1280x720), 30 fps H.264 with a 48-kHz AAC track, one face
# (grace_hopper panned over a blurred copy of herself), made with ffmpeg's lavfi.
# Runs one job per length in LENGTHS (seconds, default "$SECONDS_ 2*$SECONDS_") and prints the
# last length's peak RSS over the first's (the goal: RSS for 60 s <= 1.2 x RSS for 5 s).
# usage: [SIZE=1920x1080] [LENGTHS="5 60"] [BUDGET=256MiB] bench/video_fps.sh [BUILD_DIR] [SECONDS] [swap flags, e.g. --simple]
# Needs the ffmpeg CLI and the fetched models (scripts/fetch-models.sh). Prints figures; not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}; SECONDS_=${2:-4}; shift $(($# < 2 ? $# : 2))
SIZE=${SIZE:-1280x720}; W_=${SIZE%x*}; H_=${SIZE#*x}
LENGTHS=${LENGTHS:-"$SECONDS_ $((SECONDS_ * 2))"}
BUDGET=${BUDGET:-256MiB}
W=$(mktemp -d); P=; trap '[ -n "$P" ] && kill $P 2>/dev/null; rm -rf "$W"' EXIT
SRC=tests/data/faces/astronaut_eileen_collins_512.png
clip() {  # $1 seconds -> $W/clip_$1.mp4: 30 fps, a pan over Grace (face ~ H/2.6 px wide) on a blurred copy of her,
  # restarting every 10 s so that the face stays in the frame
  local fw=$((H_ * 480 / 720 / 2 * 2)) fh=$((H_ * 562 / 720 / 2 * 2))
  ffmpeg -hide_banner -loglevel error -nostdin -y -loop 1 -framerate 30 -t "$1" -i tests/data/faces/grace_hopper_512x600.jpg \
    -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$1" -filter_complex \
    "[0:v]scale=$W_:$H_,boxblur=20[bg];[0:v]scale=$fw:$fh[fg];[bg][fg]overlay=x='$((W_ / 4))+$((W_ / 32))*mod(t\,10)':y=$((H_ / 9)),format=yuv420p[v]" \
    -map "[v]" -map 1:a -c:v libx264 -preset veryfast -crf 20 -c:a aac -b:a 96k "$W/clip_$1.mp4"
}
facts() {  # $1 file -> "frames fps duration audio-md5"
  local f; f=$(ffprobe -v error -select_streams v:0 -count_packets -show_entries stream=nb_read_packets,avg_frame_rate \
    -of csv=p=0 "$1")
  local d; d=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$1")
  local a; a=$(ffmpeg -hide_banner -loglevel error -nostdin -i "$1" -map 0:a -c copy -f md5 - | sed 's/MD5=//')
  echo "$f,$d,$a"
}
S=$W/s.sock
"$BUILD/daemon/fusiond" --socket "$S" --device cpu --device-memory-limit "$BUDGET" --state-dir "$W/state" \
  --models-dir "$BUILD/fetched/models" >"$W/log" 2>&1 &
P=$!
for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.1; done
PEAKS=()
run() {  # $1 seconds, then extra swap flags
  local secs=$1; shift
  clip "$secs"
  echo 5 >"/proc/$P/clear_refs"  # VmHWM := VmRSS
  local rss0; rss0=$(awk '/VmRSS/{print int($2/1024)}' "/proc/$P/status")
  "$BUILD/client/fusionctl" --socket "$S" swap --source "$SRC" --target "$W/clip_$secs.mp4" -o "$W/out.mp4" --json "$@" \
    >"$W/r.json" 2>"$W/err" || { echo "swap failed: $(tail -1 "$W/err")"; return 1; }
  local peak; peak=$(awk '/VmHWM/{print int($2/1024)}' "/proc/$P/status")
  PEAKS+=("$peak")
  /usr/bin/python3 - "$W/r.json" "$secs" "$rss0" "$peak" "$SIZE" "$BUDGET" "$(facts "$W/clip_$secs.mp4")" "$(facts "$W/out.mp4")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = r['frames_total']
secs, rss0, peak, size, budget, fin, fout = sys.argv[2:9]
print(f"{secs} s {size}, device budget {budget}: {n} frames, {r['frames_swapped']} swapped, "
      f"{r['frames_per_second']:.3f} frames/s; identity distance median {r['identity_distance_median']:.3f}, "
      f"worst {r['identity_distance_worst']:.3f}; fusiond RSS before {rss0} MiB, peak {peak} MiB")
print("  per frame: " + ", ".join(f"{s['name']} {s['ms'] / n:.0f} ms ({s['mode']})" for s in r['stages']))
(fps_i, n_i, d_i, a_i), (fps_o, n_o, d_o, a_o) = (x.split(',') for x in (fin, fout))
print(f"  input  frames {n_i}, rate {fps_i}, duration {float(d_i):.3f} s, audio md5 {a_i}")
print(f"  result frames {n_o}, rate {fps_o}, duration {float(d_o):.3f} s, audio md5 {a_o}"
      f" ({'identical' if a_i == a_o else 'DIFFERENT'})")
PY
}
"$BUILD/client/fusionctl" --socket "$S" swap --source "$SRC" --target tests/data/faces/grace_hopper_512x600.jpg \
  -o "$W/warm.png" >/dev/null 2>&1  # models resident first
for secs in $LENGTHS; do run "$secs" "$@"; done
if [ "${#PEAKS[@]}" -ge 2 ]; then
  awk -v a="${PEAKS[0]}" -v b="${PEAKS[-1]}" 'BEGIN { printf "peak RSS, longest over shortest: %d / %d MiB = %.2fx\n", b, a, b / a }'
fi
