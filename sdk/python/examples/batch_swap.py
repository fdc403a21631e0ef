#!/usr/bin/env python3
"""Swaps one source face into every image of a folder through fusiond, one progress line per
job. All jobs are submitted first (fusiond queues them fairly and runs as many at once as it
has room for), then each result is saved as it finishes.

  python batch_swap.py --source me.png --out swapped/ photos/ [--enhance x2] [--simple]

Exit status: 0 when every job succeeded, 1 when any failed (each failure is printed), 2 when
fusiond cannot be reached. The socket: --socket, else $FUSIOND_SOCKET, else
/run/fusiond/fusiond.sock.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import fusiond

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp")


def main() -> int:
    ap = argparse.ArgumentParser(description="swap one face into a folder of images through fusiond")
    ap.add_argument("targets", help="folder of target images")
    ap.add_argument("--source", required=True, help="image with the face to use")
    ap.add_argument("--out", required=True, help="folder for the results (made if missing)")
    ap.add_argument("--socket", help="fusiond socket")
    ap.add_argument("--enhance", choices=["x2", "x4"], help="face super-resolution")
    ap.add_argument("--simple", action="store_true", help="feathered blending (faster)")
    a = ap.parse_args()
    names = sorted(n for n in os.listdir(a.targets) if n.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        print(f"no images in {a.targets}", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    source = open(a.source, "rb").read()  # read once, sent with every job
    failed = 0
    try:
        with fusiond.Client(a.socket, timeout=30) as client:
            jobs = []
            for name in names:
                try:
                    jobs.append((name, client.submit(source, os.path.join(a.targets, name),
                                                     enhance=a.enhance, simple=a.simple)))
                except fusiond.Unavailable:
                    raise
                except fusiond.Error as e:  # e.g. a file that is not an image: refused at once
                    failed += 1
                    print(f"[{len(jobs) + failed}/{len(names)}] {name}: {e}")
            for i, (name, job) in enumerate(jobs, 1):
                start = time.monotonic()
                out = os.path.join(a.out, os.path.splitext(name)[0] + ".png")
                try:
                    r = job.result()
                except fusiond.Unavailable:
                    raise
                except fusiond.Error as e:
                    failed += 1
                    print(f"[{i}/{len(jobs)}] {name}: {e}")
                    continue
                r.save(out)
                ms = sum(s.ms for s in r.stages)
                print(f"[{i}/{len(jobs)}] {name}: {r.faces_swapped} face(s), {ms:.0f} ms of stages, "
                      f"waited {time.monotonic() - start:.1f} s -> {out}")
    except fusiond.Unavailable as e:
        print(f"batch_swap: {e.message}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
