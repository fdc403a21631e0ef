#!/usr/bin/env bash
# Measures which of the unit's sandbox settings fusiond's real work survives, outside systemd
# (no systemd as PID 1 here): one swap (sample1 onto sample2) by a fusiond started
#   plain          - as is
#   syscall-filter - under the unit's SystemCallFilter= set (sysfilter.py; python3-seccomp)
#   mdwe           - under MemoryDenyWriteExecute (the kernel's PR_SET_MDWE, Linux >= 6.3)
# and prints each outcome and whether its image equals the plain one. docs/SERVICE.md has the
# figures. Usage: sandbox_swap.sh [BUILD_DIR]   (needs the fetched weights and test photos)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
faces=$build/fetched/testdata/faces
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/mdwe" "$here/mdwe.c" || exit 1
run() {  # run NAME [WRAPPER...]
  local name=$1; shift
  rm -rf "$tmp/state" && mkdir "$tmp/state"
  "$@" "$build/daemon/fusiond" --socket "$tmp/f.sock" --state-dir "$tmp/state" \
    --models-dir "$build/fetched/models" --manifest "$src/models/manifest.json" 2>"$tmp/$name.log" &
  local pid=$! i
  for i in $(seq 300); do [ -S "$tmp/f.sock" ] && break; sleep 0.1; done
  local out
  out=$("$build/client/fusionctl" --socket "$tmp/f.sock" --timeout-ms 600000 swap \
    --source "$faces/sample1.jpg" --target "$faces/sample2.jpg" -o "$tmp/$name.png" 2>&1 | tail -1)
  kill -TERM $pid; wait $pid
  local same=""
  [ "$name" != plain ] && [ -f "$tmp/plain.png" ] && [ -f "$tmp/$name.png" ] && cmp -s "$tmp/plain.png" "$tmp/$name.png" && same=" (image identical to plain)"
  echo "$name: $out$same"
}
run plain
run syscall-filter /usr/bin/python3 "$here/sysfilter.py"
run mdwe "$tmp/mdwe"
