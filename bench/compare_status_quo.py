#!/usr/bin/env python3
"""Status quo vs fusiond: N tools each running the pipeline in-process with its own models
(bench/inprocess) against N clients of one fusiond (bench/loadgen), in one run.

  bench/compare_status_quo.py --build build [--n 1,2,4] [--jobs 2] [--photos DIR] [--json OUT]

For each N the two ways run back to back, their order alternating with N (so drift on a shared
machine falls on both), each from a cold start (fresh processes, fresh daemon, models loaded by
the first job). Every job is the same: --simple, max_side 640, photo pair (client + j).
Measured per way: total memory = the peak over time of the sum of VmRSS of every process of
that way (the N tools; or fusiond + loadgen and its client processes), sampled every 100 ms;
throughput = jobs done / wall seconds; job ms median (in-process: the Swap call; daemon:
submit to result fetched, so transport, journal and queue are inside it). Overhead =
in-process median / daemon median at N=1 (goal >= 0.97).
Under a memory cap (--cap SIZE, e.g. 1280MiB): every way runs inside a new memory cgroup of its
own, a child of this process's (cgroup v2 memory.max where the unified hierarchy has the memory
controller and lets this process write; else cgroup v1 memory.limit_in_bytes), holding all of
that way's processes (the N tools; or fusiond, loadgen and its clients). The kernel's OOM killer
acts at the cap; the table counts the jobs that did not succeed and the OOM kills. fusiond reads
its cgroup's cap (daemon/device/cgroup_memory.h) and budgets within it; the tools cannot. Where
no memory cgroup can be made the capped run says "not measured" and why (prlimit --as caps
address space, not memory, and means nothing for LibTorch).
Prints a Markdown table and writes the JSON (--json).
"""
import argparse
import json
import os
import pathlib
import socket as socketlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree(pid):
    """pid and its descendants (loadgen forks its clients)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in open(f"/proc/{p}/task/{t}/children").read().split()]
        except OSError:
            pass
    return out


def watch(procs, roots):
    """Waits for `procs`; returns the peak of the summed RSS of `roots`' trees, KiB."""
    peak = 0
    while any(p.poll() is None for p in procs):
        peak = max(peak, sum(rss_kib(q) for r in roots for q in tree(r)))
        time.sleep(0.1)
    return peak


def parse_size(text):
    units = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    num = text.rstrip("KMGiB")
    unit = text[len(num):]
    if unit not in units:
        raise argparse.ArgumentTypeError(f"--cap {text}: use bytes or KiB/MiB/GiB")
    return int(float(num) * units[unit])


class MemoryCap:
    """A new memory cgroup under this process's own, capped at `limit` bytes; processes started
    with preexec_fn=cap.enter run inside it. v2 where possible, else v1."""

    def __init__(self, limit, name):
        self.limit, self.dir, self.v2 = limit, None, False
        own = {}
        for line in open("/proc/self/cgroup").read().splitlines():
            num, ctrls, path = line.split(":", 2)
            if num == "0" and not ctrls:
                own["v2"] = path
            if "memory" in ctrls.split(","):
                own["v1"] = path
        tries = []
        if "v2" in own:
            base = pathlib.Path("/sys/fs/cgroup") / own["v2"].lstrip("/")
            sub = base / "cgroup.subtree_control"  # the memory controller delegated to children
            if sub.exists() and "memory" in sub.read_text().split():
                tries.append((base / name, "memory.max", True))
        if "v1" in own:
            tries.append((pathlib.Path("/sys/fs/cgroup/memory") / own["v1"].lstrip("/") / name, "memory.limit_in_bytes", False))
        self.why = "no memory cgroup controller for this process"
        for d, limit_file, v2 in tries:
            try:
                d.mkdir()
                (d / limit_file).write_text(str(limit))
                self.dir, self.v2 = d, v2
                return
            except OSError as e:
                self.why = f"cannot make {d}: {e.strerror}"

    def enter(self):
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def oom_kills(self):
        f = self.dir / ("memory.events" if self.v2 else "memory.oom_control")
        for line in f.read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return None

    def close(self):
        for _ in range(50):  # the processes' exit is seen a moment after wait()
            try:
                self.dir.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def run_inprocess(a, n, tmp, cap=None):
    cmd = [str(a.build / "bench/inprocess"), "--models-dir", str(a.models), "--photos", str(a.photos),
           "--jobs", str(a.jobs), "--simple", "--max-side", "640"]
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd + ["--offset", str(c)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              preexec_fn=cap.enter if cap else None)
             for c in range(n)]
    peak = watch(procs, [p.pid for p in procs])
    wall = time.monotonic() - t0
    ms, ok, failed = [], 0, 0
    for p in procs:
        out = p.stdout.read().strip().splitlines()
        if p.returncode not in (0, 1) or not out:
            failed += a.jobs
            continue
        r = json.loads(out[-1])
        ms += [m for m, s in zip(r["ms"], r["states"]) if s == "SUCCEEDED"]
        ok += r["states"].count("SUCCEEDED")
        failed += r["states"].count("FAILED")
    return {"peak_rss_mib": peak / 1024, "wall_s": wall, "jobs_done": ok, "jobs_failed": failed,
            "jobs_per_s": ok / wall, "median_ms": statistics.median(ms) if ms else None,
            "killed": sum(p.returncode < 0 for p in procs)}


def run_daemon(a, n, tmp, cap=None):
    sock = tmp / f"f{n}.sock"
    enter = cap.enter if cap else None
    d = subprocess.Popen([str(a.build / "daemon/fusiond"), "--socket", str(sock), "--device", "cpu",
                          "--models-dir", str(a.models), "--manifest", str(ROOT / "models/manifest.json"),
                          "--state-dir", str(tmp / f"state{n}"), "--device-memory-limit", "2GiB",
                          "--max-concurrent-jobs", str(min(n, 4))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=enter)
    for _ in range(100):
        if subprocess.run([str(a.build / "client/fusionctl"), "--socket", str(sock), "health"],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    out = tmp / f"lg{n}.json"
    t0 = time.monotonic()
    lg = subprocess.Popen([str(a.build / "bench/loadgen"), "--socket", str(sock), "--photos", str(a.photos),
                           "--clients", str(n), "--jobs", str(a.jobs), "--mix", "simple", "--daemon-pid", str(d.pid),
                           "--json", str(out), "--max-seconds", str(a.max_seconds)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=enter)
    peak = watch([lg], [d.pid, lg.pid])
    wall = time.monotonic() - t0
    killed = d.poll() is not None and d.returncode < 0  # the OOM killer's SIGKILL under a cap
    d.terminate()
    d.wait()
    if not out.exists():  # loadgen itself killed
        return {"peak_rss_mib": peak / 1024, "wall_s": wall, "jobs_done": 0, "jobs_failed": n * a.jobs,
                "jobs_per_s": 0, "median_ms": None, "daemon_vmhwm_mib": None, "peak_device_tier_mib": 0,
                "queue_wait_p50_ms": None, "killed": int(killed) + 1}
    r = json.loads(out.read_text())
    ms = [j["latency_ms"] for j in r["jobs"] if j.get("state") == "SUCCEEDED"]
    return {"peak_rss_mib": peak / 1024, "wall_s": wall, "jobs_done": r["jobs_done"],
            "jobs_failed": n * a.jobs - r["jobs_done"], "jobs_per_s": r["jobs_done"] / wall,
            "median_ms": statistics.median(ms) if ms else None, "daemon_vmhwm_mib": r["daemon_vmhwm_kib"] / 1024,
            "peak_device_tier_mib": r["peak_device_bytes"] / 1048576,
            "queue_wait_p50_ms": r["queue_wait_ms"]["p50"], "killed": int(killed)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    ap.add_argument("--n", default="1,2,4")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--photos", type=pathlib.Path)
    ap.add_argument("--models", type=pathlib.Path)
    ap.add_argument("--json", type=pathlib.Path)
    ap.add_argument("--cap", type=parse_size, help="run every way under this memory cap (cgroup), e.g. 1280MiB")
    a = ap.parse_args()
    a.build = a.build.resolve()
    a.models = a.models or a.build / "fetched/models"
    rows = []
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        if a.photos is None:  # the six group photos (not the 11-MP mosaic)
            a.photos = tmp / "photos"
            a.photos.mkdir()
            for i in range(1, 7):
                (a.photos / f"sample{i}.jpg").symlink_to(a.build / f"fetched/testdata/faces/sample{i}.jpg")
        for k, n in enumerate(int(x) for x in a.n.split(",")):
            ways = [("inprocess", run_inprocess), ("fusiond", run_daemon)]
            if k % 2:
                ways.reverse()
            row = {"n": n}
            for name, fn in ways:
                cap = MemoryCap(a.cap, f"status_quo.{os.getpid()}.{name}{n}") if a.cap else None
                if cap and not cap.dir:
                    print(f"under one memory cap: not measured ({cap.why})")
                    return 1
                row[name] = fn(a, n, tmp, cap)
                if cap:
                    row[name]["oom_kills"] = cap.oom_kills()
                    cap.close()
                print(f"N={n} {name}: {json.dumps(row[name])}", file=sys.stderr, flush=True)
            rows.append(row)
    one = rows[0] if rows and rows[0]["n"] == 1 else None
    overhead = (one["inprocess"]["median_ms"] / one["fusiond"]["median_ms"]
                if one and one["inprocess"]["median_ms"] and one["fusiond"]["median_ms"] else None)
    if a.cap:
        print(f"Under one memory cap of {a.cap} bytes ({a.cap / 1048576:.0f} MiB) per way:\n")
    print("| N tools | total RSS in-process | total RSS fusiond | memory ratio | jobs/s in-process | "
          "jobs/s fusiond | median ms in-process | median ms fusiond | failures in-process / fusiond |"
          + (" OOM kills in-process / fusiond |" if a.cap else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if a.cap else ""))
    for r in rows:
        i, d = r["inprocess"], r["fusiond"]
        print(f"| {r['n']} | {i['peak_rss_mib']:.0f} MiB | {d['peak_rss_mib']:.0f} MiB | "
              f"{i['peak_rss_mib'] / d['peak_rss_mib']:.2f}x | {i['jobs_per_s']:.3f} | {d['jobs_per_s']:.3f} | "
              f"{i['median_ms'] or 0:.0f} | {d['median_ms'] or 0:.0f} | {i['jobs_failed']} / {d['jobs_failed']} |"
              + (f" {i['oom_kills']} / {d['oom_kills']} |" if a.cap else ""))
    print(f"\nfusiond device tier peak (MiB) by N: "
          + ", ".join(f"{r['n']}: {r['fusiond']['peak_device_tier_mib']:.0f}" for r in rows))
    print(f"daemon overhead (in-process median ms / daemon median ms, N=1): "
          + (f"{overhead:.3f}" if overhead else "not measured"))
    if not a.cap:
        print("under one memory cap: run again with --cap SIZE")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "overhead": overhead, "cap": a.cap}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
