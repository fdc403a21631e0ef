#!/usr/bin/env bash
# scripts/gpu-check's loadgen step on --device cpu (ctest gpu_check_loadgen_cpu):
#   gpu_check_loadgen_test.sh BUILD WEIGHTS TESTDATA
# The same script as on the GPU machine (scripts/gpu-check-loadgen.sh), with the synthetic
# FaceFusion-sized models scaled to 1/20 (generator 27.7 MB, x2 enhancer 17.0 MB, x4 enhancer
# 3.4 MB) and a budget they do not fit in beside the face-api models, so the residency manager
# must evict: every job must succeed through the synthetic generator (a generate stage in every
# result) and the two enhance jobs through their synthetic enhancers, each model uploaded and
# measured at its parameter bytes, and evictions counted.
set -euo pipefail
BUILD=$1 WEIGHTS=$2 TESTDATA=$3
export PYTHON=${PYTHON:-/usr/bin/python3}  # Debian's python3-torch, not a pyenv shim
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# --generator names a catalogue model of stage generate; anything else stops fusiond at start-up.
for bad in "nope:is not in the catalogue" "feather-blend:is a blend model, not a generator"; do
  rc=0
  timeout 60 "$BUILD/daemon/fusiond" --socket "$OUT/bad.sock" --state-dir "$OUT/bad-state" --device cpu \
    --models-dir "$WEIGHTS" --generator "${bad%%:*}" >"$OUT/bad.log" 2>&1 || rc=$?
  [ $rc != 0 ] && [ $rc != 124 ] || { echo "fusiond --generator ${bad%%:*}: rc $rc, expected a start-up error"; exit 1; }
  grep -q "generator: '${bad%%:*}' ${bad#*:}" "$OUT/bad.log" || { echo "no clear error:"; cat "$OUT/bad.log"; exit 1; }
done
mkdir "$OUT/photos"
cp "$TESTDATA"/faces/sample1.jpg "$TESTDATA"/faces/sample2.jpg "$OUT/photos/"
bash "$(dirname "$0")/../scripts/gpu-check-loadgen.sh" "$BUILD" "$WEIGHTS" "$OUT/photos" "$OUT/result" \
  --device cpu --scale 0.05 --limit 64MiB --clients 4 --jobs 1 --mix small,enhance2,small,enhance4 --max-seconds 40 --expect-evictions
python3 - "$OUT/result/loadgen.json" <<'PY'
import json, sys
lg = json.load(open(sys.argv[1]))
assert lg["clients"] == 4 and lg["jobs_done"] == 4, lg["states"]
assert all(any(s["name"] == "generate" and s["mode"] == "device" for s in j["stages"]) for j in lg["jobs"]), \
    [j["stages"] for j in lg["jobs"]]
enhanced = sorted(j["enhance_model"] for j in lg["jobs"] if "enhance_model" in j)
assert enhanced == ["synthetic-gfpgan_1.4", "synthetic-real_esrgan_x4"], enhanced
assert all(any(s["name"] == "enhance" for s in j["stages"]) for j in lg["jobs"] if "enhance_model" in j)
print("gpu_check_loadgen_test: ok")
PY
