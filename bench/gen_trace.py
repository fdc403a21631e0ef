#!/usr/bin/env python3
"""Seeded residency trace generator: writes a JSON Lines trace for bench/residency_trace
and prints the trace's three device budgets as JSON on stdout.

  gen_trace.py --kind single|three|bursty --seed N --out FILE

Models are FaceFusion-sized. Working sets scale with a per-job image-size factor. Budgets lie
between the largest single stage (model + working set, so no stage is refused) and the trace's
total model bytes plus its largest working set (so every policy must evict).
"""
import argparse
import json
import random

MODELS = {  # bytes, as FaceFusion ships them
    "inswapper_128": 554_253_681,
    "gfpgan_1.4": 340_300_000,
    "arcface": 174_400_000,
    "retinaface": 16_900_000,
    "2dfan4": 93_000_000,
    "real_esrgan_x4": 67_000_000,
}
WORKING = {  # activation bytes at image-size factor 1.0
    "retinaface": 120_000_000,
    "2dfan4": 40_000_000,
    "arcface": 30_000_000,
    "inswapper_128": 180_000_000,
    "gfpgan_1.4": 400_000_000,
    "real_esrgan_x4": 700_000_000,
}
SWAP = ["retinaface", "2dfan4", "arcface", "inswapper_128"]
PIPELINES = {
    "swap": SWAP,
    "swap+enhance": SWAP + ["gfpgan_1.4"],
    "detect": ["retinaface"],
    "swap+upscale": SWAP + ["real_esrgan_x4"],
    "enhance": ["retinaface", "2dfan4", "gfpgan_1.4"],
    "upscale": ["real_esrgan_x4"],
}


def job(rng, t, client, n, pipeline):
    scale = rng.choice([0.5, 0.75, 1.0, 1.25, 1.5])
    stages = [{"model": m, "working_bytes": int(WORKING[m] * scale)} for m in PIPELINES[pipeline]]
    return {"t": t, "client": client, "job": f"{client}-{n}", "stages": stages}


def single(rng):
    return [job(rng, i * 4 + rng.randint(0, 3), "batch", i, "swap+enhance") for i in range(40)]


def three(rng):
    jobs = []
    for client, pipeline, period, count in [("webui", "swap+enhance", 11, 25),
                                            ("editor", "swap", 7, 35), ("scanner", "detect", 3, 60)]:
        t = rng.randint(0, period)
        for i in range(count):
            jobs.append(job(rng, t, client, i, pipeline))
            t += period + rng.randint(-2, 2)
    return jobs


def bursty(rng):
    jobs = []
    names = list(PIPELINES)
    for c in range(8):
        pipeline = names[c % len(names)] if c < len(names) else rng.choice(names)
        for burst in range(3):
            t = rng.randint(0, 300)
            for i in range(rng.randint(2, 6)):
                jobs.append(job(rng, t + i, f"client{c}", burst * 10 + i, pipeline))
    return jobs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", required=True, choices=["single", "three", "bursty"])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    jobs = {"single": single, "three": three, "bursty": bursty}[a.kind](rng)
    jobs.sort(key=lambda j: (j["t"], j["client"], j["job"]))  # arrival order
    used = sorted({s["model"] for j in jobs for s in j["stages"]})
    lo = max(MODELS[s["model"]] + s["working_bytes"] for j in jobs for s in j["stages"])
    hi = sum(MODELS[m] for m in used) + max(s["working_bytes"] for j in jobs for s in j["stages"])
    mib = 1 << 20
    budgets = [(lo + (hi - lo) * f // 10) // mib * mib for f in (1, 4, 7)]
    with open(a.out, "w") as f:
        f.write(json.dumps({"models": [{"name": m, "bytes": MODELS[m], "pinned": False}
                                       for m in used]}) + "\n")
        for j in jobs:
            f.write(json.dumps(j) + "\n")
    print(json.dumps({"budgets": budgets, "total_model_bytes": sum(MODELS[m] for m in used)}))


if __name__ == "__main__":
    main()
