#!/usr/bin/env bash
# Installs the build to a temporary prefix, builds sdk/examples against it with
# find_package(fusion_sdk), and runs the example and the installed fusionctl against the
# installed fusiond (the installed binaries must find their shared libraries: RUNPATH).
# Usage: sdk_install_test.sh BUILD_DIR EXAMPLES_DIR
set -euo pipefail
build=$1 examples=$2
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
# DESTDIR too: a build configured for the package (scripts/package.sh: CMAKE_INSTALL_SYSCONFDIR=/etc)
# installs the example configuration to an absolute path, which must land in $tmp, not /etc.
DESTDIR="$tmp/root" cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mv "$tmp/root$tmp/prefix" "$tmp/prefix"
# lib/ or lib/<multiarch>/ (GNUInstallDirs picks the latter for a build configured with prefix /usr).
find "$tmp/prefix" -path '*/cmake/fusion_sdk/fusion_sdkConfig.cmake' | grep -q .
test -f "$tmp/prefix/include/fusion/client.h"
# The public headers must not expose gRPC or protobuf.
if grep -rlE '#include.*(grpc|google/protobuf|\.pb\.h)' "$tmp/prefix/include/fusion"; then
  echo "FAIL: public SDK headers mention gRPC/protobuf" >&2; exit 1
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$examples" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  "${launcher[@]}" >/dev/null
cmake --build "$tmp/example" >/dev/null
fusiond=$tmp/prefix/sbin/fusiond fusionctl=$tmp/prefix/bin/fusionctl
"$fusiond" --socket "$tmp/f.sock" --device cpu --device-memory-limit 256MiB 2>"$tmp/daemon.log" &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/f.sock" ] && break; sleep 0.05; done
out=$("$tmp/example/memory_report" "$tmp/f.sock")
echo "$out"
[ "$out" = "health SERVING device cpu budget_bytes 268435456" ] || { echo "FAIL: unexpected output" >&2; exit 1; }
"$fusionctl" --socket "$tmp/f.sock" health
kill -TERM $pid; wait $pid
echo "PASS"
