#!/usr/bin/env bash
# Builds the Debian package: ${BUILD_DIR:-build}/package/fusiond_<version>_<arch>.deb.
# The build is (re)configured for the package's paths (prefix /usr, /etc), built, and packed by
# CPack (dpkg-shlibdeps computes the library dependencies). Usage: scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
rm -f "$BUILD_DIR"/package/fusiond_*.deb
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
ls "$BUILD_DIR"/package/fusiond_*.deb
