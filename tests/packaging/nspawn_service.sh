#!/usr/bin/env bash
# The package under systemd as PID 1 (not in CI; run as root and report, ~2 min): boots the
# Debian 12 root that chroot_install.sh made with `systemd-nspawn -b` (Debian's systemd-container)
# and checks there: apt install starts nothing; `systemctl enable --now fusiond.socket`; the first
# connection by a member of group fusion starts the service (READY, a STATUS= line); a swap under
# the full sandbox; `systemctl reload` (RELOADING/READY, log_level applied, other keys named); the
# watchdog killing and restarting a fusiond whose job hangs (FUSIOND_FAULTS=detect=hang, which
# the packaged test build honours) with the job requeued; a clean stop; apt purge.
#   nspawn_service.sh DEB CHROOT_DIR
set -euo pipefail
deb=$(readlink -f "$1") root=$(readlink -f "$2")
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run it as root"
[ -x "$root/usr/bin/fusionctl" ] || [ -x "$root/usr/bin/apt-get" ] || fail "$root: run chroot_install.sh first"
[ -f "$root/home/alice/sample1.jpg" ] || fail "$root: run chroot_install.sh first (user alice, photos)"
command -v systemd-nspawn >/dev/null || fail "systemd-nspawn missing (apt install systemd-container)"
cp "$deb" "$root/root/fusiond.deb"
systemd-nspawn -q --register=no --keep-unit -D "$root" -b --console=passive >/dev/null 2>&1 &
nspawn=$!
leader=
cleanup() {
  [ -n "$leader" ] && nsenter -t "$leader" -a systemctl poweroff >/dev/null 2>&1
  sleep 3; kill "$nspawn" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do
  leader=$(pgrep -P "$nspawn" -x systemd | head -1 || true)
  [ -n "$leader" ] && break; sleep 0.2
done
[ -n "$leader" ] || fail "no systemd in the container"
X() { nsenter -t "$leader" -a /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
for _ in $(seq 100); do
  state=$(X systemctl is-system-running 2>/dev/null || true)
  [ "$state" = running ] || [ "$state" = degraded ] && break; sleep 0.2
done
echo "systemd in the container: $state"
journal() { X journalctl -b -u fusiond --no-pager -o cat; }
mark() { journal | wc -l; }  # lines so far: wait_journal looks only after them
# journald takes the service's stderr asynchronously: wait up to 10 s for a line after MARK.
wait_journal() {  # wait_journal PATTERN MARK
  local _
  for _ in $(seq 50); do journal | tail -n +"$(( $2 + 1 ))" | grep -q -- "$1" && return 0; sleep 0.2; done
  journal | tail -8 >&2
  return 1
}

# From a root without fusiond (an earlier run that failed half-way may have left it enabled).
X systemctl disable --now fusiond.socket fusiond.service >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive X apt-get purge -y -qq fusiond >/dev/null 2>&1 || true
DEBIAN_FRONTEND=noninteractive X apt-get install -y -qq --no-install-recommends /root/fusiond.deb >/dev/null 2>&1 ||
  fail "apt install"
[ "$(X systemctl is-enabled fusiond.socket || true)" = disabled ] || fail "installing enabled the socket"
[ "$(X systemctl is-active fusiond.service || true)" = inactive ] || fail "installing started the service"
# The shipped weights copied in (the registry works too; this keeps the run offline and fast).
rm -rf "$root/tmp/weights" && cp -r "$src/third_party/weights" "$root/tmp/weights"
X fusiond-fetch-models --from /tmp/weights -q || fail "fusiond-fetch-models"
m=$(mark)
X systemctl enable --now fusiond.socket >/dev/null 2>&1
[ "$(X systemctl is-active fusiond.service || true)" = inactive ] || fail "the service started before a connection"
X runuser -u alice -- fusionctl --timeout-ms 60000 health >/dev/null || fail "health as alice"
[ "$(X systemctl is-active fusiond.service)" = active ] || fail "the first connection did not start the service"
wait_journal "socket activation: serving on the inherited /run/fusiond/fusiond.sock" "$m" || fail "not socket-activated"
X systemctl show fusiond.service -p StatusText | grep -q 'StatusText=.*jobs queued' || fail "no STATUS= line"
if X runuser -u bob -- fusionctl health >/dev/null 2>&1; then fail "bob (not in fusion) got in"; fi
echo "socket activation on alice's first connection; bob refused; $(X systemctl show fusiond.service -p StatusText)"
X runuser -u alice -- fusionctl --timeout-ms 300000 swap --source /home/alice/sample1.jpg \
  --target /home/alice/sample2.jpg -o /home/alice/nspawn.png >/dev/null 2>&1 || fail "swap under the sandbox"
echo "swap under the sandbox: $(stat -c %s "$root/home/alice/nspawn.png")-byte PNG"
X systemd-analyze security fusiond.service 2>&1 | tail -1

conf=$root/etc/fusiond/fusiond.toml
cp "$conf" "$conf.orig"
printf 'log_level = "debug"\nmax_connections = 100\n' >>"$conf"
m=$(mark)
X systemctl reload fusiond.service || fail "systemctl reload"
# systemd 252 returns once ExecReload's kill ran (it waits for READY=1 only with notify-reload, 253+).
wait_journal "applied: log_level; not applied, need a restart: max_connections" "$m" || fail "reload not logged"
echo "reload: applied log_level, named max_connections"

mkdir -p "$root/etc/systemd/system/fusiond.service.d"
printf '[Service]\nEnvironment=FUSIOND_FAULTS=detect=hang\n' >"$root/etc/systemd/system/fusiond.service.d/hang.conf"
cp "$conf.orig" "$conf"; echo 'watchdog_stall_ms = 1000' >>"$conf"
X systemctl daemon-reload; X systemctl restart fusiond.service
m=$(mark)
X runuser -u alice -- fusionctl --timeout-ms 120000 swap --no-wait --source /home/alice/sample1.jpg \
  --target /home/alice/sample2.jpg >/dev/null || fail "submit the hanging job"
for _ in $(seq 90); do
  [ "$(X systemctl show fusiond.service -p NRestarts --value)" -ge 1 ] && break; sleep 1
done
wait_journal "Watchdog timeout" "$m" || fail "no watchdog timeout in 90 s"
wait_journal "unfinished jobs requeued" "$m" || fail "the restarted fusiond did not requeue the job"
echo "watchdog: timeout, SIGABRT, restart (NRestarts=$(X systemctl show fusiond.service -p NRestarts --value)), job requeued"
rm "$root/etc/systemd/system/fusiond.service.d/hang.conf"; mv "$conf.orig" "$conf"
X systemctl daemon-reload
# The restarted fusiond still has the hang and runs the requeued job into it: a job stuck without
# checkpoints cannot be drained (a stop would end in SIGKILL after TimeoutStopSec), so it is
# killed here and systemd (Restart=on-failure) starts it again without the fault.
restarts=$(X systemctl show fusiond.service -p NRestarts --value)
X systemctl kill --signal=KILL fusiond.service
for _ in $(seq 100); do
  [ "$(X systemctl show fusiond.service -p NRestarts --value)" -gt "$restarts" ] &&
    [ "$(X systemctl is-active fusiond.service)" = active ] && break
  sleep 0.2
done
[ "$(X systemctl is-active fusiond.service)" = active ] || fail "fusiond did not come back after SIGKILL"
sleep 1
m=$(mark)
X systemctl stop fusiond.service fusiond.socket
wait_journal "^stopped$" "$m" || fail "no clean stop"
DEBIAN_FRONTEND=noninteractive X apt-get purge -y -qq fusiond >/dev/null 2>&1 || fail "apt purge"
[ ! -e "$root/var/lib/fusiond" ] || fail "purge kept /var/lib/fusiond"
[ ! -L "$root/etc/systemd/system/sockets.target.wants/fusiond.socket" ] || fail "purge kept the socket's enable link"
echo "clean stop; apt purge removed /var/lib/fusiond and the enable link"
echo PASS
