#!/usr/bin/env python3
"""Renders a memory timeline as SVG or PNG with gnuplot: fusiond's own (GET /timeline on its
metrics endpoint, memory_timeline.h), the states `fusionctl mem --watch --json` prints (one per
line; redirect them to a file), or loadgen's sampled one (loadgen --timeline T.jsonl).

  bench/plot_timeline.py T.jsonl OUT.svg|OUT.png [--title TEXT]

The picture: device-tier bytes per model as stacked areas (a model counts while its tier is
"device"), the stages' reserved working sets stacked on top, the device budget as a line,
and marks where the eviction counter rose (|) and where an OOM was recovered by the ladder (x).
Time in seconds from loadgen's start, bytes in MiB. gnuplot from Debian (gnuplot-nox, in
scripts/setup-test.sh).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

MIB = 1048576.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("out")
    ap.add_argument("--title", default="fusiond device tier during a loadgen run")
    a = ap.parse_args()
    rows = [json.loads(x) for x in open(a.timeline) if x.strip()]
    if not rows:
        print(f"plot_timeline: {a.timeline} has no samples", file=sys.stderr)
        return 2
    if isinstance(rows[0].get("device"), dict):  # `fusionctl mem --watch --json`: full states
        rows = [{"unix_ms": r["unix_ms"], "device_budget": r["device"]["budget_bytes"],
                 "device_used": r["device"]["used_bytes"], "device_reserved": r["device"]["reserved_bytes"],
                 "evictions": r["counters"]["evictions"],
                 "oom_recovered": sum(v for k, v in r["counters"].get("oom_recovered", {}).items() if k != "failed"),
                 "models": {m["name"]: {"tier": m["tier"], "bytes": m["bytes"]} for m in r["models"]}} for r in rows]
    if "t_ms" not in rows[0]:  # the daemon's GET /timeline: unix_ms, from its first sample
        for r in rows:
            r["t_ms"] = r["unix_ms"] - rows[0]["unix_ms"]
    names = sorted({m for r in rows for m, v in r["models"].items() if v["tier"] == "device"})
    with tempfile.TemporaryDirectory() as t:
        data = pathlib.Path(t) / "d.dat"
        marks = pathlib.Path(t) / "m.dat"
        with open(data, "w") as f, open(marks, "w") as g:
            prev_ev, prev_oom = rows[0].get("evictions", 0), rows[0].get("oom_recovered", 0)
            for r in rows:
                acc, cols = 0.0, []
                for n in names:
                    m = r["models"].get(n, {})
                    acc += m.get("bytes", 0) / MIB if m.get("tier") == "device" else 0
                    cols.append(acc)
                cols.append(acc + r["device_reserved"] / MIB)
                f.write(f"{r['t_ms'] / 1000:.2f} {r['device_budget'] / MIB:.1f} " + " ".join(f"{c:.2f}" for c in cols) + "\n")
                if r.get("evictions", 0) > prev_ev:
                    g.write(f"{r['t_ms'] / 1000:.2f} {acc:.2f} 1\n")
                if r.get("oom_recovered", 0) > prev_oom:
                    g.write(f"{r['t_ms'] / 1000:.2f} {acc:.2f} 2\n")
                prev_ev, prev_oom = r.get("evictions", 0), r.get("oom_recovered", 0)
        top = max(max(float(x) for x in line.split()[2:]) for line in open(data))
        budget = max(float(line.split()[1]) for line in open(data))
        term = "svg size 900,420 dynamic" if a.out.endswith(".svg") else "png size 900,420"
        plots = []
        for i in range(len(names), -1, -1):  # draw the tallest cumulative first
            label = "working sets (reserved)" if i == len(names) else names[i]
            plots.append(f"'{data}' using 1:{i + 3} with filledcurves x1 title '{label}'")
        plots.append(f"'{data}' using 1:2 with lines lw 2 lc rgb 'black' title 'device budget'")
        plots.append(f"'{marks}' using 1:($3==1?$2:1/0) with points pt 9 ps 1 lc rgb 'red' title 'eviction'")
        plots.append(f"'{marks}' using 1:($3==2?$2:1/0) with points pt 2 ps 2 lc rgb 'black' title 'OOM recovered'")
        script = "\n".join([
            f"set terminal {term}", f"set output '{a.out}'", f"set title '{a.title}' noenhanced",
            "set xlabel 'seconds'", "set ylabel 'MiB'", "set key outside right top noenhanced",
            f"set yrange [0:{max(top * 1.3, 1):.1f}]",
            f"set label 1 sprintf('budget %.0f MiB', {budget}) at graph 0.02, graph 0.95" if budget > top * 1.3 else "",
            "set style fill transparent solid 0.6 noborder", "plot " + ", \\\n  ".join(plots)])
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode != 0:
            print(f"plot_timeline: gnuplot failed: {r.stderr}", file=sys.stderr)
            return 1
    print(f"plot_timeline: {len(rows)} samples, {len(names)} models on the device -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
