#!/usr/bin/env bash
# scripts/gpu-check's loadgen step (and, with --device cpu and a small scale, its CI test):
#   gpu-check-loadgen.sh BUILD WEIGHTS PHOTOS OUTDIR [--device cuda:0] [--scale 1] [--limit 6GiB]
#                        [--clients 4] [--jobs 2] [--mix simple,enhance2,enhance4] [--max-seconds 150]
#                        [--expect-evictions] [--daemon-arg ARG ...]
# 1. scripts/make_synthetic_models.py writes FaceFusion-sized synthetic TorchScript models (the
#    sizes x --scale): a generator of inswapper_128's 554,253,681 bytes, an x2 enhancer of
#    GFPGAN 1.4's 340,300,000 and an x4 enhancer of Real-ESRGAN x4's 67,000,000, and a manifest:
#    models/manifest.json plus those entries (made here with python torch: nothing large travels).
# 2. fusiond --device DEVICE --device-memory-limit LIMIT --generator synthetic-inswapper_128 on
#    that manifest (the real face-api/ESRGAN weights in WEIGHTS beside the synthetic files),
#    plus each --daemon-arg ARG in order (e.g. --daemon-arg --eviction-policy=planner).
# 3. bench/loadgen: CLIENTS client processes x JOBS jobs (the photos in PHOTOS, two or more; the
#    enhance2 jobs name synthetic-gfpgan_1.4, the enhance4 ones synthetic-real_esrgan_x4) ->
#    OUTDIR/loadgen.json, and fusionctl mem --json after it -> OUTDIR/loadgen_mem.json.
# Fails (exit 1, the reason on stderr) when a job did not succeed, when a job ran no generate
# stage (or, asked to enhance, no enhance stage), when a synthetic model a job used was never
# uploaded to the device tier or was measured off its parameter bytes by more than 10%, or,
# with --expect-evictions, when nothing was evicted.
# Bounded: loadgen submits nothing after --max-seconds and waits at most 60 s more; the caller's
# timeout bounds the rest.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
BUILD=$1 WEIGHTS=$2 PHOTOS=$3 OUTDIR=$4
shift 4
DEVICE=cuda:0 SCALE=1 LIMIT=6GiB CLIENTS=4 JOBS=2 MIX=simple,enhance2,enhance4 MAX_SECONDS=150 EXPECT_EVICTIONS=0
DAEMON_ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --mix) MIX=$2; shift 2 ;;
    --max-seconds) MAX_SECONDS=$2; shift 2 ;;
    --expect-evictions) EXPECT_EVICTIONS=1; shift ;;
    --daemon-arg) DAEMON_ARGS+=("$2"); shift 2 ;;
    *) echo "gpu-check-loadgen: unknown argument $1" >&2; exit 2 ;;
  esac
done
GEN=synthetic-inswapper_128
RUN=$(mktemp -d)
daemon=""
cleanup() { [ -n "$daemon" ] && { kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; }; rm -rf "$RUN"; }
trap cleanup EXIT
fail() { echo "gpu-check-loadgen: FAILED: $*" >&2; exit 1; }
mkdir -p "$OUTDIR"

"$PY" "$ROOT/scripts/make_synthetic_models.py" --out "$RUN/syn" --weights "$WEIGHTS" --scale "$SCALE" \
  >"$OUTDIR/synthetic_models.json" || fail "make_synthetic_models.py (see above)"
cat "$OUTDIR/synthetic_models.json"

"$BUILD/daemon/fusiond" --socket "$RUN/d.sock" --state-dir "$RUN/state" --device "$DEVICE" \
  --device-memory-limit "$LIMIT" --models-dir "$RUN/syn/models" --manifest "$RUN/syn/manifest.json" \
  --generator "$GEN" "${DAEMON_ARGS[@]}" >"$OUTDIR/fusiond-loadgen.log" 2>&1 &
daemon=$!
up=0
for _ in $(seq 150); do
  "$BUILD/client/fusionctl" --socket "$RUN/d.sock" health >/dev/null 2>&1 && { up=1; break; }
  kill -0 "$daemon" 2>/dev/null || break
  sleep 0.2
done
[ $up = 1 ] || fail "fusiond did not come up: $(tail -3 "$OUTDIR/fusiond-loadgen.log")"

"$BUILD/bench/loadgen" --socket "$RUN/d.sock" --photos "$PHOTOS" --clients "$CLIENTS" --jobs "$JOBS" \
  --mix "$MIX" --max-seconds "$MAX_SECONDS" --daemon-pid "$daemon" --json "$OUTDIR/loadgen.json" \
  --enhance-model 2=synthetic-gfpgan_1.4 --enhance-model 4=synthetic-real_esrgan_x4
lg=$?
"$BUILD/client/fusionctl" --socket "$RUN/d.sock" mem --json >"$OUTDIR/loadgen_mem.json" \
  || fail "fusionctl mem after the run"
[ -s "$OUTDIR/loadgen.json" ] || fail "loadgen wrote no JSON (rc $lg)"

"$PY" - "$OUTDIR/loadgen.json" "$OUTDIR/loadgen_mem.json" "$GEN" "$((CLIENTS * JOBS))" "$EXPECT_EVICTIONS" \
  "$OUTDIR/synthetic_models.json" <<'EOF'
import json, sys
lg, mem = (json.load(open(p)) for p in sys.argv[1:3])
gen, want, expect_evictions = sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
problems = []
if lg["jobs_done"] != want:
    problems.append(f"{lg['jobs_done']} of {want} jobs succeeded; failures: {lg['failures']}")
used = {gen}
for j in lg["jobs"]:
    if j.get("state") != "SUCCEEDED":
        continue
    names = [s["name"] for s in j.get("stages", [])]
    if "generate" not in names:
        problems.append(f"a job of client {j.get('client')} ran no generate stage")
    if j.get("enhance_model"):
        used.add(j["enhance_model"])
        if "enhance" not in names:
            problems.append(f"a job of client {j.get('client')} asked {j['enhance_model']} but ran no enhance stage")
params = {m["name"]: m["device_bytes"] for m in json.load(open(sys.argv[6]))["models"]}
state = {m.get("name"): m for m in mem.get("models", [])}
report = []
for name in sorted(used):
    model = state.get(name)
    if model is None:
        problems.append(f"{name} is not in the memory state's models")
    elif not model.get("uploads", 0) > 0:
        problems.append(f"{name} was never uploaded: {model}")
    elif not 0.9 * params[name] <= model["bytes"] <= 1.25 * params[name]:
        problems.append(f"{name} measured {model['bytes']} device bytes, its parameters are {params[name]}")
    if model is not None:
        report.append(f"{name} uploads {model.get('uploads')} evictions {model.get('evictions')} "
                      f"({model.get('bytes', 0) / 2**20:.1f} MiB measured)")
def delta(key):
    return lg["counters_after"].get(key, 0) - lg["counters_before"].get(key, 0)
evictions = delta("evictions")
if expect_evictions and evictions <= 0:
    problems.append("no eviction under the budget")
print(f"gpu-check-loadgen: {lg['jobs_done']}/{want} jobs, {lg['jobs_per_s']:.3f} jobs/s, p50 {lg['latency_ms']['p50']:.0f} ms, "
      f"evictions {evictions}, uploaded {delta('bytes_uploaded') / 2**20:.1f} MiB in {delta('uploads')}; "
      f"{'; '.join(report)}; peak device "
      f"{lg['peak_device_bytes'] / 2**20:.1f} MiB, daemon VmHWM {lg['daemon_vmhwm_kib'] / 1024:.1f} MiB")
for p in problems:
    print("gpu-check-loadgen: FAILED:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
