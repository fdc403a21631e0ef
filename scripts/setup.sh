#!/usr/bin/env bash
# Installs the Debian packages that building and running fusiond and fusionctl need (what
# scripts/run-demo.sh needs on a fresh Debian 12). The tests, benchmarks, fuzzers, packaging and
# the Python SDK need more: scripts/setup-test.sh (which runs this first). Idempotent: when all
# packages are present it prints nothing and asks no registry.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libtorch-dev libdnnl-dev libopencv-dev libabsl-dev
  libspdlog-dev libsystemd-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libsqlite3-dev libssl-dev
  libpng-dev libjpeg-dev libwebp-dev libtiff-dev zlib1g-dev libjemalloc-dev
  libcpp-httplib-dev  # the Prometheus /metrics endpoint
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev  # fusion_video (video jobs)
  libavdevice-dev  # fusionctl live --input/--output /dev/videoN (V4L2 through libavdevice)
  python3  # packaging/fusiond-fetch-models (scripts/fetch-models.sh) reads the catalogue with it
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
$SUDO apt-get update -qq
# --force-unsafe-io: dpkg skips its fsync per file (~470 packages on a fresh machine; what
# Debian's own container images configure). What is installed is the same.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}" >/dev/null
