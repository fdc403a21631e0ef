#!/usr/bin/env bash
# The project's weights and tier-B test photos, from the files the repository ships.
#
#   scripts/fetch-models.sh [--models-only] [MODELS_DIR]
#
# --models-only: the weights alone, no test data (scripts/run-demo.sh: the mosaic needs
# python3-opencv, a test package of scripts/setup-test.sh).
# MODELS_DIR defaults to $FUSION_MODELS_DIR, else build/fetched/models. Test data (the MIT group
# photos of @vladmandic/face-api 1.7.15 and the 3840x2896 mosaic made from them) goes to
# $FUSION_TESTDATA_DIR, else build/fetched/testdata.
#
# What it does, with no network: packaging/fusiond-fetch-models (installed with the package)
# copies the files models/manifest.json names from third_party/weights/ (--from) and checks each
# file's sha256 against the catalogue (the single source of the hashes); this script copies the
# photos from third_party/testdata/, checked against the list below, and builds the mosaic.
# third_party/weights/README.md says where each file comes from (the npm tarballs, their pinned
# sha512 integrity) and its license. Idempotent: when every file verifies, it does nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
models_only=0
if [ "${1:-}" = --models-only ]; then models_only=1; shift; fi
MODELS_DIR=${1:-${FUSION_MODELS_DIR:-$ROOT/build/fetched/models}}
TESTDATA_DIR=${FUSION_TESTDATA_DIR:-$ROOT/build/fetched/testdata}
SHIPPED_WEIGHTS="$ROOT/third_party/weights"
SHIPPED_PHOTOS="$ROOT/third_party/testdata/faces"
CATALOGUE="$ROOT/models/manifest.json"
PY=/usr/bin/python3   # Debian's python3 (python3-opencv lives there), not a pyenv shim.

# Test data: sha256 | path under TESTDATA_DIR. The samples are byte copies of package/demo/;
# the mosaic is what OpenCV 4.6 (libjpeg-turbo, Debian 12) writes for the grid below.
TESTDATA=(
  "8ecae4b267b2d3169e06e00c7dee97097aa2a94635d45216f7732a5f4943cb51|faces/sample1.jpg"
  "7d2b60ae6f13bf30f422e04df87451081a02c83de469056f25afb44b7000c691|faces/sample2.jpg"
  "8eb081c9efb14370fa94d9feab9e5fbeafd19a627491853a80c2bf67f7ffa936|faces/sample3.jpg"
  "729efa5923061d40eb4ed5f267a18cc7b8ba6f852bb2757b16d8b7e4937476fc|faces/sample4.jpg"
  "6d45095ebb182d8f975c0790e0e4eefd86fbb40609cf4b271776d92e12662938|faces/sample5.jpg"
  "9baad80f9d5e306fb9b8c0913d44445f1e95848df317530efb03d0934c57ba87|faces/sample6.jpg"
  "d3c8afbf65df934604ea3c46ccbb4e94956fbc8225209262a719f71ebe4a9043|faces/mosaic_3840x2896.jpg"
)

die() { echo "fetch-models: $*" >&2; exit 1; }
# The models are fusiond-fetch-models' job (the same program the package installs): catalogue
# sha256, each file replaced by a rename.
fetch() {
  bash "$ROOT/packaging/fusiond-fetch-models" --catalogue "$CATALOGUE" --models-dir "$MODELS_DIR" "$@"
}

verify_testdata() {
  local entry sum path
  for entry in "${TESTDATA[@]}"; do
    sum=${entry%%|*}; path=${entry#*|}
    [ -f "$TESTDATA_DIR/$path" ] || return 1
    echo "$sum  $TESTDATA_DIR/$path"
  done | sha256sum --check --quiet --status
}

extract_testdata() {
  local i
  mkdir -p "$TESTDATA_DIR/faces"
  local stage; stage=$(mktemp -d "$TESTDATA_DIR/.stage.XXXXXX")
  for i in 1 2 3 4 5 6; do
    cp "$SHIPPED_PHOTOS/sample$i.jpg" "$stage/sample$i.jpg"
  done
  # The mosaic of shared/data/faces/LICENSES.md: a 2x2 grid of samples 1-4 (row-major), each
  # centred on a black 1920x1448 cell (an odd remainder puts the extra row on top), no
  # resampling, JPEG quality 90.
  "$PY" - "$stage" <<'PYEOF' || die "building the mosaic needs python3-opencv (scripts/setup-test.sh)"
import sys, cv2, numpy as np
d = sys.argv[1]
grid = np.zeros((2 * 1448, 2 * 1920, 3), np.uint8)
for i in range(4):
    img = cv2.imread(f"{d}/sample{i + 1}.jpg", cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    y = (i // 2) * 1448 + (1448 - h + 1) // 2
    x = (i % 2) * 1920 + (1920 - w + 1) // 2
    grid[y:y + h, x:x + w] = img
ok = cv2.imwrite(f"{d}/mosaic_3840x2896.jpg", grid, [cv2.IMWRITE_JPEG_QUALITY, 90])
sys.exit(0 if ok else 1)
PYEOF
  local entry sum path
  for entry in "${TESTDATA[@]}"; do
    sum=${entry%%|*}; path=${entry#*|}
    echo "$sum  $stage/${path#faces/}" | sha256sum --check --quiet --status ||
      die "$path: sha256 $(sha256sum "$stage/${path#faces/}" | cut -d' ' -f1) differs from $sum"
  done
  mv -f "$stage"/* "$TESTDATA_DIR/faces/"  # each rename is atomic
  rmdir "$stage"
}

[ -f "$CATALOGUE" ] || die "no catalogue at $CATALOGUE"
models_ok=0; testdata_ok=0
fetch --check -q 2>/dev/null && models_ok=1
if [ $models_only = 1 ]; then testdata_ok=1; else verify_testdata 2>/dev/null && testdata_ok=1; fi
[ $models_ok = 1 ] && [ $testdata_ok = 1 ] && exit 0
start=$(date +%s%N)
[ $models_ok = 1 ] || fetch -q --from "$SHIPPED_WEIGHTS"
[ $testdata_ok = 1 ] || extract_testdata
fetch --check || die "model files still fail verification after extraction"
[ $models_only = 1 ] || verify_testdata || die "test data still fails verification after extraction"
echo "fetch-models: models in $MODELS_DIR$([ $models_only = 1 ] || echo ", test data in $TESTDATA_DIR")" \
  "($(( ($(date +%s%N) - start) / 1000000 )) ms)" >&2
