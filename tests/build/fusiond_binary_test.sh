#!/usr/bin/env bash
# What a user sees of the fusiond binary before it serves, in every build:
#   fusiond --version prints "fusiond X.Y.Z", then "LibTorch A.B.C", then "CUDA N.M" or
#   "CUDA: not built" (the build's WITH_CUDA), and exits 0;
#   fusiond --device cuda:0 on a machine without an NVIDIA driver, or from a CPU-only build,
#   exits 1 within 10 s naming the device and the reason (never a fall back to the CPU).
# With WITH_CUDA=1 (a build against PyPI's CUDA LibTorch) also how it is linked:
#   it needs libtorch_cuda.so and libc10_cuda.so (a linker with --as-needed would drop
#   libtorch_cuda, and a real card would then say "Cannot initialize CUDA without ATen_cuda
#   library"), every library resolves, c10 is the wheel's and not Debian's 1.13, and no Debian
#   libdnnl.so.2 is in the process (models/onednn/CMakeLists.txt says why).
#   fusiond_binary_test.sh FUSIOND VERSION WITH_CUDA(0|1) TORCH_VERSION
set -euo pipefail
bin=$1 version=$2 with_cuda=$3 torch_version=$4
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin" --version) || fail "--version exited $?"
[ "$(sed -n 1p <<<"$out")" = "fusiond $version" ] || fail "--version line 1: $(sed -n 1p <<<"$out")"
[ "$(sed -n 2p <<<"$out")" = "LibTorch $torch_version" ] || fail "--version line 2: $(sed -n 2p <<<"$out")"
line3=$(sed -n 3p <<<"$out")
if [ "$with_cuda" = 1 ]; then
  [[ $line3 =~ ^CUDA\ [0-9]+\.[0-9]+$ ]] || fail "--version line 3: '$line3' (a CUDA build)"
else
  [ "$line3" = "CUDA: not built" ] || fail "--version line 3: '$line3' (a CPU-only build)"
fi
[ "$(wc -l <<<"$out")" = 3 ] || fail "--version printed $(wc -l <<<"$out") lines"
echo "--version: $(tr '\n' '|' <<<"$out")"

if [ "$with_cuda" = 0 ] || ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s%N)
  rc=0
  timeout 10 "$bin" --device cuda:0 --socket "$tmp/s" --state-dir "$tmp/state" >"$tmp/out" 2>&1 || rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  [ "$rc" = 1 ] || fail "--device cuda:0 exited $rc after $ms ms: $(cat "$tmp/out")"
  msg=$(grep -m1 'cannot start' "$tmp/out") || fail "no 'cannot start' line: $(cat "$tmp/out")"
  grep -q 'device cuda:0 is not available' <<<"$msg" || fail "the message names no device: $msg"
  if [ "$with_cuda" = 1 ]; then
    grep -q 'no NVIDIA driver' <<<"$msg" || fail "the message gives no reason: $msg"
  else
    grep -q 'CPU-only build' <<<"$msg" || fail "the message gives no reason: $msg"
  fi
  [ ! -e "$tmp/s" ] || fail "a socket was made"
  echo "--device cuda:0: exit 1 in $ms ms: ${msg#*critical }"
fi

if [ "$with_cuda" = 1 ]; then
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for lib in libtorch_cuda.so libc10_cuda.so libtorch_cpu.so; do
    grep -qx "$lib" <<<"$needed" || fail "$bin does not need $lib"
  done
  closure=$(ldd "$bin")
  ! grep -q 'not found' <<<"$closure" || fail "unresolved: $(grep 'not found' <<<"$closure")"
  c10=$(awk '$1 == "libc10.so" {print $3}' <<<"$closure")
  [[ $c10 == */torch/lib/libc10.so ]] || fail "libc10.so resolves to '$c10', not the wheel's"
  ! grep -q 'libdnnl\.so' <<<"$closure" || fail "Debian's libdnnl is in the process: $(grep libdnnl <<<"$closure")"
  echo "linked: libtorch_cuda, libc10_cuda, the wheel's c10 ($c10); no libdnnl.so.2"
fi
echo "fusiond binary: passed"
