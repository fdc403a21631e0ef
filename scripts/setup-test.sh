#!/usr/bin/env bash
# Installs what the tests, benchmarks, fuzzers, the .deb and the Python SDK need on top of
# scripts/setup.sh (which it runs first): scripts/build.sh, scripts/test.sh, scripts/fuzz.sh,
# scripts/package.sh and scripts/build-cuda.sh call it. Idempotent: when all packages are
# present it prints nothing and asks no registry.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

PACKAGES=(
  libgtest-dev libgmock-dev googletest libbenchmark-dev  # the tests; bench/acquire_benchmark
  opencv-data
  python3-numpy python3-opencv  # scripts/fetch-models.sh's test data (the mosaic); tests/python
  systemd  # systemd-socket-activate (the socket-activation test)
  prometheus  # promtool (the metrics test checks the exposition with it)
  help2man lintian curl  # the .deb (scripts/package.sh): man pages from --help, its lintian check; fusiond-fetch-models
  ffmpeg  # the ffmpeg CLI makes the video tests' clips
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
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup-test: installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
$SUDO apt-get update -qq
# --force-unsafe-io: as scripts/setup.sh.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}" >/dev/null
