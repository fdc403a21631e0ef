#!/usr/bin/env bash
# scripts/build-cuda.sh: builds fusiond, fusionctl, the SDK and the tests into build-cuda/
# against PyPI's CUDA torch wheel (LibTorch 2.x with CUDA), with FUSION_WITH_CUDA on and this
# machine's CUDA toolkit (nvcc). No arguments; unattended; idempotent.
#
# The wheel: torch==$TORCH_PIN, whose torch.version.cuda is 13.0, the major version of the CUDA
# 13 toolkit it is built with here. It goes into a virtual environment this script owns and
# reuses, outside the checkout so that every clone on the machine shares it:
#   $FUSION_TORCH_VENV, default ${XDG_CACHE_HOME:-~/.cache}/fusiond/venv-torch-$TORCH_PIN
# First run: pip downloads torch and its nvidia-* CUDA runtime wheels (about 3 GB; 4.7 GB
# installed; ~80 s here) — later runs find it and download nothing.
#
# Environment (all optional):
#   BUILD_DIR_CUDA      build directory (default build-cuda)
#   FUSION_TORCH_PYTHON a python3 that already has a CUDA torch (e.g. a GPU machine's own, with
#                       no network): used as it is, no venv made, no pip run
#   FUSION_DEPS_PREFIX  a prefix holding the Debian -dev packages' files (scripts/gpu-check's
#                       unpacked bundle) for machines without them; setup.sh is then skipped
#   FUSION_BUILD_TARGETS targets to build (default: all)
#   JOBS                parallel compile jobs (default nproc)
# Exit status: 0 built; 1 a step failed, the message names it.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_PIN=2.12.1
BUILD_DIR=${BUILD_DIR_CUDA:-build-cuda}
die() { echo "build-cuda: $*" >&2; exit 1; }

[ -n "${FUSION_DEPS_PREFIX:-}" ] || bash scripts/setup-test.sh

NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || die "no CUDA toolkit: nvcc is not on PATH nor in /usr/local/cuda/bin (install CUDA 13)"
nvcc_major=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')

if [ -n "${FUSION_TORCH_PYTHON:-}" ]; then
  PY=$FUSION_TORCH_PYTHON
else
  VENV=${FUSION_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fusiond/venv-torch-$TORCH_PIN}
  PY=$VENV/bin/python3
  if ! "$PY" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$TORCH_PIN')" 2>/dev/null; then
    echo "build-cuda: installing torch==$TORCH_PIN (CUDA 13.0) into $VENV (~3 GB download)" >&2
    start=$SECONDS
    /usr/bin/python3 -m venv --clear "$VENV" || die "cannot make the venv $VENV (apt install python3-venv)"
    "$PY" -m pip install --no-input -q --disable-pip-version-check "torch==$TORCH_PIN" ||
      die "pip install torch==$TORCH_PIN failed"
    echo "build-cuda: torch installed in $((SECONDS - start)) s" >&2
  fi
fi
info=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path); print(torch.version.cuda or ""); print(torch.__version__)' 2>/dev/null) ||
  die "$PY cannot import torch"
TORCH_PREFIX=$(sed -n 1p <<<"$info") TORCH_CUDA=$(sed -n 2p <<<"$info") TORCH_VERSION=$(sed -n 3p <<<"$info")
[ -n "$TORCH_CUDA" ] || die "torch $TORCH_VERSION at $TORCH_PREFIX is a CPU-only build (torch.version.cuda is None)"
[ "${TORCH_CUDA%%.*}" = "$nvcc_major" ] ||
  die "torch $TORCH_VERSION is built for CUDA $TORCH_CUDA, the toolkit's nvcc is CUDA $nvcc_major"

echo "build-cuda: LibTorch $TORCH_VERSION (CUDA $TORCH_CUDA) from $TORCH_PREFIX" >&2

export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# A build directory configured against another LibTorch (another venv) is configured again: its
# binaries would keep that LibTorch in their RPATH.
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && ! grep -qx "Torch_DIR:PATH=$TORCH_PREFIX/Torch" "$BUILD_DIR/CMakeCache.txt"; then
  echo "build-cuda: $BUILD_DIR was configured against another LibTorch; configuring it again" >&2
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles" "$BUILD_DIR/build.ninja" "$BUILD_DIR/torch-include"
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSION_REQUIRE_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC"
        "-DCMAKE_PREFIX_PATH=$TORCH_PREFIX${FUSION_DEPS_PREFIX:+;$FUSION_DEPS_PREFIX/usr}")
  if command -v ccache >/dev/null; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  if [ -n "${FUSION_DEPS_PREFIX:-}" ]; then
    lib=$FUSION_DEPS_PREFIX/usr/lib/x86_64-linux-gnu
    args+=(-DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu -DPKG_CONFIG_EXECUTABLE="$FUSION_DEPS_PREFIX/usr/bin/pkgconf"
           -DFUSION_WITH_PEER_BENCH=OFF "-DOpenCV_DIR=$lib/cmake/opencv4")
  fi
  mkdir -p "$BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -G Ninja "${args[@]}" >"$BUILD_DIR/configure.log" 2>&1 ||
    { tail -30 "$BUILD_DIR/configure.log" >&2; rm -f "$BUILD_DIR/build.ninja"; die "cmake configure failed (log: $BUILD_DIR/configure.log)"; }
fi
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${FUSION_BUILD_TARGETS:+--target $FUSION_BUILD_TARGETS}
echo "build-cuda: built in $BUILD_DIR against LibTorch $TORCH_VERSION (CUDA $TORCH_CUDA)" >&2
