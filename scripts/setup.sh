#!/usr/bin/env bash
# Installs every Debian package fusiond needs to build, test and run. Idempotent: when all
# packages are present it prints nothing and asks no registry.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libtorch-dev libdnnl-dev libopencv-dev opencv-data libabsl-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libspdlog-dev libsystemd-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libsqlite3-dev npm python3-numpy python3-opencv libssl-dev
  libpng-dev libjpeg-dev libwebp-dev libtiff-dev zlib1g-dev libjemalloc-dev
  libcpp-httplib-dev  # the Prometheus /metrics endpoint
  systemd  # systemd-socket-activate (the socket-activation test)
  prometheus  # promtool (the metrics test checks the exposition with it)
  help2man lintian curl  # the .deb (scripts/package.sh): man pages from --help, its lintian check; fusiond-fetch-models
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg  # video targets; ffmpeg makes the test clips
  python3-torch  # scripts/make_synthetic_models.py (the synthetic-model loadgen's CPU test)
  gnuplot-nox  # bench/plot_timeline.py renders loadgen's memory timeline (SVG/PNG)
  xz-utils dpkg-dev  # scripts/gpu-check --pack: dpkg-deb -x, xz of the bundle
  clang libclang-rt-14-dev  # the fuzz build (scripts/fuzz.sh): clang with libFuzzer and sanitizers
  # The Python SDK (sdk/python): its build (venv, setuptools, wheel; protoc + grpc_python_plugin
  # generate the stubs), its dependencies and its tests (pytest; numpy and OpenCV above).
  python3-venv python3-pip python3-setuptools python3-wheel python3-grpcio python3-protobuf python3-pytest
  chromium chromium-driver python3-selenium  # the web example's test in a headless browser
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# npm may come from elsewhere (e.g. a nodejs install); only require the command.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
  read -r -a missing <<<"${missing[*]}"
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
