#!/usr/bin/env python3
"""python_sdk_overhead: the Python SDK's image transport next to the C++ SDK's, against one
fusiond (goal: within 10%). Not a test; prints figures.

Starts fusiond (CPU) in a temporary directory, runs the 11-megapixel mosaic job (its 11 MiB
PNG result comes back by memfd) and a small job (its result comes inline), then measures, for
each SDK in alternating rounds (bench/sdk_transport_bench.cc is the C++ side):
  put            the mosaic JPEG put by sealed memfd over <socket>.fd (memfd, seals, SCM_RIGHTS)
  result memfd   GetJobResult of the mosaic job: RPC + the daemon's publish + memfd get + copy
  result inline  GetJobResult of the small job: the image inside the gRPC reply
and prints each step's median over all rounds (ms) and the ratio Python / C++.

Run with the Python that has the fusiond package (tests/python/make_venv.sh makes one):
  build/python-venv/bin/python bench/python_sdk_overhead.py --build build
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

import fusiond
from fusiond import _memfd

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^(put|result memfd|result inline)\s+(\d+) bytes\s+median\s+([\d.]+) ms")


def measure(n: int, step: Callable[[], int]) -> List[float]:
    step()  # warm-up, as the C++ side
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        if step() <= 0:
            raise SystemExit("a step moved no bytes")
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="build directory (fusiond, sdk_transport_bench, fetched/)")
    ap.add_argument("--iterations", type=int, default=1, help="runs per step per round")
    ap.add_argument("--rounds", type=int, default=7, help="alternating C++/Python rounds")
    a = ap.parse_args()
    # Each put and memfd result keeps a token in the daemon for 10 minutes, 64 per uid.
    if 2 * a.rounds * 2 * (a.iterations + 1) + 2 > 64:
        raise SystemExit("--rounds x --iterations too large for the daemon's 64 tokens per uid")
    build = os.path.abspath(a.build)
    fusiond_bin = os.path.join(build, "daemon", "fusiond")
    cpp_bench = os.path.join(build, "bench", "sdk_transport_bench")
    models = os.path.join(build, "fetched", "models")
    mosaic = os.path.join(build, "fetched", "testdata", "faces", "mosaic_3840x2896.jpg")
    faces = os.path.join(HERE, "..", "tests", "data", "faces")
    source, small = os.path.join(faces, "astronaut_eileen_collins_512.png"), os.path.join(faces, "grace_hopper_512x600.jpg")
    for p in (fusiond_bin, cpp_bench, mosaic):
        if not os.path.exists(p):
            raise SystemExit(f"{p} missing (build fusiond and sdk_transport_bench; scripts/fetch-models.sh)")
    with tempfile.TemporaryDirectory(prefix="fusiond-bench-") as root:
        sock = os.path.join(root, "f.sock")
        log = open(os.path.join(root, "fusiond.log"), "wb")
        daemon = subprocess.Popen([fusiond_bin, "--socket", sock, "--device", "cpu", "--device-memory-limit", "1GiB",
                                   "--state-dir", os.path.join(root, "state"), "--models-dir", models],
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(600):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            with fusiond.Client(sock, timeout=60, memfd_threshold_bytes=1 << 20) as c:
                big = c.swap(source, mosaic, max_side=640, min_face_px=120, simple=True)
                tiny = c.swap(source, small, simple=True)
                assert big.image_by_memfd and not tiny.image_by_memfd
                image = open(mosaic, "rb").read()
                py: Dict[str, List[float]] = {"put": [], "result memfd": [], "result inline": []}
                cpp: Dict[str, List[float]] = {k: [] for k in py}
                sizes: Dict[str, int] = {}
                for _ in range(a.rounds):
                    out = subprocess.run([cpp_bench, "--socket", sock, "--put", mosaic, "--memfd-job", big.job_id,
                                          "--inline-job", tiny.job_id, "--iterations", str(a.iterations)],
                                         capture_output=True, text=True, check=True).stdout
                    for line in out.splitlines():
                        m = LINE.match(line)
                        if m:
                            cpp[m.group(1)].append(float(m.group(3)))
                            sizes[m.group(1)] = int(m.group(2))
                    py["put"] += measure(a.iterations, lambda: len(image) if _memfd.put(c.socket_path, image) else 0)
                    py["result memfd"] += measure(a.iterations, lambda: len(c._result(big.job_id, False).image_bytes))
                    py["result inline"] += measure(a.iterations, lambda: len(c._result(tiny.job_id, False).image_bytes))
        finally:
            daemon.terminate()
            daemon.wait(30)
            log.close()
    print(f"image transport, Python SDK vs C++ SDK, one fusiond (CPU), {a.rounds} rounds x {a.iterations} runs; "
          "C++: median of each round's median; Python: median of all runs")
    print(f"{'step':<14} {'bytes':>10} {'C++ ms':>9} {'Python ms':>10} {'Python/C++':>11}")
    total_c = total_p = 0.0
    for step in py:
        c_ms, p_ms = statistics.median(cpp[step]), statistics.median(py[step])
        total_c, total_p = total_c + c_ms, total_p + p_ms
        print(f"{step:<14} {sizes.get(step, 0):>10} {c_ms:>9.3f} {p_ms:>10.3f} {p_ms / c_ms:>10.2f}x")
    print(f"{'all three':<14} {'':>10} {total_c:>9.3f} {total_p:>10.3f} {total_p / total_c:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
