#!/usr/bin/python3
"""A fake "swap" to check bench/video/measure.py with: not a test, writes a file.

Copies INPUT.mp4 to OUTPUT.mp4, replacing each ground-truth face box with a blurred copy of itself
shifted by a random -2..+2 px (x and y, new each frame): a face that changes every frame and jitters,
so measure.py should report a flicker ratio clearly above 1 and nearly 100% swapped. The audio is
copied. Encoded like make_clips.py (libx264 yuv420p crf 18, -threads 1).

usage: /usr/bin/python3 bench/video/fake_swap.py INPUT.mp4 GROUND_TRUTH.json OUTPUT.mp4 [--seed N] [--blur SIGMA] [--jitter PX]
Prints the frame count written.
"""
import argparse
import json
import subprocess
import sys

import cv2
import numpy as np

JITTER = 2
BLUR_SIGMA = 2.5


def paste_jittered(img, boxes, rng, sigma=BLUR_SIGMA, jitter=JITTER):
    blurred = cv2.GaussianBlur(img, (0, 0), sigma) if sigma > 0 else img
    out = img.copy()
    h, w = img.shape[:2]
    for x, y, bw, bh in boxes:
        dx, dy = (int(v) for v in rng.integers(-jitter, jitter + 1, 2))
        x0, y0 = max(0, int(x), -dx), max(0, int(y), -dy)
        x1, y1 = min(w, int(x + bw), w - dx), min(h, int(y + bh), h - dy)
        if x1 > x0 and y1 > y0:
            out[y0:y1, x0:x1] = blurred[y0 + dy:y1 + dy, x0 + dx:x1 + dx]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('input')
    ap.add_argument('truth')
    ap.add_argument('output')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--blur', type=float, default=BLUR_SIGMA, help='Gaussian sigma, px (0: none)')
    ap.add_argument('--jitter', type=int, default=JITTER, help='largest shift, px')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    truth = json.load(open(args.truth))
    rng = np.random.default_rng(args.seed)
    cmd = ['ffmpeg', '-hide_banner', '-loglevel', 'error', '-y', '-threads', '1', '-f', 'rawvideo',
           '-pix_fmt', 'bgr24', '-s', '%dx%d' % (truth['width'], truth['height']), '-r', str(truth['fps']),
           '-i', '-', '-i', args.input, '-map', '0:v', '-map', '1:a', '-c:v', 'libx264', '-preset', 'veryfast',
           '-crf', '18', '-pix_fmt', 'yuv420p', '-threads', '1', '-c:a', 'copy', args.output]
    enc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    cap = cv2.VideoCapture(args.input)
    t = 0
    while True:
        ok, img = cap.read()
        if not ok:
            break
        boxes = [f['frames'][str(t)] for f in truth['faces'] if str(t) in f['frames']]
        enc.stdin.write(paste_jittered(img, boxes, rng, args.blur, args.jitter).tobytes())
        t += 1
    enc.stdin.close()
    if enc.wait() != 0:
        sys.exit('ffmpeg failed')
    print('%d frames written to %s' % (t, args.output))


if __name__ == '__main__':
    main()
