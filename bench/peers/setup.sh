#!/usr/bin/env bash
# Installs what the peer benchmark needs beyond the project's own build (scripts/setup.sh):
# Debian's python3-torch and python3-onnx (the PyTorch mirrors and their ONNX export, run with
# /usr/bin/python3) and onnxruntime-node 1.30.0 from npm into bench/peers/node_modules
# (git-ignored), CPU build only. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")"
need=()
for p in python3-torch python3-onnx python3-numpy; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "bench/peers/setup.sh: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# ONNXRUNTIME_NODE_INSTALL=skip: keep the bundled CPU libonnxruntime, skip the CUDA download.
# package.json / package-lock.json pin the version and its integrity.
if [ ! -f node_modules/onnxruntime-node/package.json ] ||
   [ "$(node -p 'require("./node_modules/onnxruntime-node/package.json").version')" != 1.30.0 ]; then
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
fi
