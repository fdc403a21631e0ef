#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz, docs/FUZZING.md): builds them into ${FUZZ_BUILD_DIR:-build-fuzz}
# (clang, no LibTorch, ASan + UBSan), generates the seed corpus and runs every target for
# ${FUZZ_SECONDS:-18} s on its corpus. Any crash, leak, UB report, timeout or out-of-memory
# fails the run (libFuzzer exits non-zero and leaves crash-*/leak-*/timeout-*/oom-* files in the
# build's fuzz-artifacts/).
#   scripts/fuzz.sh                 build + smoke-run all targets (what scripts/test.sh runs)
#   scripts/fuzz.sh image_fuzzer    only these targets
#   FUZZ_SECONDS=600 scripts/fuzz.sh config_fuzzer   a longer run
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh                build and make the seeds, run nothing
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-test.sh
DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-18}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
ALL="image_fuzzer rpc_request_fuzzer tfjs_manifest_fuzzer keras_topology_fuzzer config_fuzzer fd_protocol_fuzzer"
TARGETS=${*:-$ALL}

if [ ! -f "$DIR/build.ninja" ]; then
  # Only our code is instrumented (Debian's Abseil, protobuf, gRPC, OpenCV are GCC-built):
  # libFuzzer's coverage comes from the fusiond code under test.
  cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DFUSION_WITH_TORCH=OFF -DFUSION_BUILD_TESTS=OFF -DFUSION_BUILD_FUZZERS=ON \
    "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
fi
cmake --build "$DIR" -j "${JOBS:-$(nproc)}" --target $TARGETS fuzz_seeds

# Seeds are generated (never committed): $DIR/fuzz-seeds/<target>. What a run finds is kept in
# $DIR/fuzz-corpus/<target> (libFuzzer writes new inputs to its first corpus directory).
rm -rf "$DIR/fuzz-seeds"
"$DIR/tests/fuzz/fuzz_seeds" "$DIR/fuzz-seeds"
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

mkdir -p "$DIR/fuzz-artifacts"
for t in $TARGETS; do
  mkdir -p "$DIR/fuzz-corpus/$t"
  echo "fuzz: $t for ${SECONDS_EACH} s"
  # -rss_limit_mb (and the malloc limit, which follows it): an input that makes the code allocate past 2 GiB is an
  # unbounded allocation (a bug), reported as oom-*. -timeout: one input past 10 s hangs.
  DICT=""
  case $t in tfjs_manifest_fuzzer|keras_topology_fuzzer) DICT="-dict=tests/fuzz/json.dict" ;; esac
  ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
    "$DIR/tests/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=0 $DICT \
      -artifact_prefix="$DIR/fuzz-artifacts/$t-" \
      "$DIR/fuzz-corpus/$t" "$DIR/fuzz-seeds/$t" 2>"$DIR/fuzz-artifacts/$t.log" || {
    tail -n 60 "$DIR/fuzz-artifacts/$t.log" >&2
    echo "fuzz: $t FAILED (log: $DIR/fuzz-artifacts/$t.log)" >&2
    exit 1
  }
  grep -E "^Done|^#[0-9]+ +DONE" "$DIR/fuzz-artifacts/$t.log" | tail -n 1 || true
done
echo "fuzz targets: no crash, leak, UB or timeout in ${SECONDS_EACH} s each"
