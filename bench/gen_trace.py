#!/usr/bin/env python3
"""Seeded residency trace generator: writes a JSON Lines trace for bench/residency_trace
and prints the trace's three device budgets as JSON on stdout.

  gen_trace.py --kind single|three|bursty|shared|idle|wide --seed N --out FILE

Models are FaceFusion-sized (10-600 MB). Working sets scale with a per-job image-size factor.
Budgets lie between the largest single stage (model + working set, so no stage is refused) and
the trace's total model bytes plus its largest working set (so every policy must evict).
Kinds: single (one client, swap+enhance), three (three clients at steady periods), bursty
(eight clients, bursts of 2-6 jobs); shared (pipelines that share detection, landmarks,
recognition and masking but differ in swapper and enhancer: 11 models, bursts), idle (bursts
separated by idle gaps long enough for the queue to drain, so each burst is unseen until it
arrives), wide (14 models: more than the planner's exact window holds at once).
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
    "yoloface_8n": 12_600_000,
    "xseg_1": 70_200_000,
    "bisenet_resnet_34": 93_400_000,
    "codeformer": 376_600_000,
    "ghost_2_256": 515_000_000,
    "simswap_256": 219_900_000,
    "gpen_bfr_512": 284_300_000,
    "hyperswap_1a_256": 402_700_000,
    "real_esrgan_x2": 67_000_000,
    "restoreformer_plus_plus": 297_000_000,
}
WORKING = {  # activation bytes at image-size factor 1.0
    "retinaface": 120_000_000,
    "2dfan4": 40_000_000,
    "arcface": 30_000_000,
    "inswapper_128": 180_000_000,
    "gfpgan_1.4": 400_000_000,
    "real_esrgan_x4": 700_000_000,
    "yoloface_8n": 90_000_000,
    "xseg_1": 60_000_000,
    "bisenet_resnet_34": 80_000_000,
    "codeformer": 450_000_000,
    "ghost_2_256": 200_000_000,
    "simswap_256": 160_000_000,
    "gpen_bfr_512": 380_000_000,
    "hyperswap_1a_256": 190_000_000,
    "real_esrgan_x2": 400_000_000,
    "restoreformer_plus_plus": 420_000_000,
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
FRONT = ["retinaface", "2dfan4", "arcface", "xseg_1"]  # shared by every swap below
SHARED = {
    "inswapper+gfpgan": FRONT + ["inswapper_128", "gfpgan_1.4"],
    "ghost+codeformer": FRONT + ["ghost_2_256", "codeformer"],
    "simswap+gpen": FRONT + ["simswap_256", "gpen_bfr_512"],
    "inswapper": FRONT + ["inswapper_128"],
    "ghost+gfpgan": FRONT + ["ghost_2_256", "gfpgan_1.4"],
    "restore": ["retinaface", "2dfan4", "codeformer"],
}
WIDE = {
    "hyperswap+restoreformer": ["yoloface_8n", "2dfan4", "arcface", "bisenet_resnet_34",
                                "hyperswap_1a_256", "restoreformer_plus_plus"],
    "inswapper+gfpgan": SWAP + ["gfpgan_1.4"],
    "ghost+codeformer": FRONT + ["ghost_2_256", "codeformer"],
    "simswap+gpen+x2": ["yoloface_8n", "2dfan4", "arcface", "simswap_256", "gpen_bfr_512",
                        "real_esrgan_x2"],
    "upscale": ["real_esrgan_x4"],
    "detect": ["yoloface_8n"],
}


def job(rng, t, client, n, pipeline, pipelines=PIPELINES):
    scale = rng.choice([0.5, 0.75, 1.0, 1.25, 1.5])
    stages = [{"model": m, "working_bytes": int(WORKING[m] * scale)} for m in pipelines[pipeline]]
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


def bursts(rng, pipelines, clients, count, spread, size):
    jobs = []
    names = list(pipelines)
    for c in range(clients):
        for burst in range(count):
            t = rng.randint(0, spread)
            pipeline = names[(c + burst) % len(names)] if rng.random() < 0.7 else rng.choice(names)
            for i in range(rng.randint(*size)):
                jobs.append(job(rng, t + i, f"client{c}", burst * 10 + i, pipeline, pipelines))
    return jobs


def shared(rng):
    return bursts(rng, SHARED, clients=6, count=4, spread=400, size=(1, 5))


def idle(rng):
    jobs, t = [], 0
    names = list(SHARED)
    for burst in range(12):
        for i in range(rng.randint(2, 7)):
            pipeline = rng.choice(names)
            jobs.append(job(rng, t + rng.randint(0, 3), f"client{i % 3}", burst * 10 + i,
                            pipeline, SHARED))
        t += 60 + rng.randint(0, 60)  # longer than a burst takes: the queue drains
    return jobs


def wide(rng):
    return bursts(rng, WIDE, clients=6, count=4, spread=400, size=(1, 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", required=True, choices=["single", "three", "bursty", "shared", "idle", "wide"])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    jobs = {"single": single, "three": three, "bursty": bursty, "shared": shared, "idle": idle,
            "wide": wide}[a.kind](rng)
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
