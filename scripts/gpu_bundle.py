#!/usr/bin/env python3
"""What travels to the GPU machine for scripts/gpu-check, and its unpacking there.

  gpu_bundle.py pack DIR [--budget-mib 64] [--no-download]   (here: Debian 12 with the build deps)
  gpu_bundle.py unpack DIR PREFIX                             (there: no dpkg needed)
  gpu_bundle.py closure                                       (print the package list and exit)

The GPU machine has no network and none of Debian's -dev packages, only Python 3.12 with a CUDA
torch wheel, nvcc, cmake and ninja. pack fetches (`apt-get download`, the installed versions,
cached in ~/.cache/fusiond/debs) Debian 12's .debs of the -dev packages the build finds plus the
runtime closure of the libraries it links (DT_NEEDED, read from the installed files), minus glibc
(the machine's own) and minus STUBBED; unpacks them here with dpkg -x; prunes what neither the
build nor a run needs (static archives, docs, man pages: the -dev .debs carry ~20 MiB of .a
files); and writes DIR/prefix.tar.xz. So the bundle DIR holds:
  prefix.tar.xz  the private prefix (usr/include, usr/lib/x86_64-linux-gnu, usr/bin), with
              one generated shared library per STUBBED soname: every dynamic symbol of the real
              library, defined as a trap (functions execute ud2, objects are zero bytes) with the
              real symbol versions. Debian links these libraries with BIND_NOW, so a dependent
              needs every symbol it imports to exist at load; none is reached on fusiond's paths
              (GDAL/GDCM/EXR/JPEG-2000 decoders in OpenCV's imgcodecs, FFmpeg's external codecs,
              network protocols and hwaccels). A call into one crashes (SIGILL): never silent.
  models/, testdata/   the fetched weights and the photos the checks use;
  bundle.json the package list, sizes, the newest GLIBC_ version any file needs, the budget.
unpack (there; Python only, no dpkg) extracts prefix.tar.xz into PREFIX and makes absolute
symlinks relative to PREFIX.

Everything under DIR must fit the budget (default 64 MiB: the device machine's carry limit);
pack prints the size and exits 1 when it does not fit.
"""
import argparse
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBDIR = "/usr/lib/x86_64-linux-gnu"

# Headers, CMake configs, pkg-config files and link symlinks the build's find_package and
# pkg_check_modules calls need (CMakeLists.txt, daemon/*, models/*, tests/*, bench/*).
DEV_PACKAGES = [
    "libgrpc++-dev", "libgrpc-dev", "protobuf-compiler-grpc", "libprotobuf-dev", "protobuf-compiler",
    "libabsl-dev", "libc-ares-dev", "libre2-dev", "libssl-dev", "zlib1g-dev",
    "libspdlog-dev", "libfmt-dev", "nlohmann-json3-dev", "libtomlplusplus-dev", "libcli11-dev",
    "libcpp-httplib-dev", "libsystemd-dev", "libjemalloc-dev", "libgtest-dev", "libgmock-dev",
    "libbenchmark-dev", "libsqlite3-dev", "libpng-dev", "libjpeg62-turbo-dev", "libtiff-dev",
    "libwebp-dev", "libopencv-core-dev", "libopencv-imgproc-dev", "libopencv-imgcodecs-dev",
    "libopencv-photo-dev", "libavformat-dev", "libavcodec-dev", "libswscale-dev", "libavutil-dev",
    "libswresample-dev", "libdnnl-dev", "pkgconf", "libpkgconf3",
]
# The shared libraries the build links (its runtime closure is taken from these) and the
# build tools that run there (protoc, grpc_cpp_plugin, pkgconf).
ROOTS = [
    "libopencv_core.so.406", "libopencv_imgproc.so.406", "libopencv_imgcodecs.so.406",
    "libopencv_photo.so.406", "libgrpc++.so.1.51", "libgrpc.so.29", "libprotobuf.so.32",
    "libprotoc.so.32", "libspdlog.so.1.10", "libtomlplusplus.so.3", "libsystemd.so.0",
    "libjemalloc.so.2", "libsqlite3.so.0", "libavformat.so.59", "libavcodec.so.59",
    "libswscale.so.6", "libavutil.so.57", "libswresample.so.4", "libcpp-httplib.so.0.11",
    "libbenchmark.so.1debian", "libdnnl.so.2", "libpng16.so.16", "libjpeg.so.62", "libtiff.so.6",
    "libwebp.so.7", "libcrypto.so.3", "libssl.so.3", "libz.so.1",
    "/usr/bin/protoc", "/usr/bin/grpc_cpp_plugin", "/usr/bin/pkgconf",
]
# The machine's own C library (never carried; its version is checked against bundle.json).
SYSTEM = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2",
          "libresolv.so.2", "libutil.so.1", "libanl.so.1"}
# Leaves not reached on fusiond's paths, replaced by trap stubs (see the docstring). Their own
# dependencies are then not carried. Each saves megabytes (gdal alone pulls in ~90 MiB).
STUBBED = {
    # OpenCV imgcodecs: GDAL, GDCM (DICOM). Not OpenEXR nor OpenJPEG (small): imread/imdecode ask
    # the EXR magic check of every input, and image_tests encode JPEG 2000 (stubs crashed them).
    "libgdal.so.32", "libgdcmMSFF.so.3.0", "libgdcmDSED.so.3.0",
    # OpenCV core: OpenGL interop and LAPACK/BLAS (cv::solve's LAPACK path is not on our paths)
    "libGLX.so.0", "liblapack.so.3", "libblas.so.3",
    # FFmpeg: external codecs (fusiond decodes with FFmpeg's built-in decoders, see
    # daemon/video/mp4_writer.cc for the encoder), hardware acceleration, network protocols
    "libvpx.so.7", "libdav1d.so.6", "librsvg-2.so.2", "libgobject-2.0.so.0", "libglib-2.0.so.0",
    "libcairo.so.2", "libzvbi.so.0", "libsnappy.so.1", "libaom.so.3", "libcodec2.so.1.0", "libgsm.so.1",
    "libjxl.so.0.7", "libjxl_threads.so.0.7", "libmp3lame.so.0", "libopus.so.0", "librav1e.so.0",
    "libshine.so.3", "libspeex.so.1", "libSvtAv1Enc.so.1", "libtheoraenc.so.1", "libtheoradec.so.1",
    "libtwolame.so.0", "libvorbis.so.0", "libvorbisenc.so.2", "libx265.so.199", "libxvidcore.so.4",
    "libva.so.2", "libmfx.so.1", "libva-drm.so.2", "libva-x11.so.2", "libvdpau.so.1", "libX11.so.6",
    "libdrm.so.2", "libOpenCL.so.1", "libsoxr.so.0", "libxml2.so.2", "libgme.so.0", "libopenmpt.so.0",
    "libchromaprint.so.1", "libbluray.so.2", "libgnutls.so.30", "librabbitmq.so.4", "librist.so.4",
    "libsrt-gnutls.so.1.5", "libssh-gcrypt.so.4", "libzmq.so.5", "libwebpmux.so.3",
}
# Stubbed libraries whose functions return 0 (NULL, false, "not handled") instead of trapping:
# OpenCV's imgcodecs calls GDALAllRegister() when it lists its decoders, at the first imread or
# imdecode; GDAL is asked about an image only under cv::IMREAD_LOAD_GDAL, which fusiond never sets.
RETURN_ZERO = {"libgdal.so.32"}
# What the checks read: the catalogue's weights and two photos for the real-weights swap.
TESTDATA = ["faces/sample1.jpg", "faces/sample2.jpg"]


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def needed(path):
    out = sh("readelf", "-dW", path)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def resolve(soname):
    if soname.startswith("/"):
        return soname
    for d in (LIBDIR, "/lib/x86_64-linux-gnu", LIBDIR + "/lapack", LIBDIR + "/blas"):
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    raise SystemExit(f"gpu_bundle: {soname} is not installed here (run scripts/setup.sh)")


def closure():
    """(files carried as package contents, sonames stubbed): DT_NEEDED walk from ROOTS."""
    seen, files, stubbed, todo = set(), [], set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in seen or name in SYSTEM:
            continue
        seen.add(name)
        if name in STUBBED:
            stubbed.add(name)
            continue
        path = resolve(name)
        files.append(path)
        todo.extend(needed(path))
    return files, stubbed


def owner(path):
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
        alt = p.replace("/usr/lib/", "/lib/", 1) if p.startswith("/usr/lib/") else p
        r = subprocess.run(["dpkg", "-S", alt], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    raise SystemExit(f"gpu_bundle: no Debian package owns {path}")


def packages():
    files, stubbed = closure()
    pkgs = set(DEV_PACKAGES) | {owner(f) for f in files}
    pkgs -= {"libc6", "libc6-dev", "libc-bin"}
    return sorted(pkgs), sorted(stubbed), files


def glibc_needed(files):
    best = (2, 0)
    for f in files:
        for m in re.findall(r"GLIBC_(\d+)\.(\d+)", sh("objdump", "-p", f)):
            best = max(best, (int(m[0]), int(m[1])))
    return f"{best[0]}.{best[1]}"


def make_stub(soname, outdir, work):
    """A trap library with `soname`'s dynamic symbols and versions (see the docstring)."""
    real = resolve(soname)
    rows = sh("readelf", "--dyn-syms", "-W", real).splitlines()
    asm, nodes, default_of = [".text"], {}, {}
    i = 0
    for row in rows:
        f = row.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit() or f[6] in ("UND", "ABS"):
            continue
        typ, bind, name = f[3], f[4], f[7]
        if typ not in ("FUNC", "IFUNC", "OBJECT", "NOTYPE", "TLS") or bind == "LOCAL":
            continue
        base, ver, default = name, None, True
        if "@@" in name:
            base, ver = name.split("@@")
        elif "@" in name:
            base, ver = name.split("@")
            default = False
        label = f"__fusion_stub_{i}"
        i += 1
        if typ in ("FUNC", "IFUNC", "NOTYPE"):
            body = "xorl %eax, %eax; ret" if soname in RETURN_ZERO else "ud2"
            asm += [f'.globl {label}', f'.hidden {label}', f'.type {label},@function', f'{label}: {body}']
        else:
            size = max(int(f[2], 0), 1)
            sect = ".tbss" if typ == "TLS" else ".bss"
            kind = "@tls_object" if typ == "TLS" else "@object"
            asm += [f'.section {sect},"aw{"T" if typ == "TLS" else ""}",@nobits', f'.globl {label}', f'.hidden {label}',
                    f'.type {label},{kind}', f'.size {label},{size}', f'{label}: .zero {size}', '.text']
        if ver is None:
            asm.append(f'.set {base}, {label}')
            asm.append(f'.globl {base}')
            nodes.setdefault(None, []).append(base)
        else:
            asm.append(f'.symver {label}, {base}{"@@" if default else "@"}{ver}')
            nodes.setdefault(ver, [])
            if default:
                nodes[ver].append(base)
    s = work / f"{soname}.s"
    s.write_text("\n".join(asm) + "\n")
    cmd = ["gcc", "-shared", "-nostdlib", "-o", str(outdir / soname), f"-Wl,-soname,{soname}", str(s)]
    named = [v for v in nodes if v is not None]
    if named:
        vs = work / f"{soname}.map"
        unversioned = nodes.get(None, [])
        text = []
        for k, ver in enumerate(named):
            syms = nodes[ver] + (unversioned if k == 0 else [])
            body = "".join(f" {x};" for x in syms)
            text.append(f"{ver} {{{' global:' + body if body else ''}{' local: *;' if k == 0 else ''} }};")
        vs.write_text("\n".join(text) + "\n")
        cmd.append(f"-Wl,--version-script={vs}")
    subprocess.run(cmd, check=True)


def du(path):
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


# Never needed to build or run there: static archives, documentation, translations.
PRUNE = re.compile(r"(\.a$|^usr/share/(doc|man|info|locale|lintian|bug|bash-completion)/)")


def fetch_debs(pkgs, cache):
    """The installed version of each package (the one the CPU build is tested with), cached."""
    cache.mkdir(parents=True, exist_ok=True)
    debs = []
    for p in pkgs:
        q = subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], capture_output=True, text=True)
        ver = q.stdout.strip() if q.returncode == 0 else ""
        cached = sorted(cache.glob(f"{p}_*.deb"), key=lambda d: d.stat().st_mtime)
        hits = [d for d in cached if not ver or sh("dpkg-deb", "-f", str(d), "Version").strip() == ver]
        if not hits and cached and subprocess.run(["apt-get", "download", "--print-uris", "-q", f"{p}={ver}"],
                                                  capture_output=True).returncode != 0:
            hits = cached[-1:]  # the candidate fetched last time the installed version was gone
        if not hits:
            r = subprocess.run(["apt-get", "download", "-q", f"{p}={ver}" if ver else p], cwd=cache,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0 and ver:  # the installed version is no longer in the archive
                print(f"gpu_bundle: {p} {ver} is not downloadable; taking apt's candidate", file=sys.stderr)
                subprocess.run(["apt-get", "download", "-q", p], cwd=cache, check=True, stdout=subprocess.DEVNULL)
            elif r.returncode != 0:
                raise SystemExit(f"gpu_bundle: apt-get download {p} failed: {r.stderr.strip()}")
            hits = sorted(cache.glob(f"{p}_*.deb"), key=lambda d: d.stat().st_mtime)[-1:]
        debs.append(hits[0])
    return debs


def pack(args):
    out = pathlib.Path(args.dir).resolve()
    for d in (out / "models", out / "testdata"):
        d.mkdir(parents=True, exist_ok=True)
    pkgs, stubbed, files = packages()
    if args.only:  # a bounded pack (the CI test): these packages and stubs only
        pkgs = [p for p in pkgs if p in args.only.split(",")]
        stubbed = [s for s in stubbed if s in (args.stub or "").split(",")]
    cache = pathlib.Path(args.deb_cache or pathlib.Path.home() / ".cache/fusiond/debs")
    debs = fetch_debs(pkgs, cache)
    with tempfile.TemporaryDirectory() as t:
        stage, work = pathlib.Path(t) / "prefix", pathlib.Path(t) / "work"
        lib = stage / LIBDIR.lstrip("/")
        lib.mkdir(parents=True)
        work.mkdir()
        for deb in debs:  # dpkg -x, here, so that what travels can be pruned
            subprocess.run(["dpkg-deb", "-x", str(deb), str(stage)], check=True)
        for s in stubbed:
            make_stub(s, lib, work)
        members = sorted(str(q.relative_to(stage)) for q in stage.rglob("*") if not q.is_dir())
        members = [m for m in members if not PRUNE.search(m)]
        (work / "list").write_text("\n".join(members) + "\n")
        subprocess.run(["tar", "-C", str(stage), "--owner=0", "--group=0", "-cf", str(work / "prefix.tar"),
                        "-T", str(work / "list")], check=True)
        subprocess.run(["xz", "-T2", f"-{args.xz_level}", "-f", str(work / "prefix.tar")], check=True)
        shutil.move(str(work / "prefix.tar.xz"), out / "prefix.tar.xz")
    models_src = pathlib.Path(args.models or ROOT / "build/fetched/models")
    test_src = pathlib.Path(args.testdata or ROOT / "build/fetched/testdata")
    if not models_src.is_dir():
        raise SystemExit(f"gpu_bundle: no weights in {models_src} (run scripts/fetch-models.sh)")
    shutil.copytree(models_src, out / "models", dirs_exist_ok=True)
    for rel in TESTDATA:
        (out / "testdata" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(test_src / rel, out / "testdata" / rel)
    budget = args.budget_mib << 20
    info = {"packages": [d.name for d in debs], "stubbed": stubbed, "glibc_needed": glibc_needed(files),
            "budget_bytes": budget, "debs_bytes": sum(d.stat().st_size for d in debs),
            "prefix_bytes": (out / "prefix.tar.xz").stat().st_size,
            "models_bytes": du(out / "models"), "testdata_bytes": du(out / "testdata")}
    info["total_bytes"] = info["prefix_bytes"] + info["models_bytes"] + info["testdata_bytes"] + 4096
    (out / "bundle.json").write_text(json.dumps(info, indent=1) + "\n")
    mib = lambda b: f"{b / 1048576:.1f} MiB"
    print(f"gpu bundle {out}: {len(debs)} .debs ({mib(info['debs_bytes'])} as fetched) unpacked, pruned and "
          f"{len(stubbed)} trap stubs -> prefix.tar.xz {mib(info['prefix_bytes'])}; weights {mib(info['models_bytes'])}, "
          f"photos {mib(info['testdata_bytes'])}; total {mib(info['total_bytes'])} of the {mib(budget)} budget; "
          f"needs glibc >= {info['glibc_needed']}")
    if info["total_bytes"] > budget:
        print(f"gpu bundle: over the budget by {mib(info['total_bytes'] - budget)}", file=sys.stderr)
        return 1
    return 0


# Debian's OpenCVConfig.cmake is in libopencv-dev, which depends on every module (~1 GiB); the
# build asks for these four (CMakeLists.txt), so a config for them alone is written instead.
OPENCV_MODULES = ["core", "imgproc", "imgcodecs", "photo"]


def write_opencv_config(prefix):
    lib = prefix / LIBDIR.lstrip("/")
    d = lib / "cmake/opencv4"
    d.mkdir(parents=True, exist_ok=True)
    lines = ['# Written by scripts/gpu_bundle.py unpack: OpenCV 4.6 (Debian 12), four modules.',
             'get_filename_component(_ocv_prefix "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)',
             'set(OpenCV_VERSION 4.6.0)', 'set(OpenCV_INCLUDE_DIRS "${_ocv_prefix}/include/opencv4")',
             'set(OpenCV_LIBS)']
    for m in OPENCV_MODULES:
        lines += [f'if(NOT TARGET opencv_{m})', f'  add_library(opencv_{m} SHARED IMPORTED)',
                  f'  set_target_properties(opencv_{m} PROPERTIES IMPORTED_LOCATION '
                  f'"${{_ocv_prefix}}/lib/x86_64-linux-gnu/libopencv_{m}.so.406"',
                  '    INTERFACE_INCLUDE_DIRECTORIES "${OpenCV_INCLUDE_DIRS}")', 'endif()',
                  f'list(APPEND OpenCV_LIBS opencv_{m})']
    lines += [f'set(_ocv_known {" ".join(OPENCV_MODULES)})',
              'foreach(_c ${OpenCV_FIND_COMPONENTS})',
              '  if(NOT _c IN_LIST _ocv_known)',
              '    set(OpenCV_FOUND FALSE)',
              '    set(OpenCV_NOT_FOUND_MESSAGE "OpenCV module ${_c} is not in the gpu-check prefix")',
              '  endif()', 'endforeach()']
    (d / "OpenCVConfig.cmake").write_text("\n".join(lines) + "\n")
    (d / "OpenCVConfigVersion.cmake").write_text(
        'set(PACKAGE_VERSION 4.6.0)\n'
        'if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n  set(PACKAGE_VERSION_COMPATIBLE FALSE)\n'
        'else()\n  set(PACKAGE_VERSION_COMPATIBLE TRUE)\nendif()\n')


def unpack(args):
    src, prefix = pathlib.Path(args.dir), pathlib.Path(args.prefix).resolve()
    prefix.mkdir(parents=True, exist_ok=True)
    with tarfile.open(src / "prefix.tar.xz") as tar:
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(prefix, filter="tar")
        else:
            tar.extractall(prefix)
    fixed = 0
    for p in prefix.rglob("*"):  # absolute symlinks point into the prefix, not the machine
        if p.is_symlink() and os.readlink(p).startswith("/"):
            target = prefix / os.readlink(p).lstrip("/")
            p.unlink()
            p.symlink_to(os.path.relpath(target, p.parent))
            fixed += 1
    write_opencv_config(prefix)
    print(f"unpacked {src / 'prefix.tar.xz'} into {prefix} ({fixed} absolute symlinks made relative)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("dir")
    p.add_argument("--budget-mib", type=int, default=64)
    p.add_argument("--deb-cache", help="where fetched .debs are kept (default ~/.cache/fusiond/debs)")
    p.add_argument("--xz-level", type=int, default=6)
    p.add_argument("--only", help="comma-separated packages: pack only these (a bounded test run)")
    p.add_argument("--stub", help="with --only: the sonames to stub")
    p.add_argument("--models")
    p.add_argument("--testdata")
    u = sub.add_parser("unpack")
    u.add_argument("dir")
    u.add_argument("prefix")
    sub.add_parser("closure")
    args = ap.parse_args()
    if args.cmd == "pack":
        return pack(args)
    if args.cmd == "unpack":
        return unpack(args)
    pkgs, stubbed, _ = packages()
    print("\n".join(pkgs))
    print(f"# stubbed: {' '.join(stubbed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
