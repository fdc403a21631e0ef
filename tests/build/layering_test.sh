#!/usr/bin/env bash
# The include direction of docs/ARCHITECTURE.md#layers, checked on the sources: main -> daemon
# -> {rpc, observe, systemd, pipeline} -> loader -> jobs -> memory -> device, and models/
# includes nothing of the daemon. Each rule names a folder and the folders it must not include.
# Prints every offending #include and exits 1 when there is one.
set -euo pipefail
src=${1:?usage: layering_test.sh SOURCE_DIR}
cd "$src"
daemon_dirs='rpc|observe|systemd|pipeline|loader|jobs|memory|device|config|common|image|video'
fail=0
check() {  # check DIR FORBIDDEN_REGEX
  local hits
  hits=$(grep -rnE "^#include \"($2)" "$1" --include='*.h' --include='*.cc' || true)
  if [ -n "$hits" ]; then
    echo "$1 must not include ($2):"
    echo "$hits"
    fail=1
  fi
}
for d in pipeline loader jobs memory device; do
  check "daemon/$d" '(rpc|observe|systemd)/|daemon\.h'
done
check daemon/rpc '(pipeline|loader|observe|systemd)/|daemon\.h'
for d in jobs memory device; do check "daemon/$d" '(pipeline|loader)/'; done
for d in memory device; do check "daemon/$d" 'jobs/'; done
check daemon/device 'memory/'
check models "($daemon_dirs)/|daemon\\.h"
[ $fail -eq 0 ] && echo "layering: every include runs down"
exit $fail
