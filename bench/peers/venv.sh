# shellcheck shell=bash disable=SC2034  # the names are for the scripts that source this file
# Sourced by setup.sh and run.sh (bash): the pinned ONNX Runtime version (from requirements.txt)
# and the virtual environment setup.sh installs it into, outside the repository.
PEERS_REQUIREMENTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/requirements.txt"
PEERS_ORT_VERSION=$(sed -n 's/^onnxruntime==\([^ ]*\) .*/\1/p' "$PEERS_REQUIREMENTS")
if [ -z "$PEERS_ORT_VERSION" ]; then
  echo "bench/peers/venv.sh: no 'onnxruntime==VERSION --hash=...' line in $PEERS_REQUIREMENTS" >&2
  return 1
fi
PEERS_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/fusiond/venv-peers-ort-$PEERS_ORT_VERSION"
PEERS_PYTHON="$PEERS_VENV/bin/python"
