#!/usr/bin/env bash
# Installs what the peer benchmark needs beyond the project's own build (scripts/setup.sh):
# Debian's python3-torch and python3-onnx (the PyTorch mirrors and their ONNX export, run with
# /usr/bin/python3), python3-venv, and ONNX Runtime from PyPI (requirements.txt: onnxruntime and
# its dependencies pinned with their sha256, CPU build) into a virtual environment of its own,
# $PEERS_VENV (venv.sh: ${XDG_CACHE_HOME:-~/.cache}/fusiond/venv-peers-ort-VERSION), made with
# Debian's /usr/bin/python3 without the system's site-packages (numpy from requirements.txt).
# Idempotent: installs only what is missing; the venv is made again only when requirements.txt
# changed (its sha256 is stamped in the venv) or the venv is broken.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=bench/peers/venv.sh
. ./venv.sh
need=()
for p in python3-torch python3-onnx python3-numpy python3-venv; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "bench/peers/setup.sh: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

stamp="$PEERS_VENV/.fusiond-requirements.sha256"
want=$(sha256sum "$PEERS_REQUIREMENTS" | cut -d' ' -f1)
if [ -x "$PEERS_PYTHON" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
# requirements.txt pins one wheel per package: CPython 3.11's, manylinux x86_64 where not pure.
arch=$(uname -m)
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$arch" != x86_64 ] || [ "$pyver" != 3.11 ]; then
  echo "bench/peers/setup.sh: requirements.txt pins the x86_64 wheels for CPython 3.11;" \
       "this is $arch with /usr/bin/python3 $pyver (re-pin requirements.txt for it)" >&2
  exit 1
fi
echo "bench/peers/setup.sh: onnxruntime $PEERS_ORT_VERSION (PyPI) into $PEERS_VENV" >&2
rm -rf "$PEERS_VENV"
mkdir -p "$(dirname "$PEERS_VENV")"
/usr/bin/python3 -m venv "$PEERS_VENV"
"$PEERS_PYTHON" -m pip install -q --disable-pip-version-check --no-input --require-hashes --no-deps \
  --only-binary=:all: -r "$PEERS_REQUIREMENTS"
got=$("$PEERS_PYTHON" -c 'import onnxruntime; print(onnxruntime.__version__)')
if [ "$got" != "$PEERS_ORT_VERSION" ]; then
  echo "bench/peers/setup.sh: $PEERS_VENV has onnxruntime $got, requirements.txt pins $PEERS_ORT_VERSION" >&2
  exit 1
fi
echo "$want" >"$stamp"
