#!/usr/bin/env bash
# The install steps of docs/OPERATIONS.md for real, inside a Debian 12 chroot (not in CI: it downloads a
# minimal Debian and the package's dependencies, ~10 min; run it as root and report):
#   apt install ./fusiond_*.deb  -> user fusiond, group fusion, directories, nothing started
#   fusiond-fetch-models         -> weights in /var/lib/fusiond/models (--from the shipped files)
#   the installed fusiond, socket-activated with the unit's ExecStart, as user fusiond
#   fusionctl swap by a user who is only a member of group fusion
#   apt remove keeps /var/lib/fusiond; apt purge removes it
# No systemd as PID 1 in a chroot: `systemctl enable --now fusiond.socket` is replaced by
# systemd-socket-activate with the socket unit's ListenStream= pair and SocketMode=0660.
#   chroot_install.sh DEB CHROOT_DIR [TESTDATA_DIR]   (CHROOT_DIR: from debootstrap, or made here)
set -euo pipefail
deb=$(readlink -f "$1") root=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
testdata=${3:-$src/build/fetched/testdata}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run it as root"
if [ ! -x "$root/usr/bin/apt-get" ]; then
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
fi
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for m in proc dev; do
  mountpoint -q "$root/$m" || { mount --bind "/$m" "$root/$m"; mounted+=("$root/$m"); }
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

cp "$deb" "$root/tmp/fusiond.deb"
in_root apt-get update -qq
echo "apt install ./fusiond.deb ..."
start=$(date +%s)
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq --no-install-recommends /tmp/fusiond.deb >"$root/tmp/apt.log" 2>&1 ||
  { tail -30 "$root/tmp/apt.log"; fail "apt install"; }
echo "  installed in $(( $(date +%s) - start )) s"
in_root getent passwd fusiond | grep -q ':/var/lib/fusiond:' || fail "no user fusiond"
in_root getent group fusion >/dev/null || fail "no group fusion"
[ "$(in_root stat -c "%U:%G %a" /var/lib/fusiond)" = "fusiond:fusion 700" ] || fail "/var/lib/fusiond: $(in_root stat -c "%U:%G %a" /var/lib/fusiond)"
[ "$(in_root stat -c "%U:%G %a" /run/fusiond)" = "fusiond:fusion 750" ] || fail "/run/fusiond: $(in_root stat -c "%U:%G %a" /run/fusiond)"
in_root dpkg-query -W -f='${Conffiles}\n' fusiond | grep -q /etc/fusiond/fusiond.toml || fail "conffile"
echo "  user fusiond, group fusion, /var/lib/fusiond fusiond:fusion 0700, /run/fusiond fusiond:fusion 0750"

rm -rf "$root/tmp/weights" && cp -r "$src/third_party/weights" "$root/tmp/weights"
in_root fusiond-fetch-models --from /tmp/weights -q || fail "fusiond-fetch-models"
in_root fusiond-fetch-models --check -q || fail "models do not verify"
echo "  fusiond-fetch-models: $(find "$root/var/lib/fusiond/models" -type f | wc -l) files verify"

in_root id alice >/dev/null 2>&1 || in_root useradd -m -G fusion alice
in_root id bob >/dev/null 2>&1 || in_root useradd -m bob
cp "$testdata/faces/sample1.jpg" "$testdata/faces/sample2.jpg" "$root/home/alice/"
in_root chown alice: /home/alice/sample1.jpg /home/alice/sample2.jpg
exec_start=$(sed -n 's/^ExecStart=//p' "$root/usr/lib/systemd/system/fusiond.service")
# shellcheck disable=SC2086
in_root setpriv --reuid=fusiond --regid=fusion --init-groups \
  systemd-socket-activate -l /run/fusiond/fusiond.sock -l /run/fusiond/fusiond.sock.fd \
  $exec_start --device-memory-limit 2GiB >"$root/tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$root/run/fusiond/fusiond.sock.fd" ] && break; sleep 0.05; done
chmod 0660 "$root/run/fusiond/fusiond.sock" "$root/run/fusiond/fusiond.sock.fd"  # SocketMode=0660
in_root setpriv --reuid=alice --regid=alice --init-groups fusionctl health || { cat "$root/tmp/daemon.log"; fail "health as alice"; }
if in_root setpriv --reuid=bob --regid=bob --init-groups fusionctl health >/dev/null 2>&1; then
  fail "bob (not in group fusion) reached fusiond"
fi
in_root setpriv --reuid=alice --regid=alice --init-groups env HOME=/home/alice fusionctl --timeout-ms 300000 swap \
  --source /home/alice/sample1.jpg --target /home/alice/sample2.jpg -o /home/alice/swapped.png ||
  { cat "$root/tmp/daemon.log"; fail "swap as alice"; }
echo "  fusionctl swap as alice (group fusion): $(stat -c %s "$root/home/alice/swapped.png") bytes; bob refused"
kill -TERM $pid; wait $pid || true

DEBIAN_FRONTEND=noninteractive in_root apt-get remove -y -qq fusiond >/dev/null 2>&1 || fail "apt remove"
[ -d "$root/var/lib/fusiond/models" ] || fail "apt remove removed /var/lib/fusiond"
DEBIAN_FRONTEND=noninteractive in_root apt-get purge -y -qq fusiond >/dev/null 2>&1 || fail "apt purge"
[ ! -e "$root/var/lib/fusiond" ] || fail "apt purge kept /var/lib/fusiond"
[ ! -e "$root/etc/fusiond" ] || fail "apt purge kept /etc/fusiond"
echo "  apt remove kept /var/lib/fusiond; apt purge removed it and /etc/fusiond"
echo PASS
