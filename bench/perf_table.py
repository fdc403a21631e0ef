#!/usr/bin/env python3
"""Regenerates the residency table of docs/PERFORMANCE.md from the trace generator's seeds.

  perf_table.py --tool BUILD/bench/residency_trace            rewrite traces + table
  perf_table.py --tool BUILD/bench/residency_trace --check    exit 1 if either differs

Traces go to bench/traces/<kind>.jsonl; the table replaces the text between the markers
<!-- residency-table:begin --> and <!-- residency-table:end --> in docs/PERFORMANCE.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = [("single", 7), ("three", 11), ("bursty", 23)]
POLICIES = ["lru", "smallest", "lookahead", "belady", "belady-bytes"]
BEGIN, END = "<!-- residency-table:begin -->", "<!-- residency-table:end -->"


def table(tool, trace_dir):
    rows = ["| trace | budget (bytes) | policy | bytes_uploaded | loads | evictions | peak_bytes "
            "| refused | vs lru | vs best offline |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    goal_met = True
    for kind, seed in SEEDS:
        path = os.path.join(trace_dir, f"{kind}.jsonl")
        gen = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_trace.py"), "--kind",
                              kind, "--seed", str(seed), "--out", path],
                             check=True, capture_output=True, text=True)
        for budget in json.loads(gen.stdout)["budgets"]:
            res = {}
            for p in POLICIES:
                out = subprocess.run([tool, "--trace", path, "--policy", p, "--budget", str(budget)],
                                     check=True, capture_output=True, text=True)
                res[p] = json.loads(out.stdout)
            best = min(res["belady"]["bytes_uploaded"], res["belady-bytes"]["bytes_uploaded"])
            la = res["lookahead"]["bytes_uploaded"]
            goal_met &= (la < res["lru"]["bytes_uploaded"] and la < res["smallest"]["bytes_uploaded"]
                         and la <= 1.10 * best)
            for p in POLICIES:
                r = res[p]
                rows.append(f"| {kind} (seed {seed}) | {budget} | {p} | {r['bytes_uploaded']} | "
                            f"{r['loads']} | {r['evictions']} | {r['peak_bytes']} | {r['refused']} | "
                            f"{r['bytes_uploaded'] / res['lru']['bytes_uploaded']:.3f} | "
                            f"{r['bytes_uploaded'] / best:.3f} |")
    rows.append("")
    rows.append("Goal (lookahead < lru and < smallest, and <= 1.10 x min(belady, belady-bytes) on "
                f"every trace and budget): {'met' if goal_met else 'NOT met'}.")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    doc_path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
    doc = open(doc_path).read()
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    committed_traces = os.path.join(ROOT, "bench", "traces")
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = tmp if a.check else committed_traces
        new_doc = head + BEGIN + "\n" + table(a.tool, trace_dir) + END + tail
        if not a.check:
            open(doc_path, "w").write(new_doc)
            return 0
        stale = [] if new_doc == doc else ["docs/PERFORMANCE.md"]
        for kind, _ in SEEDS:
            fresh = open(os.path.join(tmp, f"{kind}.jsonl")).read()
            if fresh != open(os.path.join(committed_traces, f"{kind}.jsonl")).read():
                stale.append(f"bench/traces/{kind}.jsonl")
    if stale:
        print("stale (run bench/perf_table.py --tool <build>/bench/residency_trace): " +
              ", ".join(stale))
        return 1
    print("residency table and traces match the generator's seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
