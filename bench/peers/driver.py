"""bench/peers driver: times fusiond's own forward, ONNX Runtime and OpenCV dnn on the
same weights and input, interleaved, and prints a markdown table. ONNX Runtime (onnxruntime from
PyPI, requirements.txt) runs here; fusiond and OpenCV dnn run in `fusion_peer_bench worker` (one
process, started by this one), so exactly one runtime computes at a time. Per network and thread
count: `warmup` runs of each, then `rounds` rounds, each running every runtime `iters` times in a
rotating order; the figures are medians over all rounds' runs (every run's time goes to
OUT/results.json). Run by bench/peers/run.sh with the venv's python (setup.sh), not by CI.

  python driver.py --bin BIN --models-dir DIR --image PNG --out DIR
                   [--threads 1,2] [--rounds 10] [--iters 3] [--warmup 3] [--settle-ms 20]
                   [--wait-policy spin|passive] [--bf16] [--no-opencv] [ID...]
--no-opencv: leaves OpenCV dnn out (its columns print "—"), for shorter runs.
--bf16: fusiond twice, its fast path in fp32 ("fusiond") and in bf16 ("fusiond bf16", a fourth
  runtime in the same rotation; FUSION_ONEDNN_PRECISION, models/onednn/program.h), with the
  bf16 output's max abs / relative difference from fusiond's fp32 output.
--settle-ms: a pause after each block of runs, so the idle threads of the runtime that just ran
  (OpenMP, TBB and ORT pools spin a while before sleeping) do not take a core from the next.
--wait-policy: how idle intra-op threads wait, the same for both thread-pool runtimes.
  spin (default, what each ships with): ORT allow_spinning 1, the worker's OpenMP
  (LibTorch's, oneDNN's) with the OMP_WAIT_POLICY of this environment (libgomp's default:
  spin a while, then sleep). passive: ORT allow_spinning 0 and OMP_WAIT_POLICY=PASSIVE for the
  worker (idle threads sleep at once). OpenCV's TBB pool is left as it is in both.
"""
import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np

from ort_runner import ORT_VERSION, OrtRunner
from table import bf16_table, markdown_table, max_abs_diff, median
from worker_client import WorkerClient


def parse_args(argv):
    p = argparse.ArgumentParser(description="bench/peers driver: fusiond vs ONNX Runtime vs OpenCV dnn",
                                allow_abbrev=False)
    p.add_argument("--bin", required=True, help="fusion_peer_bench")
    p.add_argument("--models-dir", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--out", required=True, help="the directory `dump` and mirrors/export.py wrote")
    p.add_argument("--threads", default="1,2", type=lambda s: [int(t) for t in s.split(",")])
    p.add_argument("--rounds", default=10, type=int)
    p.add_argument("--iters", default=3, type=int)
    p.add_argument("--warmup", default=3, type=int)
    p.add_argument("--settle-ms", default=20, type=float)
    p.add_argument("--wait-policy", default="spin", choices=["spin", "passive"])
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--no-opencv", action="store_true")
    p.add_argument("ids", nargs="*", metavar="ID")
    return p.parse_args(argv)


def read_f32(path):
    return np.fromfile(path, dtype="<f4")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def log(*m):
    print("[peers]", *m, file=sys.stderr, flush=True)


def load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def bench_net(worker, a, id_):
    meta = read_json(os.path.join(a.out, f"{id_}.json"))
    mirror = read_json(os.path.join(a.out, f"{id_}.mirror.json"))
    onnx = os.path.join(a.out, f"{id_}.onnx")
    input_ = read_f32(os.path.join(a.out, f"{id_}.input.f32"))
    ref = read_f32(os.path.join(a.out, f"{id_}.fusiond.f32"))
    worker.call(f"net {id_} fp32" if a.bf16 else f"net {id_}")
    bf16 = worker.call("variant bf16") if a.bf16 else None
    if bf16:
        log(f"{id_}: bf16 vs fp32 max abs diff {bf16['max_abs_diff']}, relative {bf16['max_rel_diff']}")
    cv = {"ok": False, "error": "--no-opencv"} if a.no_opencv else worker.call(f"onnx {onnx}", True)
    if not cv["ok"]:
        log(f"{id_}: OpenCV dnn left out: {cv['error']}")
    rows = []
    for t in a.threads:
        ort = OrtRunner(onnx, t, input_, meta["input_shape"], a.wait_policy == "spin")
        ort_diff = max_abs_diff(ort.forward(), ref)
        for name, d in (("ORT", ort_diff), ("OpenCV", cv["max_abs_diff"] if cv["ok"] else 0)):
            if not d <= mirror["tolerance"]:
                log(f"{id_}: {name}'s output differs from fusiond's by {d} (> {mirror['tolerance']})")

        def from_worker(cmd):
            return lambda n: (lambda r: {"ms": r["ms"], "cpu": r["cpu_ms"]})(worker.call(f"{cmd} {t} {n}"))

        runtimes = {"fusiond": from_worker("time fusiond"), "ort": ort.time}
        if bf16:
            runtimes["fusiondBf16"] = from_worker("time fusiond_variant")
        if cv["ok"]:
            runtimes["opencv"] = from_worker("time opencv")
        names = list(runtimes)
        for n in names:
            runtimes[n](a.warmup)
            time.sleep(a.settle_ms / 1e3)
        ms = {n: [] for n in names}
        cpu = {n: [] for n in names}
        for r in range(a.rounds):
            for j in range(len(names)):
                n = names[(r + j) % len(names)]
                got = runtimes[n](a.iters)
                ms[n].extend(got["ms"])
                cpu[n].extend(got["cpu"])
                time.sleep(a.settle_ms / 1e3)
        row = {"id": id_, "threads": t, "flops": mirror["flops"], "mirrorDiff": mirror["mirror_max_abs_diff"],
               "ortDiff": ort_diff, "opencvDiff": cv["max_abs_diff"] if cv["ok"] else math.nan,
               "runs": a.rounds * a.iters, "bf16Diff": bf16["max_abs_diff"] if bf16 else math.nan,
               "bf16Rel": bf16["max_rel_diff"] if bf16 else math.nan}
        for n in ("fusiond", "ort", "opencv", "fusiondBf16"):
            row[n] = median(ms[n]) if n in ms else math.nan
            row[f"{n}Cpu"] = median(cpu[n]) if n in cpu else math.nan
        row["ms"] = ms  # every run, for results.json
        row["cpuMs"] = cpu
        log(f"{id_} @{t} thread(s): fusiond {row['fusiond']:.2f} ms (CPU {row['fusiondCpu']:.2f}), "
            f"ORT {row['ort']:.2f} ms (CPU {row['ortCpu']:.2f}), OpenCV {row['opencv']:.2f} ms" +
            (f", fusiond bf16 {row['fusiondBf16']:.2f} ms (CPU {row['fusiondBf16Cpu']:.2f})" if bf16 else "") +
            f" (load {load()})")
        rows.append(row)
        del ort
    return rows


def json_safe(v):
    """NaN as null, as JSON.stringify wrote it (json.dumps would write the invalid NaN)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_safe(x) for x in v]
    return v


def main(argv):
    a = parse_args(argv)
    ids = a.ids or sorted(f[:-len(".mirror.json")] for f in os.listdir(a.out) if f.endswith(".mirror.json"))
    if not ids:
        raise SystemExit(f"driver.py: no ids given and no ID.mirror.json in {a.out} (run mirrors/export.py first)")
    for id_ in ids:
        for suffix in (".json", ".mirror.json", ".onnx", ".input.f32", ".fusiond.f32"):
            if not os.path.isfile(os.path.join(a.out, id_ + suffix)):
                raise SystemExit(f"driver.py: {os.path.join(a.out, id_ + suffix)} is missing "
                                 "(fusion_peer_bench dump and mirrors/export.py write it)")
    if not os.access(a.bin, os.X_OK):
        raise SystemExit(f"driver.py: --bin {a.bin} is not an executable (build fusion_peer_bench)")
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"} if a.wait_policy == "passive" else None
    worker = WorkerClient(a.bin, ["--models-dir", a.models_dir, "--image", a.image, "--out", a.out], env)
    start_load = load()
    rows = []
    try:
        peak0 = worker.call("peak")["gflops"]
        for id_ in ids:
            rows.extend(bench_net(worker, a, id_))
        peak1 = worker.call("peak")["gflops"]
    finally:
        worker.close()
    peak = max(peak0, peak1)
    print(f"Machine: {cpu_model()}, {os.cpu_count()} logical CPUs; one-core fp32 FMA peak {peak:.1f} GFLOP/s "
          f"(best of two measurements: {peak0:.1f}, {peak1:.1f}).")
    print(f"Load average (1/5/15 min) at start {start_load}, at end {load()}. {now_iso()}")
    print(f"Runtimes: fusiond (LibTorch 1.13.1, at::set_num_threads), ONNX Runtime {ORT_VERSION} CPU EP "
          "(Python, PyPI; intra_op_num_threads, inter_op_num_threads 1, sequential, ORT_ENABLE_ALL), "
          "OpenCV 4.6.0 dnn (cv::setNumThreads); fp32, NCHW, batch 1.")
    omp = os.environ.get("OMP_WAIT_POLICY", "unset, libgomp default")
    print("Wait policy: " + (f"spin (ORT allow_spinning 1; OMP_WAIT_POLICY {omp})." if a.wait_policy == "spin"
                             else "passive (ORT allow_spinning 0; OMP_WAIT_POLICY=PASSIVE)."))
    print("CPU ms: the process CPU time per run (every thread of the worker or of the Python driver; under "
          "load from other processes less disturbed than the wall-clock ms, and at 2 threads it shows how many "
          "cores a run kept busy).")
    print(f"Medians of {a.rounds * a.iters} runs each ({a.rounds} interleaved rounds of {a.iters}, after "
          f"{a.warmup} warm-up runs); % peak is against threads x the one-core peak.\n")
    print(markdown_table(rows, peak))
    if a.bf16:
        print(f"\nfusiond's fast path in bf16 (FUSION_ONEDNN_PRECISION=bf16), same rounds:\n\n{bf16_table(rows)}")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(json_safe({"peak": peak, "peak0": peak0, "peak1": peak1, "startLoad": start_load,
                             "endLoad": load(), "date": now_iso(), "ortVersion": ORT_VERSION,
                             "waitPolicy": a.wait_policy, "rounds": a.rounds, "iters": a.iters, "rows": rows}),
                  f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
