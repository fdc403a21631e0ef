#!/usr/bin/env python3
"""Replay traces of scripts/gpu-check-loadgen.sh's load (docs/PERFORMANCE.md, "In the daemon").

Writes OUTDIR/lg<J>-<order>.jsonl (bench/trace_replay.h's format) for J = 1 and 2 jobs per
client and each of the 24 arrival orders of the four clients (mix small, enhance2, small,
enhance4): the models at the bytes fusiond measured at --scale 0.05 and each stage with the
working set the daemon's Acquire asked for (detect tiled: 36 MiB; the x4 enhance's first try:
34 MiB). Run them with build/bench/residency_trace --trace F --budget 64MiB --policy P.

  python3 bench/gen_loadgen_traces.py OUTDIR
"""
import itertools
import json
import os
import sys

MIB = 1 << 20
MODELS = [("ssd_mobilenetv1", 11314572), ("face_landmark_68", 787440), ("face_recognition", 13675328),
          ("synthetic-inswapper_128", 27714478), ("synthetic-gfpgan_1.4", 17040363),
          ("synthetic-real_esrgan_x4", 3375363)]
KINDS = ["small", "enhance2", "small", "enhance4"]


def stages(kind):
    out = [("ssd_mobilenetv1", 36 * MIB), ("face_landmark_68", 1 * MIB), ("face_recognition", 3 * MIB),
           ("synthetic-inswapper_128", 16 * MIB)]
    if kind == "enhance2":
        out.append(("synthetic-gfpgan_1.4", 16 * MIB))
    if kind == "enhance4":
        out.append(("synthetic-real_esrgan_x4", 34 * MIB))
    out.append(("face_recognition", 2 * MIB))  # score
    return out


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    header = json.dumps({"models": [{"name": n, "bytes": b, "pinned": False} for n, b in MODELS]})
    for jobs in (1, 2):
        for order in itertools.permutations(range(4)):
            lines = [header]
            for r in range(jobs):
                for c in order:
                    lines.append(json.dumps({"t": 0, "client": f"c{c}", "job": f"c{c}-{r}",
                                             "stages": [{"model": m, "working_bytes": w} for m, w in stages(KINDS[c])]}))
            with open(os.path.join(outdir, f"lg{jobs}-{''.join(map(str, order))}.jsonl"), "w") as f:
                f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
