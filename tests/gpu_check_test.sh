#!/usr/bin/env bash
# scripts/gpu-check's CPU-side steps (CI has no GPU):
#  1. with no NVIDIA GPU it exits 3 within seconds, naming the GPU as what is missing;
#  2. with a GPU (a fake nvidia-smi) but no CUDA LibTorch it exits 4 naming LibTorch;
#  3. with no OUTDIR and no $OUT it exits 2;
#  4. --pack, bounded: the full package closure is computed (every library the build links
#     resolves to an installed Debian package), then three packages are fetched, unpacked and
#     packed with two trap stubs, under the budget; the stubs load (dlopen) and define the real
#     library's symbols; a 1-MiB budget is refused with exit 1. The full --pack (88 .debs, ~5 min
#     on 2 busy cores) is run by hand: docs/GPU-CHECK.md.
# Usage: gpu_check_test.sh MODELS_DIR TESTDATA_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODELS=$1 TESTDATA=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$T/nogpu"
t0=$SECONDS
set +e
PATH=$T/nogpu:/usr/bin:/bin "$ROOT/scripts/gpu-check" "$T/out" 2>"$T/err1"; rc=$?
set -e
[ $rc = 3 ] || fail "no GPU: exit $rc, want 3 ($(cat "$T/err1"))"
grep -q "no NVIDIA GPU" "$T/err1" || fail "no GPU: message $(cat "$T/err1")"
[ $((SECONDS - t0)) -le 20 ] || fail "no GPU: took $((SECONDS - t0)) s"
if ls /proc/driver/nvidia/gpus/*/information >/dev/null 2>&1; then fail "this machine has a GPU"; fi

mkdir -p "$T/fakegpu"
printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-fake)"\n' >"$T/fakegpu/nvidia-smi"
chmod +x "$T/fakegpu/nvidia-smi"
printf '#!/bin/sh\necho "ModuleNotFoundError: No module named torch" >&2\nexit 1\n' >"$T/fakegpu/python3"
chmod +x "$T/fakegpu/python3"
set +e
PATH=$T/fakegpu:/usr/bin:/bin "$ROOT/scripts/gpu-check" "$T/out" 2>"$T/err2"; rc=$?
set -e
[ $rc = 4 ] || fail "no LibTorch: exit $rc, want 4 ($(cat "$T/err2"))"
grep -q "no CUDA LibTorch" "$T/err2" || fail "no LibTorch: message $(cat "$T/err2")"
printf '#!/bin/sh\nprintf "/x/share/cmake\\n\\n2.11.0+cpu\\n"\n' >"$T/fakegpu/python3"
set +e
PATH=$T/fakegpu:/usr/bin:/bin "$ROOT/scripts/gpu-check" "$T/out" 2>"$T/err3"; rc=$?
set -e
[ $rc = 4 ] && grep -q "CPU-only build" "$T/err3" || fail "CPU torch: exit $rc ($(cat "$T/err3"))"
set +e
(unset OUT; "$ROOT/scripts/gpu-check" 2>"$T/err4"); rc=$?
set -e
[ $rc = 2 ] || fail "no OUTDIR: exit $rc"

python3 "$ROOT/scripts/gpu_bundle.py" closure >"$T/pkgs" 2>"$T/stubs"
[ "$(wc -l <"$T/pkgs")" -ge 60 ] || fail "closure: only $(wc -l <"$T/pkgs") packages"
grep -qx libgrpc++-dev "$T/pkgs" && grep -qx libopencv-imgcodecs406 "$T/pkgs" || fail "closure misses grpc/opencv"
grep -q libgdal.so.32 "$T/stubs" || fail "closure: gdal not stubbed"
python3 "$ROOT/scripts/gpu_bundle.py" pack "$T/b" --models "$MODELS" --testdata "$TESTDATA" \
  --only libsqlite3-0,libsqlite3-dev,zlib1g-dev --stub libgdal.so.32,libx265.so.199 >"$T/pack.log"
cat "$T/pack.log"
grep -q "of the 64.0 MiB budget" "$T/pack.log" || fail "pack printed no budget line"
python3 "$ROOT/scripts/gpu_bundle.py" unpack "$T/b" "$T/prefix" >/dev/null
L=$T/prefix/usr/lib/x86_64-linux-gnu
[ -f "$T/prefix/usr/include/sqlite3.h" ] && [ -e "$L/libsqlite3.so" ] || fail "unpack: no sqlite3 header/library"
[ -f "$L/cmake/opencv4/OpenCVConfig.cmake" ] || fail "unpack: no OpenCV config"
[ -z "$(find "$T/prefix" -name '*.a')" ] || fail "pack: static archives were not pruned"
for s in libgdal.so.32 libx265.so.199; do
  python3 -c 'import ctypes,sys; ctypes.CDLL(sys.argv[1])' "$L/$s" || fail "stub $s does not load"
  syms() { readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $5 != "LOCAL" && ($4 == "FUNC" || $4 == "OBJECT") {print $8}' | sort -u; }
  syms "/usr/lib/x86_64-linux-gnu/$s" >"$T/want"; syms "$L/$s" >"$T/got"
  missing=$(comm -23 "$T/want" "$T/got" | wc -l)
  [ "$(wc -l <"$T/want")" -gt 10 ] && [ "$missing" = 0 ] || fail "stub $s lacks $missing of $(wc -l <"$T/want") symbols (with versions)"
done
set +e
python3 "$ROOT/scripts/gpu_bundle.py" pack "$T/b" --models "$MODELS" --testdata "$TESTDATA" \
  --only zlib1g-dev --budget-mib 1 >/dev/null 2>"$T/over"; rc=$?
set -e
[ $rc = 1 ] && grep -q "over the budget" "$T/over" || fail "a 1-MiB budget was not refused (exit $rc)"
echo "gpu-check CPU side: preflight exits 3/4/4/2 as expected; bounded pack, unpack and stubs OK"
