#!/usr/bin/env bash
# Makes the virtual environment the Python SDK tests run in, as the README tells a user: a venv
# over Debian's Python with --system-site-packages (python3-grpcio, python3-protobuf,
# python3-numpy, python3-pytest come from Debian) and `pip install --no-index
# --no-build-isolation` of sdk/python, whose build generates the gRPC stubs from proto/.
# One difference, for CI time: the venv gets no pip of its own (ensurepip takes ~5.5 s of the
# ~9 s); Debian's python3-pip, seen through --system-site-packages, installs into it instead.
# The package is built from a copy in VENV.src, so the source tree gets no build/ or egg-info.
# Usage: make_venv.sh PYTHON SOURCE_DIR VENV
set -euo pipefail
python=$1 src=$(realpath "$2") venv=$(realpath -m "$3")
rm -rf "$venv" "$venv.src"
"$python" -m venv --system-site-packages --without-pip "$venv"
cp -r "$src/sdk/python" "$venv.src"
rm -rf "$venv.src/build" "$venv.src"/*.egg-info
FUSIOND_PROTO_DIR="$src/proto" "$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation \
  --disable-pip-version-check "$venv.src"
# Installed, importable from outside the source tree, with generated (not committed) stubs.
cd /
"$venv/bin/python" -c 'import fusiond, fusiond._proto.fusion.v1.fusion_pb2_grpc as g; print("fusiond", fusiond.__version__, "at", fusiond.__file__)'
