#!/usr/bin/env bash
# The .deb as far as this machine allows without installing it system-wide (no systemd as PID 1,
# a shared machine): lintian reports no errors (warnings are printed); the package unpacks
# (dpkg -x) into a scratch root with the layout docs/OPERATIONS.md documents; its maintainer scripts
# create the user and group and start nothing; systemd-sysusers and systemd-tmpfiles accept its
# files (--root); the man pages render and the bash completion knows every subcommand; the
# installed fusiond-fetch-models fills a models directory from the shipped weights; and the
# installed fusiond, started as the unit does (socket activation by systemd-socket-activate,
# its ExecStart flags, its own uid and group "fusion"), serves a swap to a client of another
# uid that is only a member of group "fusion".
#   package_test.sh DEB SOURCE_DIR [TESTDATA_DIR]
# The weights come from the source tree's third_party/weights (fusiond-fetch-models --from: no
# registry is asked).
set -euo pipefail
deb=$(readlink -f "$1") src=$(readlink -f "$2")
testdata=${3:-$src/build/fetched/testdata}
weights=$src/third_party/weights
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run it as root (it runs fusiond and the client under their own uids with setpriv)"
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
root=$tmp/root

# --- lintian: no errors.
if command -v lintian >/dev/null; then
  lint=$(lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v 'running with root privileges' || true)
  echo "lintian: $(grep -c '^E:' <<<"$lint" || true) errors, $(grep -c '^W:' <<<"$lint" || true) warnings"
  [ -z "$lint" ] || sed 's/^/  /' <<<"$lint"
  if grep -q '^E:' <<<"$lint"; then fail "lintian reports errors"; fi
else
  fail "lintian is not installed (scripts/setup-test.sh)"
fi

# --- control: dependencies from dpkg-shlibdeps, maintainer scripts that start nothing.
dpkg-deb -e "$deb" "$tmp/control"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libtorch1.13 libgrpc++1.51 libsystemd0 systemd; do
  tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/ .*//' | grep -qxF "$d" || fail "Depends lacks $d: $depends"
done
grep -q 'systemd-sysusers fusiond.conf' "$tmp/control/postinst" || fail "postinst does not create the user"
if grep -v '^ *#' "$tmp/control/postinst" | grep -nE 'enable|(systemctl|deb-systemd-invoke) +(start|restart)'; then
  fail "postinst enables or starts a unit"
fi
grep -q 'rm -rf /var/lib/fusiond' "$tmp/control/postrm" || fail "postrm purge keeps /var/lib/fusiond"
[ "$(cat "$tmp/control/conffiles")" = /etc/fusiond/fusiond.toml ] || fail "conffiles"
grep -q 'activate-noawait ldconfig' "$tmp/control/triggers" || fail "no ldconfig trigger"

# --- layout.
dpkg -x "$deb" "$root"
for f in usr/sbin/fusiond usr/bin/fusionctl usr/sbin/fusiond-fetch-models \
    usr/share/fusiond/manifest.json etc/fusiond/fusiond.toml \
    usr/lib/systemd/system/fusiond.service usr/lib/systemd/system/fusiond.socket \
    usr/lib/sysusers.d/fusiond.conf usr/lib/tmpfiles.d/fusiond.conf \
    usr/share/man/man8/fusiond.8.gz usr/share/man/man1/fusionctl.1.gz \
    usr/share/man/man8/fusiond-fetch-models.8.gz usr/share/bash-completion/completions/fusionctl \
    usr/share/doc/fusiond/copyright usr/share/doc/fusiond/README.md usr/share/doc/fusiond/docs/OPERATIONS.md \
    usr/share/doc/fusiond/examples/metrics.conf usr/include/fusion/client.h; do
  [ -e "$root/$f" ] || fail "missing /$f"
done
grep -q '^ExecStart=/usr/sbin/fusiond --config /etc/fusiond/fusiond.toml ' \
  "$root/usr/lib/systemd/system/fusiond.service" || fail "the unit's ExecStart is not the package's"
cmp -s "$root/etc/fusiond/fusiond.toml" "$src/packaging/fusiond.toml" || fail "fusiond.toml differs"
# RUNPATH: relative to the binary only ($ORIGIN), as lintian wants.
for elf in usr/sbin/fusiond usr/bin/fusionctl; do
  rp=$(readelf -d "$root/$elf" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  [ -z "$rp" ] || [[ $rp == '$ORIGIN'* ]] || fail "/$elf RUNPATH $rp"
done
echo "layout: ok ($(dpkg-deb -c "$deb" | wc -l) entries, $(stat -c %s "$deb") bytes)"

# --- sysusers.d and tmpfiles.d as the postinst runs them (here inside the scratch root).
mkdir -p "$root/etc"
: >"$root/etc/passwd"; : >"$root/etc/group"
systemd-sysusers --root="$root" >/dev/null 2>&1
grep -q '^fusion:' "$root/etc/group" || fail "sysusers created no group fusion"
grep -q '^fusiond:.*:/var/lib/fusiond:' "$root/etc/passwd" || fail "sysusers created no user fusiond"
systemd-tmpfiles --root="$root" --create >/dev/null 2>&1 || true
for d in run/fusiond var/lib/fusiond var/lib/fusiond/models; do
  [ -d "$root/$d" ] || fail "tmpfiles did not create /$d"
done
echo "sysusers/tmpfiles: user fusiond, group fusion, /run/fusiond, /var/lib/fusiond/models"

# --- man pages and completion.
for page in man8/fusiond.8.gz:--metrics-listen man1/fusionctl.1.gz:swap man8/fusiond-fetch-models.8.gz:--models-dir; do
  MANWIDTH=100 man -l "$root/usr/share/man/${page%%:*}" 2>/dev/null | grep -q -- "${page#*:}" ||
    fail "man page ${page%%:*} does not render or lacks ${page#*:}"
done
fusionctl=$root/usr/bin/fusionctl
subcommands=$("$fusionctl" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
[ -n "$subcommands" ] || fail "no subcommands in fusionctl --help"
listed=$(sed -n 's/.*local subcommands="\(.*\)"/\1/p' "$root/usr/share/bash-completion/completions/fusionctl")
for s in $subcommands; do
  grep -qw -- "$s" <<<"$listed" || fail "bash completion lacks subcommand $s"
done
if [ -f /usr/share/bash-completion/bash_completion ]; then
  got=$(PATH="$root/usr/bin:$PATH" bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$1"
    COMP_WORDS=(fusionctl swap --sou); COMP_CWORD=2; COMP_LINE="fusionctl swap --sou"; COMP_POINT=${#COMP_LINE}
    _fusionctl; echo "${COMPREPLY[*]}"' _ "$root/usr/share/bash-completion/completions/fusionctl")
  [ "$got" = --source ] || fail "completing 'fusionctl swap --sou' gave '$got'"
fi
echo "man pages render; bash completion lists $(wc -w <<<"$subcommands") subcommands"

# --- the installed fusiond-fetch-models: a models directory from the shipped files (idempotent).
models=$tmp/models
"$root/usr/sbin/fusiond-fetch-models" --models-dir "$models" --from "$weights" -q
"$root/usr/sbin/fusiond-fetch-models" --models-dir "$models" --check -q || fail "fetched models do not verify"
again=$("$root/usr/sbin/fusiond-fetch-models" --models-dir "$models" --from "$weights" 2>&1)
grep -q 'nothing to fetch' <<<"$again" || fail "second fetch: $again"
echo "fusiond-fetch-models: $(find "$models" -type f | wc -l) files, verified, second run fetched nothing"

# --- the installed fusiond, socket-activated as the unit does, as uid "fusiond" in group "fusion";
# the client is another uid whose only group beyond its own is "fusion".
command -v systemd-socket-activate >/dev/null || fail "systemd-socket-activate missing (scripts/setup-test.sh)"
daemon_uid=64011 fusion_gid=64012 client_uid=64013 client_gid=64014
run=$tmp/run state=$tmp/state out=$tmp/out
mkdir -p "$run" "$state" "$out"
chown "$daemon_uid:$fusion_gid" "$run" "$state"; chmod 0750 "$run"; chmod 0755 "$state"
# Leftovers of an earlier `sudo fusiond` on the state directory must not stop the service
# ("cannot open /var/lib/fusiond/lock: Permission denied"): the package's tmpfiles.d lines,
# pointed at $state and the test's uids, are what the postinst and boot run.
echo 4242 >"$state/lock"; : >"$state/journal.sqlite3"; mkdir -p "$state/results" "$state/models"
echo x >"$state/results/j-0000000000000000.mp4"; chmod 0644 "$state/lock" "$state/journal.sqlite3"
sed -e "s|/var/lib/fusiond|$state|g" -e "s/ fusiond fusion / $daemon_uid $fusion_gid /" -e '/\/run\//d' \
  "$root/usr/lib/tmpfiles.d/fusiond.conf" >"$tmp/tmpfiles.conf"
systemd-tmpfiles --create "$tmp/tmpfiles.conf" || fail "tmpfiles on the state directory"
for f in "$state" "$state/lock" "$state/journal.sqlite3" "$state/results/j-0000000000000000.mp4"; do
  [ "$(stat -c %u "$f")" = "$daemon_uid" ] || fail "tmpfiles left $f owned by $(stat -c %U "$f")"
done
[ "$(stat -c %a "$state")" = 700 ] || fail "state directory $(stat -c %a "$state") after tmpfiles"
[ "$(stat -c %U "$state/models")" = root ] || fail "tmpfiles changed the models folder's owner"
chown "$client_uid:$client_gid" "$out"
cp "$testdata/faces/sample1.jpg" "$testdata/faces/sample2.jpg" "$tmp/"; chmod 0644 "$tmp"/sample*.jpg
exec_start=$(sed -n 's/^ExecStart=//p' "$root/usr/lib/systemd/system/fusiond.service")
read -r -a args <<<"$exec_start"
# The unit's flags, with the scratch root's paths; fusiond.socket's ListenStream= pair.
args=("${args[@]/#\/etc\//$root/etc/}")
args=("${args[@]/#\/var\/lib\/fusiond/$state}")
args[0]=$root/usr/sbin/fusiond
setpriv --reuid=$daemon_uid --regid=$fusion_gid --clear-groups bash -c 'umask 0007; exec "$@"' _ \
  systemd-socket-activate -l "$run/fusiond.sock" -l "$run/fusiond.sock.fd" \
  -E FUSIOND_SOCKET=/nonexistent/ignored.sock \
  "${args[@]}" --models-dir "$models" --device-memory-limit 2GiB 2>"$tmp/daemon.log" &
pid=$!
as_client=(setpriv --reuid=$client_uid --regid=$client_gid --groups=$fusion_gid)
for _ in $(seq 100); do [ -S "$run/fusiond.sock.fd" ] && break; sleep 0.05; done
# fusiond.socket's SocketMode=0660 (systemd-socket-activate binds them 0644 whatever the umask).
chmod 0660 "$run/fusiond.sock" "$run/fusiond.sock.fd"
"${as_client[@]}" "$fusionctl" --socket "$run/fusiond.sock" --timeout-ms 60000 health ||
  { cat "$tmp/daemon.log" >&2; fail "health as a member of group fusion"; }
# Not a member of fusion: the socket's directory refuses it.
if setpriv --reuid=$client_uid --regid=$client_gid --clear-groups "$fusionctl" --socket "$run/fusiond.sock" health \
    >/dev/null 2>&1; then
  fail "a client outside group fusion reached the socket"
fi
"${as_client[@]}" "$fusionctl" --socket "$run/fusiond.sock" --timeout-ms 300000 swap \
  --source "$tmp/sample1.jpg" --target "$tmp/sample2.jpg" -o "$out/swap.png" >"$tmp/swap.log" 2>&1 ||
  { cat "$tmp/swap.log" "$tmp/daemon.log" >&2; fail "swap as a member of group fusion"; }
[ "$(head -c 8 "$out/swap.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "swap.png is not a PNG"
grep -q 'socket activation' "$tmp/daemon.log" || { cat "$tmp/daemon.log" >&2; fail "fusiond did not take the inherited sockets"; }
kill -TERM $pid; wait $pid || fail "fusiond exited $? at SIGTERM"
pid=
# Nothing of the state (journal, results) is open to group "fusion" or others.
leaky=$(find "$state" -path "$state/models" -prune -o -perm /077 -print)
[ -z "$leaky" ] || fail "state readable beyond fusiond: $leaky"
[ -S "$run/fusiond.sock" ] || fail "fusiond unlinked the inherited socket"
echo "installed fusiond: socket-activated, swap by uid $client_uid in group fusion -> $(stat -c %s "$out/swap.png")-byte PNG"
echo PASS
