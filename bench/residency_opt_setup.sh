#!/usr/bin/env bash
# Installs bench/residency_opt.py's solver (residency_opt_requirements.txt: highspy and numpy,
# pinned with their sha256) into a virtual environment of its own,
# ${XDG_CACHE_HOME:-~/.cache}/fusiond/venv-residency-opt, made with /usr/bin/python3 (needs
# python3-venv; installed here when missing). Prints the venv's python on stdout:
#   PY=$(bash bench/residency_opt_setup.sh) && "$PY" bench/residency_opt.py --tool build/bench/residency_trace
# Idempotent: the venv is made again only when the requirements changed (their sha256 is stamped
# in the venv) or the venv is broken.
set -euo pipefail
cd "$(dirname "$0")"
REQ="$PWD/residency_opt_requirements.txt"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/fusiond/venv-residency-opt"
stamp="$VENV/.fusiond-requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] &&
   "$VENV/bin/python" -c 'import highspy' 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi
if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "bench/residency_opt_setup.sh: installing python3-venv" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
arch=$(uname -m)
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$arch" != x86_64 ] || [ "$pyver" != 3.11 ]; then
  echo "bench/residency_opt_setup.sh: residency_opt_requirements.txt pins the x86_64 wheels for" \
       "CPython 3.11; this is $arch with /usr/bin/python3 $pyver (re-pin it)" >&2
  exit 1
fi
echo "bench/residency_opt_setup.sh: highspy (PyPI) into $VENV" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
/usr/bin/python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: -r "$REQ" >&2
echo "$want" > "$stamp"
echo "$VENV/bin/python"
