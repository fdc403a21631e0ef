"""Build of the fusiond Python package: the gRPC/protobuf stubs are generated from the
repository's proto/ at build time by Debian's protoc (3.21) and grpc_python_plugin (1.51,
package protobuf-compiler-grpc); they are never committed.

The .proto files are copied under fusiond/_proto/ in a staging tree first, so the generated
modules import each other as fusiond._proto.fusion.v1.* (no top-level `fusion` package is
installed); the protobuf package names (fusion.v1, grpc.health.v1) and so the wire format and
the gRPC method paths stay those of proto/.
"""
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
# proto/ of the repository (sdk/python/../../proto), or FUSIOND_PROTO_DIR.
PROTO_DIR = os.environ.get("FUSIOND_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))
PROTOS = ["fusion/v1/fusion.proto", "fusion/v1/error_details.proto", "grpc/health/v1/health.proto"]
PACKAGES = ["fusiond/_proto", "fusiond/_proto/fusion", "fusiond/_proto/fusion/v1",
            "fusiond/_proto/grpc", "fusiond/_proto/grpc/health", "fusiond/_proto/grpc/health/v1"]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SystemExit(f"fusiond: {name} not found: install Debian's protobuf-compiler-grpc "
                         "(scripts/setup.sh does)")
    return path


def generate(out_dir: str) -> None:
    """Writes fusiond/_proto/** (the *_pb2.py and *_pb2_grpc.py modules) under out_dir."""
    protoc, plugin = _tool("protoc"), _tool("grpc_python_plugin")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as staging:
        staged = []
        for rel in PROTOS:
            src = os.path.join(PROTO_DIR, rel)
            if not os.path.isfile(src):
                raise SystemExit(f"fusiond: {src} not found (set FUSIOND_PROTO_DIR to proto/)")
            dst = os.path.join(staging, "fusiond", "_proto", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            staged.append(os.path.join("fusiond", "_proto", rel))
        subprocess.run([protoc, f"-I{staging}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
                        f"--grpc_python_out={out_dir}", f"--plugin=protoc-gen-grpc_python={plugin}",
                        *staged], check=True)
    for pkg in PACKAGES:
        init = os.path.join(out_dir, pkg, "__init__.py")
        os.makedirs(os.path.dirname(init), exist_ok=True)
        if not os.path.exists(init):
            with open(init, "w", encoding="utf-8") as f:
                f.write("# Generated at build time from proto/ (setup.py); do not edit.\n")


class BuildPyWithProtos(build_py):
    """build_py that first generates the stubs into the build tree."""

    def run(self) -> None:
        generate(self.build_lib)
        super().run()

    def find_package_modules(self, package, package_dir):
        # The generated packages exist only in build_lib, not in the source tree.
        if package.startswith("fusiond._proto"):
            return []
        return super().find_package_modules(package, package_dir)

    def check_package(self, package, package_dir):
        if package.startswith("fusiond._proto"):
            return None
        return super().check_package(package, package_dir)


setup(cmdclass={"build_py": BuildPyWithProtos})
