#!/usr/bin/env bash
# fusiond's systemd units as installed: `systemd-analyze verify` prints nothing (a warning fails
# too), and `systemd-analyze security --offline=true` rates fusiond.service at most 2.0 (the
# score is printed). The units are checked inside a scratch root holding the configured units,
# the host's own units (targets, slices) and the built fusiond at the unit's ExecStart path.
#   unit_checks_test.sh BUILD_DIR SOURCE_DIR FUSIOND_BINARY
set -euo pipefail
build=$1 src=$2 fusiond=$3
max_exposure=2.0
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
units=$root/usr/lib/systemd/system
mkdir -p "$units" "$root/etc/systemd/system"
cp -P /lib/systemd/system/*.target /lib/systemd/system/*.slice "$units/" 2>/dev/null || true
cp "$build/systemd/fusiond.service" "$src/systemd/fusiond.socket" "$units/"
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$units/fusiond.service")
mkdir -p "$root$(dirname "$exec_start")"
cp "$fusiond" "$root$exec_start"
# Other Exec*= programs (ExecReload=/bin/kill) are the host's.
for prog in $(sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\(\/[^ ]*\).*/\1/p' "$units/fusiond.service" | sort -u); do
  [ -e "$root$prog" ] && continue
  mkdir -p "$root$(dirname "$prog")"
  cp "$(readlink -f "$prog")" "$root$prog"
done

out=$(systemd-analyze verify --root="$root" /usr/lib/systemd/system/fusiond.socket \
        /usr/lib/systemd/system/fusiond.service 2>&1) || { echo "FAIL: verify: $out" >&2; exit 1; }
[ -z "$out" ] || { echo "FAIL: systemd-analyze verify printed:"; echo "$out"; exit 1; } >&2
echo "systemd-analyze verify: clean"

report=$(systemd-analyze security --offline=true --root="$root" fusiond.service 2>&1)
score=$(sed -n 's/.*Overall exposure level for fusiond.service: \([0-9.]*\).*/\1/p' <<<"$report")
[ -n "$score" ] || { echo "FAIL: no exposure level in:"; echo "$report"; exit 1; } >&2
echo "systemd-analyze security: exposure $score (at most $max_exposure); not set:"
grep '✗' <<<"$report" | sed 's/  */ /g' | cut -c1-110
awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s <= m) }' ||
  { echo "FAIL: exposure $score is above $max_exposure" >&2; exit 1; }
echo PASS
