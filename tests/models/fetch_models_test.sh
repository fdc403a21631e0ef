#!/usr/bin/env bash
# scripts/fetch-models.sh repairs a corrupt and a missing model file from its tarball cache,
# and a second run over a verified tree changes nothing and prints nothing.
#   fetch_models_test.sh SOURCE_DIR FETCHED_MODELS_DIR TESTDATA_DIR
set -euo pipefail
src=$1 fetched=$2 testdata=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$fetched" "$tmp/models"
bin="$tmp/models/face-api/tiny_face_detector_model.bin"
printf 'X' | dd of="$bin" bs=1 seek=1000 conv=notrunc status=none
rm "$tmp/models/esrgan-slim/x4/model.json"
FUSION_TESTDATA_DIR=$testdata bash "$src/scripts/fetch-models.sh" "$tmp/models" 2>"$tmp/log1"
echo "b7503ce7df31039b1c43316a9b865cab6a70dd748cc602d3fa28b551503c3871  $bin" | sha256sum --check --quiet
[ -f "$tmp/models/esrgan-slim/x4/model.json" ] || { echo "model.json not restored"; exit 1; }
before=$(find "$tmp/models" -type f -printf '%p %T@\n' | sort)
FUSION_TESTDATA_DIR=$testdata bash "$src/scripts/fetch-models.sh" "$tmp/models" >"$tmp/log2" 2>&1
[ ! -s "$tmp/log2" ] || { echo "second run printed:"; cat "$tmp/log2"; exit 1; }
[ "$before" = "$(find "$tmp/models" -type f -printf '%p %T@\n' | sort)" ] || { echo "second run touched files"; exit 1; }
echo "repaired and idempotent"
