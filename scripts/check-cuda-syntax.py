#!/usr/bin/env python3
"""Compiles fusiond's CUDA-only code (#ifdef FUSION_WITH_CUDA) with -fsyntax-only.

CI machines have Debian's CPU LibTorch, whose packaged headers include c10/cuda, and the CUDA
toolkit headers in /usr/local/cuda, but no CUDA LibTorch to link against. So the GPU-only lines
(the CUDA DeviceMeter, side-stream uploads, fp16 autocast) are never built there. This check
compiles each translation unit that holds such lines with the flags CMake recorded in
compile_commands.json plus -DFUSION_WITH_CUDA, against those headers: type and API errors in
the GPU path fail the test command instead of surfacing first on a GPU machine.

c10/cuda/impl/cuda_cmake_macros.h is generated when LibTorch itself is built and is not
packaged; a copy with the shared-library setting of Debian's build is written to the build dir.

Usage: check-cuda-syntax.py BUILD_DIR   (exit 0: all compiled or no CUDA headers; 1: errors)
"""
import json
import os
import pathlib
import shlex
import subprocess
import sys

CUDA_INCLUDE = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
C10_CUDA = pathlib.Path("/usr/include/c10/cuda")
MARKER = "FUSION_WITH_CUDA"


def compile_args(entry, macros_dir):
    """The recorded command, minus output/dependency flags, plus the CUDA definition."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    while args and os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-D" + MARKER, "-I" + str(macros_dir), "-isystem", str(CUDA_INCLUDE)]


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    if not (CUDA_INCLUDE / "cuda_runtime_api.h").exists() or not (C10_CUDA / "CUDAStream.h").exists():
        print(f"CUDA syntax check: skipped (no {CUDA_INCLUDE}/cuda_runtime_api.h or {C10_CUDA})")
        return 0
    macros_dir = build / "cuda-syntax"
    (macros_dir / "c10/cuda/impl").mkdir(parents=True, exist_ok=True)
    (macros_dir / "c10/cuda/impl/cuda_cmake_macros.h").write_text(
        "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    entries = json.loads((build / "compile_commands.json").read_text())
    checked, failed = [], []
    for e in entries:
        src = pathlib.Path(e["file"])
        if src.suffix != ".cc" or MARKER not in src.read_text(errors="replace"):
            continue
        r = subprocess.run(compile_args(e, macros_dir), cwd=e["directory"], capture_output=True, text=True)
        checked.append(src.name)
        if r.returncode != 0:
            failed.append(src.name)
            sys.stderr.write(f"--- {src}\n{r.stderr}\n")
    # The CUDA-only TUs are not in the CPU build; check each with the flags of a sibling that is.
    # The per-model precision test is its own CPU twin (FUSION_RP_FP16=0): its fp16 side is
    # the same file with FUSION_RP_FP16=1.
    siblings = {"daemon/device/cuda_device_meter.cc": "daemon/device/cpu_device_memory.cc",
                "tests/gpu/cuda_memory_test.cc": "tests/device/cpu_device_memory_test.cc",
                "tests/gpu/reduced_precision_test.cc": "tests/gpu/reduced_precision_test.cc"}
    root = pathlib.Path(__file__).resolve().parent.parent
    for rel, sib in siblings.items():
        name, src = pathlib.Path(rel).name, root / rel
        extra = [e for e in entries if e["file"].endswith(sib)]
        if not extra or not src.exists():
            failed.append(name)
            sys.stderr.write(f"--- {name}: no compile flags of {sib} in {build}/compile_commands.json\n")
            continue
        args = compile_args(dict(extra[0], command=extra[0]["command"]), macros_dir)
        args = [str(src) if a.endswith(pathlib.Path(sib).name) else a for a in args]
        args = [a.replace("-DFUSION_RP_FP16=0", "-DFUSION_RP_FP16=1") for a in args]
        args.insert(1, "-I" + str(root / "daemon"))
        r = subprocess.run(args, cwd=extra[0]["directory"], capture_output=True, text=True)
        checked.append(name)
        if r.returncode != 0:
            failed.append(name)
            sys.stderr.write(f"--- {src}\n{r.stderr}\n")
    print(f"CUDA syntax check (-D{MARKER}, {CUDA_INCLUDE}): {len(checked) - len(failed)} of "
          f"{len(checked)} translation units compile: {', '.join(sorted(checked))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
