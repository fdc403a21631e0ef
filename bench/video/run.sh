#!/usr/bin/env bash
# The video benchmark: every clip of bench/video/make_clips.py swapped twice by a fusiond on the CPU,
# once with --video-detect every-frame (the per-frame detection reference) and once with the default
# options (tracking), each result measured by bench/video/measure.py against its input.
# Not a test: prints figures. One row per clip and mode: frames/s, the speed-up of default over
# every-frame, faces_swapped and its ratio default/every-frame, the daemon's keyframes,
# frames_detected, frames_tracked, tracks and flicker_ratio ("-" where the JSON lacks the key),
# measure.py's flicker ratio (ground-truth boxes; Haar boxes; motion-compensated), follow share and minimum swapped share
# per face, whether the result's frame count and audio packets (md5) equal the input's, and fusiond's
# peak RSS over the job (VmHWM, reset through /proc/PID/clear_refs before each swap).
# Ends with the same table in markdown, ready to paste into docs.
# usage: [QUICK=1] [OUT=dir] bench/video/run.sh [BUILD_DIR] [CLIPS_DIR] [extra swap flags]
#   BUILD_DIR  default build (needs daemon/fusiond, client/fusionctl, fetched/models)
#   CLIPS_DIR  clips made by make_clips.py; made there (QUICK=1: --quick) when it has no clip;
#              default: a temporary folder
#   OUT        keep the swapped clips and the JSON files there (default: a temporary folder)
#   bench/video/run.sh --table OUT_DIR   prints the tables again from a kept OUT
# Needs the ffmpeg/ffprobe CLIs and /usr/bin/python3 with cv2 and numpy. Slow on a CPU (~2 frames/s):
# the full clip set is 465 frames a mode.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
SRC=tests/data/faces/astronaut_eileen_collins_512.png

table() {  # $1 results folder -> the tables
  "$PY" - "$1" <<'PY'
import glob, json, os, sys
d = sys.argv[1]

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def key(r, k):  # the key at the top level or one level down; None where missing
    if not r:
        return None
    if k in r:
        return r[k]
    for v in r.values():
        if isinstance(v, dict) and k in v:
            return v[k]
    return None

def num(v, fmt='%.2f'):
    return '-' if v is None else (fmt % v if isinstance(v, float) else str(v))

def rss_mib(path):  # fusiond's VmHWM over the job (KiB in the file), MiB; '-' where not read
    try:
        return '%.0f' % (int(open(path).read()) / 1024)
    except (OSError, ValueError):
        return '-'

def ratio(a, b, fmt='%.2f'):
    return fmt % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else '-'

clips = sorted({os.path.basename(p).split('.')[0] for p in glob.glob(os.path.join(d, '*.*.swap.json'))} |
               {os.path.basename(p).split('.')[0] for p in glob.glob(os.path.join(d, '*.*.err'))})
head = ['clip', 'mode', 'frames', 'fps', 'speed-up', 'faces_swapped', 'swapped/ref', 'keyframes', 'detected',
        'tracked', 'tracks', 'flicker (daemon)', 'flicker (truth)', 'flicker (Haar)', 'flicker (moved)', 'follow',
        'min swapped/face', 'frames in/out', 'audio', 'peak RSS MiB']
rows, failures = [], []
for clip in clips:
    ref = load(os.path.join(d, clip + '.every-frame.swap.json'))
    for mode in ('every-frame', 'default'):
        base = os.path.join(d, '%s.%s' % (clip, mode))
        r, m = load(base + '.swap.json'), load(base + '.measure.json')
        err = open(base + '.err').read().strip().splitlines()[-1:] if os.path.exists(base + '.err') else []
        if r is None:
            if err:
                rows.append([clip, mode, 'FAILED'] + ['-'] * (len(head) - 3))
                failures.append('%s %s failed: %s' % (clip, mode, err[0]))
            continue
        facts = (open(base + '.facts').read().split() + ['', ''])[:2] if os.path.exists(base + '.facts') else ['', '']
        (fi, fo) = [x.split(',') if x else ['', '', '', ''] for x in facts]
        fps = key(r, 'frames_per_second')
        rows.append([
            clip, mode, num(key(r, 'frames_total')), num(fps), ratio(fps, key(ref, 'frames_per_second')) + 'x' if mode == 'default' and ref else '-',
            num(key(r, 'faces_swapped')), ratio(key(r, 'faces_swapped'), key(ref, 'faces_swapped')) if mode == 'default' and ref else '-',
            num(key(r, 'keyframes')), num(key(r, 'frames_detected')), num(key(r, 'frames_tracked')), num(key(r, 'tracks')),
            num(key(r, 'flicker_ratio'), '%.3f'),
            num(m and m.get('flicker_ratio'), '%.3f'), num(m and m.get('flicker_ratio_haar'), '%.3f'),
            num(m and m.get('flicker_ratio_moved'), '%.3f'),
            num(m and m.get('follow_share'), '%.3f'),
            ('%.0f%% (%s)' % (100 * m['swapped_min_share'], m['swapped_min_face'])) if m and m.get('swapped_min_share') is not None else '-',
            '-' if not fi[1] else '%s/%s%s' % (fi[1], fo[1], '' if fi[1] == fo[1] else ' MISMATCH'),
            '-' if not fi[3] else ('same' if fi[3] == fo[3] else 'DIFFERENT'),
            rss_mib(base + '.rss'),
        ])
if not rows:
    sys.exit('no results in ' + d)
wid = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
for x in [head] + rows:
    print('  '.join(str(v).ljust(w) for v, w in zip(x, wid)).rstrip())
print()
print('flicker: sum over consecutive frames of a face of mean |output change| / mean |input change| '
      '(1 = as steady as the input); truth/Haar: measure.py with the clips\' ground-truth boxes / OpenCV Haar '
      'boxes / truth boxes with frame t-1 first moved onto t by the box motion (an extra figure); follow: input Haar faces with an output Haar face at IoU >= 0.5; min swapped/face: the face '
      'changed in the fewest of its frames. Frames in/out by ffprobe packets; audio: md5 of the AAC packets.')
for f in failures:
    print(f)
print()
print('| ' + ' | '.join(head) + ' |')
print('|' + '|'.join('---' for _ in head) + '|')
for x in rows:
    print('| ' + ' | '.join(str(v).replace('|', '/') for v in x) + ' |')
PY
}

if [ "${1:-}" = --table ]; then table "$2"; exit; fi

BUILD=${1:-build}; CLIPS=${2:-}; shift $(($# < 2 ? $# : 2))
CTL=$BUILD/client/fusionctl
W=$(mktemp -d); P=; trap '[ -n "$P" ] && kill $P 2>/dev/null; rm -rf "$W"' EXIT
R=${OUT:-$W/results}; mkdir -p "$R"
for f in "$BUILD/daemon/fusiond" "$CTL"; do [ -x "$f" ] || { echo "no $f (build first)"; exit 1; }; done
[ -d "$BUILD/fetched/models" ] || { echo "no $BUILD/fetched/models (scripts/fetch-models.sh)"; exit 1; }

CLIPS=${CLIPS:-$W/clips}
if ! ls "$CLIPS"/*.json >/dev/null 2>&1; then
  echo "making clips in $CLIPS"
  "$PY" bench/video/make_clips.py "$CLIPS" ${QUICK:+--quick}
fi

facts() {  # $1 file -> "frames fps duration audio-md5" (as bench/video_fps.sh)
  local f; f=$(ffprobe -v error -select_streams v:0 -count_packets -show_entries stream=nb_read_packets,avg_frame_rate \
    -of csv=p=0 "$1")
  local d; d=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$1")
  local a; a=$(ffmpeg -hide_banner -loglevel error -nostdin -i "$1" -map 0:a -c copy -f md5 - 2>/dev/null | sed 's/MD5=//' || true)
  echo "$f,$d,$a"
}

S=$W/s.sock
"$BUILD/daemon/fusiond" --socket "$S" --device cpu --device-memory-limit 256MiB --state-dir "$W/state" \
  --models-dir "$BUILD/fetched/models" >"$W/log" 2>&1 &
P=$!
for _ in $(seq 200); do [ -S "$S" ] && break; sleep 0.1; done
[ -S "$S" ] || { echo "fusiond did not open its socket:"; tail -5 "$W/log"; exit 1; }
"$CTL" --socket "$S" swap --source "$SRC" --target tests/data/faces/grace_hopper_512x600.jpg \
  -o "$W/warm.png" >/dev/null 2>&1 || true  # models resident first

MODES="every-frame default"
if ! "$CTL" swap --help 2>&1 | grep -q -- '--video-detect'; then
  echo "NOTE: this fusionctl has no --video-detect option: the every-frame reference is left out," \
    "only the default mode runs (no speed-up, no swapped ratio)"
  MODES=default
fi

swap() {  # $1 clip name, $2 mode -> $R/<clip>.<mode>.{mp4,swap.json,measure.json,facts} or .err
  local clip=$1 mode=$2 flags=(); shift 2
  [ "$mode" = every-frame ] && flags=(--video-detect every-frame)
  local base=$R/$clip.$mode in=$CLIPS/$clip.mp4
  rm -f "$base".*
  echo 5 >"/proc/$P/clear_refs" 2>/dev/null || true  # VmHWM from here (the daemon's peak RSS of this job)
  echo "$clip, $mode: swapping $("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["frames"])' "$CLIPS/$clip.json") frames"
  if ! "$CTL" --socket "$S" swap --source "$SRC" --target "$in" -o "$base.mp4" --json ${flags[@]+"${flags[@]}"} "$@" \
      >"$base.swap.json.tmp" 2>"$base.err"; then
    echo "  swap failed: $(tail -1 "$base.err")"
    if [ "$mode" = every-frame ] && grep -qi 'video-detect' "$base.err"; then
      echo "  (this fusionctl rejects --video-detect: no every-frame reference)"
    fi
    rm -f "$base.swap.json.tmp"; return 0
  fi
  mv "$base.swap.json.tmp" "$base.swap.json"; rm -f "$base.err"
  awk '/^VmHWM/ {print $2}' "/proc/$P/status" >"$base.rss"
  echo "$(facts "$in") $(facts "$base.mp4")" >"$base.facts"
  "$PY" bench/video/measure.py "$in" "$base.mp4" "$CLIPS/$clip.json" --json >"$base.measure.json" \
    || echo "  measure.py failed"
}

for j in "$CLIPS"/*.json; do
  clip=$(basename "$j" .json)
  [ -f "$CLIPS/$clip.mp4" ] || continue
  for mode in $MODES; do swap "$clip" "$mode" "$@"; done
done
echo
table "$R"
