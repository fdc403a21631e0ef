#!/usr/bin/env bash
# The daemon half of scripts/gpu-check (run by it on the GPU machine, with its environment):
#   gpu-check-daemon.sh BUILD BUNDLE OUTDIR
# swap_cuda   a real-weights swap on cuda:0 and the same on cpu; image_diff between the results
#             (fp16 enhance/fp32 tolerance: max_abs <= 8 per channel, PSNR >= 35 dB)
# oom_ladder  a swap with --enhance x4 --upscale x4 under --device-memory-limit 160MiB must succeed
#             with a degraded (tiled or cpu_fallback) stage
# external    python torch takes 8 GiB of VRAM; fusiond's device budget must shrink by >= 7 GiB
# Results: OUTDIR/daemon_checks.json (one object per check) and the JSON of each job/mem reading.
set -uo pipefail
BUILD=$1 BUNDLE=$2 OUTDIR=$3
PY=${PYTHON:-python3}
MANIFEST=$(cd "$(dirname "$0")/.." && pwd)/models/manifest.json
RUN=$(mktemp -d)
FUSIOND=$BUILD/daemon/fusiond FUSIONCTL=$BUILD/client/fusionctl DIFF=$BUILD/bench/image_diff
SRC=$BUNDLE/testdata/faces/sample1.jpg TGT=$BUNDLE/testdata/faces/sample2.jpg
declare -a PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$RUN"; }
trap cleanup EXIT
results=()
record() { results+=("\"$1\":{\"ok\":$2,\"detail\":$3}"); echo "$1: ok=$2 $3"; }

start() {  # start NAME ARGS...: a fusiond on RUN/NAME.sock; waits until it answers health
  local name=$1; shift
  "$FUSIOND" --socket "$RUN/$name.sock" --models-dir "$BUNDLE/models" --state-dir "$RUN/$name-state" \
    --manifest "$MANIFEST" "$@" >"$OUTDIR/fusiond-$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    "$FUSIONCTL" --socket "$RUN/$name.sock" health >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "fusiond $name did not come up (see fusiond-$name.log)"
  return 1
}
ctl() { local name=$1; shift; "$FUSIONCTL" --socket "$RUN/$name.sock" "$@"; }
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

# --- swap_cuda: cuda:0 vs cpu on the real weights ---------------------------------------------
if start cuda --device cuda:0 && start cpu --device cpu; then
  ctl cuda swap --source "$SRC" --target "$TGT" -o "$OUTDIR/swap_cuda.png" --enhance x2 --json >"$OUTDIR/swap_cuda.json" 2>"$OUTDIR/swap_cuda.err"
  ctl cpu swap --source "$SRC" --target "$TGT" -o "$OUTDIR/swap_cpu.png" --enhance x2 --json >"$OUTDIR/swap_cpu.json" 2>"$OUTDIR/swap_cpu.err"
  if d=$("$DIFF" "$OUTDIR/swap_cuda.png" "$OUTDIR/swap_cpu.png"); then
    ok=$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print("true" if d["max_abs"] <= 8 or (d["psnr_db"] or 99) >= 35 else "false")' "$d")
    record swap_cuda "$ok" "$d"
  else
    record swap_cuda false "\"no comparable results (see swap_cuda.err, swap_cpu.err)\""
  fi
  ctl cuda mem --json >"$OUTDIR/mem_after_swap_cuda.json"
else
  record swap_cuda false "\"a daemon did not start\""
fi

# --- external: another process takes VRAM, the budget shrinks ---------------------------------
if [ -S "$RUN/cuda.sock" ]; then
  ctl cuda mem --json >"$RUN/m0.json"
  b0=$(jget "$RUN/m0.json" 'd["device"]["budget_bytes"]')
  "$PY" -c 'import torch,time; x=torch.empty(8<<30, dtype=torch.uint8, device="cuda:0"); torch.cuda.synchronize(); open(__import__("sys").argv[1],"w").close(); time.sleep(30)' "$RUN/held" &
  hog=$!; PIDS+=($hog)
  for _ in $(seq 100); do [ -f "$RUN/held" ] && break; sleep 0.2; done
  b1=$b0
  for _ in $(seq 20); do
    ctl cuda mem --json >"$RUN/m1.json"; b1=$(jget "$RUN/m1.json" 'd["device"]["budget_bytes"]')
    [ $((b0 - b1)) -ge $((7 << 30)) ] && break
    sleep 0.5
  done
  kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null
  ok=false; [ $((b0 - b1)) -ge $((7 << 30)) ] && ok=true
  record external "$ok" "{\"budget_before\":$b0,\"budget_with_8GiB_taken\":$b1}"
fi

# --- oom_ladder: a real CUDA OOM under a small limit, recovered -------------------------------
if start small --device cuda:0 --device-memory-limit 160MiB --device-memory-reserve 0; then
  ctl small swap --source "$SRC" --target "$TGT" -o "$OUTDIR/swap_small.png" --enhance x4 --upscale x4 --json \
    >"$OUTDIR/swap_small.json" 2>"$OUTDIR/swap_small.err"
  rc=$?
  ctl small mem --json >"$OUTDIR/mem_small.json"
  if [ $rc = 0 ]; then
    modes=$(jget "$OUTDIR/swap_small.json" '",".join(s["mode"] for s in d["stages"])')
    ok=false; [[ $modes == *tiled* || $modes == *cpu_fallback* ]] && ok=true
    record oom_ladder "$ok" "{\"modes\":\"$modes\",\"degradations\":$(jget "$OUTDIR/swap_small.json" '__import__("json").dumps(d["degradations"])')}"
  else
    record oom_ladder false "\"swap failed rc=$rc (see swap_small.err)\""
  fi
fi

printf '{%s}\n' "$(IFS=,; echo "${results[*]}")" >"$OUTDIR/daemon_checks.json"
! grep -q '"ok":false' "$OUTDIR/daemon_checks.json"
