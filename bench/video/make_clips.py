#!/usr/bin/python3
"""Test clips with ground truth for the video face-swap benchmark (not a test: it writes files).

Renders short clips from the bundled photos with OpenCV (affine warps of group photos, portrait
faces cut out with a soft elliptical mask moving over a blurred background) and encodes them with
the ffmpeg CLI (libx264 yuv420p crf 18, -threads 1, plus a 48 kHz AAC sine track). The ground
truth comes from how each frame is made: the photos' face boxes (hand-checked constants:
tests/data/faces/ground_truth.json for the group photos, PORTRAITS below for the portraits) are
moved with the same warp that renders the frame.

usage: /usr/bin/python3 bench/video/make_clips.py OUTDIR [--quick] [--only CLIP,...] [--draw]
  --quick  only zoom720 and cross720, 2 s each
  --draw   also write OUTDIR/<clip>_f<index>.png: a few frames with their truth boxes drawn
Writes OUTDIR/<clip>.mp4 and OUTDIR/<clip>.json:
  {"fps", "width", "height", "frames": N, "cuts": [first frame of each hard cut],
   "faces": [{"id": "...", "frames": {"<index>": [x, y, w, h], ...}}], "about": "..."}
A face is in a frame's truth when at least MIN_VISIBLE of its box is inside the frame and not
covered by a face layer in front of it; the box is then clipped to the frame.
Prints one line per clip (frames, faces, cut frames). Needs /usr/bin/python3 (cv2, numpy), ffmpeg.
"""
import argparse
import json
import os
import subprocess
import sys

import cv2
import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
PHOTOS = os.path.join(ROOT, 'third_party', 'testdata', 'faces')
PORTRAIT_DIR = os.path.join(ROOT, 'tests', 'data', 'faces')
MIN_VISIBLE = 0.5

# Portraits: face box [x, y, w, h] (brow/forehead to chin, as the group photos' truth), and the
# ellipse (centre, semi-axes) cut out with a soft edge: the head with some hair.
PORTRAITS = {
    'grace': dict(file='grace_hopper_512x600.jpg', box=(165, 125, 200, 195),
                  ellipse=((265, 225), (150, 190))),
    'eileen': dict(file='astronaut_eileen_collins_512.png', box=(163.5, 75.8, 115.4, 110.5),
                   ellipse=((221, 120), (95, 120))),
}


def lerp(a, b, u):
    return a + (b - a) * u


def smooth(u):  # ease in/out, 0..1 -> 0..1
    return u * u * (3 - 2 * u)


def photo(n):
    """sample<n>.jpg and its face boxes from the hand-checked truth of tests/data/faces."""
    img = cv2.imread(os.path.join(PHOTOS, 'sample%d.jpg' % n))
    with open(os.path.join(PORTRAIT_DIR, 'ground_truth.json')) as f:
        truth = json.load(f)['images']['faceapi_group_sample%d.jpg' % n]
    return img, [tuple(b) for b in truth['faces']]


def view_matrix(cx, cy, scale, w, h, degrees=0.0):
    """Affine map photo -> output: photo point (cx, cy) to the output's centre, zoom, rotation."""
    m = cv2.getRotationMatrix2D((cx, cy), degrees, scale)
    m[0, 2] += w / 2 - cx
    m[1, 2] += h / 2 - cy
    return m


def map_box(m, box):
    """A face box through an affine map: its centre is mapped, its size scaled (rotations are
    small: the face box stays upright)."""
    x, y, w, h = box
    c = m @ np.array([x + w / 2, y + h / 2, 1.0])
    s = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    return (c[0] - w * s / 2, c[1] - h * s / 2, w * s, h * s)


def clip_box(box, w, h):
    x, y, bw, bh = box
    x0, y0, x1, y1 = max(0.0, x), max(0.0, y), min(float(w), x + bw), min(float(h), y + bh)
    return (x0, y0, x1 - x0, y1 - y0) if x1 > x0 and y1 > y0 else None


class Frame:
    """One output frame being composed back to front; `owner` says which layer shows where."""

    def __init__(self, w, h):
        self.w, self.h = w, h
        self.img = np.zeros((h, w, 3), np.float32)
        self.owner = np.zeros((h, w), np.int16)
        self.layers = 0
        self.faces = []  # (id, box, layer)

    def add(self, rgb, alpha, faces):
        self.layers += 1
        a = alpha[..., None]
        self.img = self.img * (1 - a) + rgb.astype(np.float32) * a
        self.owner[alpha > 0.5] = self.layers
        self.faces += [(fid, box, self.layers) for fid, box in faces]

    def truth(self):
        """{id: box clipped to the frame} for the faces at least MIN_VISIBLE visible."""
        out = {}
        for fid, box, layer in self.faces:
            x, y, bw, bh = box
            c = clip_box(box, self.w, self.h)
            if c is None:
                continue
            x0, y0 = int(round(c[0])), int(round(c[1]))
            x1, y1 = int(round(c[0] + c[2])), int(round(c[1] + c[3]))
            shown = np.count_nonzero(self.owner[y0:y1, x0:x1] == layer)
            if shown >= MIN_VISIBLE * bw * bh:
                out[fid] = c
        return out

    def bgr(self):
        return np.clip(self.img + 0.5, 0, 255).astype(np.uint8)


def add_photo(fr, img, boxes, m, tag):
    """The whole photo warped by m as a layer; its faces named tag#k."""
    rgb = cv2.warpAffine(img, m, (fr.w, fr.h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    fr.add(rgb, np.ones((fr.h, fr.w), np.float32), [('%s#%d' % (tag, k), map_box(m, b)) for k, b in enumerate(boxes)])


class Cutout:
    """A head cut out of a photo with a soft elliptical mask, placed by face centre and scale."""

    def __init__(self, fid, img, box, ellipse):
        (ex, ey), (ax, ay) = ellipse
        pad = 8
        x0, y0 = max(0, ex - ax - pad), max(0, ey - ay - pad)
        x1, y1 = min(img.shape[1], ex + ax + pad), min(img.shape[0], ey + ay + pad)
        self.rgb = img[y0:y1, x0:x1]
        mask = np.zeros(self.rgb.shape[:2], np.float32)
        cv2.ellipse(mask, (ex - x0, ey - y0), (ax - pad, ay - pad), 0, 0, 360, 1.0, -1)
        self.alpha = cv2.GaussianBlur(mask, (0, 0), pad)
        self.box = (box[0] - x0, box[1] - y0, box[2], box[3])
        self.fid = fid

    @staticmethod
    def portrait(name):
        p = PORTRAITS[name]
        return Cutout(name, cv2.imread(os.path.join(PORTRAIT_DIR, p['file'])), p['box'], p['ellipse'])

    def draw(self, fr, fx, fy, scale):
        """Onto fr with the face box's centre at (fx, fy), the face `scale` times its size."""
        x, y, w, h = self.box
        m = np.array([[scale, 0, fx - scale * (x + w / 2)], [0, scale, fy - scale * (y + h / 2)]])
        rgb = cv2.warpAffine(self.rgb, m, (fr.w, fr.h), flags=cv2.INTER_LINEAR)
        alpha = cv2.warpAffine(self.alpha, m, (fr.w, fr.h), flags=cv2.INTER_LINEAR)
        fr.add(rgb, alpha, [(self.fid, map_box(m, self.box))])


def background(w, h):
    """A blurred, face-free part of sample3 (the couch below the faces), w x h."""
    img, _ = photo(3)
    part = img[760:760 + 600, 100:100 + 1067]
    return cv2.GaussianBlur(cv2.resize(part, (w, h), interpolation=cv2.INTER_AREA), (0, 0), 12)


def base_frame(w, h, bg):
    fr = Frame(w, h)
    fr.add(bg, np.ones((h, w), np.float32), [])
    return fr


# ---- the clips: each a function (seconds) -> (meta, frame generator of Frame) -------------------

def zoom720(secs):
    """sample4's four faces, a slow zoom in (0.75x -> 1.0x) with a 2-degree turn."""
    w, h, fps = 1280, 720, 25
    img, boxes = photo(4)
    n = int(round(secs * fps))

    def frames():
        for t in range(n):
            u = smooth(t / (n - 1))
            m = view_matrix(lerp(900, 830, u), lerp(480, 360, u), lerp(0.75, 1.0, u), w, h, lerp(0, 2, u))
            fr = Frame(w, h)
            add_photo(fr, img, boxes, m, 'sample4')
            yield fr
    return dict(fps=fps, width=w, height=h, frames=n, cuts=[],
                about='sample4 (4 faces), zoom 0.75x->1.0x and a 2-degree turn; all faces in all frames'), frames


def pan1080(secs):
    """sample6 at 1.4x panned left to right (its face #1 leaves at the left, #0 enters at the
    right), then a hard cut at 5/8 of the clip to sample1's three faces, zooming 1.2x -> 1.4x."""
    w, h, fps = 1920, 1080, 30
    a, a_boxes = photo(6)
    b, b_boxes = photo(1)
    n = int(round(secs * fps))
    cut = int(round(n * 5 / 8))

    def frames():
        for t in range(n):
            fr = Frame(w, h)
            if t < cut:
                u = t / (cut - 1)
                add_photo(fr, a, a_boxes, view_matrix(lerp(686, 1234, u), 556, 1.4, w, h), 'sample6')
            else:
                u = smooth((t - cut) / max(1, n - 1 - cut))
                add_photo(fr, b, b_boxes, view_matrix(1036, 460, lerp(1.2, 1.4, u), w, h), 'sample1')
            yield fr
    return dict(fps=fps, width=w, height=h, frames=n, cuts=[cut],
                about='sample6 panned at 1.4x (face sample6#1 leaves left, sample6#0 enters right), '
                      'hard cut at frame %d to sample1 zooming 1.2x->1.4x on its 3 faces' % cut), frames


def cross720(secs):
    """grace (behind, upper) moving right and eileen (in front, lower) moving left: they cross
    mid-clip, eileen's head covering the lower part of grace's face."""
    w, h, fps = 1280, 720, 30
    bg = background(w, h)
    grace, eileen = Cutout.portrait('grace'), Cutout.portrait('eileen')
    n = int(round(secs * fps))

    def frames():
        for t in range(n):
            u = t / (n - 1)
            fr = base_frame(w, h, bg)
            grace.draw(fr, lerp(220, 1060, u), 250 + 15 * np.sin(2 * np.pi * u), 0.9)
            eileen.draw(fr, lerp(1060, 220, u), 470, 1.6)
            yield fr
    return dict(fps=fps, width=w, height=h, frames=n, cuts=[],
                about='grace (face ~180 px) left->right behind eileen (face ~185 px) right->left; '
                      'they cross mid-clip, grace partly covered'), frames


def enter720(secs):
    """grace still for the first third, then leaving at the right edge; sample3's middle face
    entering from the left edge from half the clip on."""
    w, h, fps = 1280, 720, 30
    bg = background(w, h)
    grace = Cutout.portrait('grace')
    img, boxes = photo(3)
    (x, y, bw, bh) = boxes[1]
    other = Cutout('sample3#1', img, boxes[1], ((int(x + bw / 2), int(y + bh / 2 - 10)), (int(bw * 0.62), int(bh * 0.8))))
    n = int(round(secs * fps))
    t_leave, t_enter = n // 3, n // 2

    def frames():
        for t in range(n):
            fr = base_frame(w, h, bg)
            gx = 850 + max(0, t - t_leave) * (1400 - 850) / (n - 1 - t_leave)
            grace.draw(fr, gx, 330, 0.9)
            if t >= t_enter:
                other.draw(fr, -130 + (t - t_enter) * 8.0 * 30 / fps, 420, 0.65)
            yield fr
    return dict(fps=fps, width=w, height=h, frames=n, cuts=[],
                about='grace (face ~180 px) still until frame %d, then leaving at the right edge; '
                      'sample3#1 (face ~195 px) entering from the left edge from frame %d' % (t_leave, t_enter)), frames


def single1080(secs):
    """grace alone, face ~300 px, panning slowly right with a slight bob."""
    w, h, fps = 1920, 1080, 30
    bg = background(w, h)
    grace = Cutout.portrait('grace')
    n = int(round(secs * fps))

    def frames():
        for t in range(n):
            u = t / (n - 1)
            fr = base_frame(w, h, bg)
            grace.draw(fr, lerp(700, 1000, u), 500 + 20 * np.sin(2 * np.pi * u), 1.5)
            yield fr
    return dict(fps=fps, width=w, height=h, frames=n, cuts=[],
                about='grace (face ~300 px) panning slowly right, in all frames'), frames


CLIPS = {'zoom720': (zoom720, 3), 'pan1080': (pan1080, 4), 'cross720': (cross720, 3),
         'enter720': (enter720, 3), 'single1080': (single1080, 3)}
QUICK = {'zoom720': 2, 'cross720': 2}


# ---- encoding and truth -----------------------------------------------------------------------

def encoder(path, meta):
    """An ffmpeg process reading raw BGR frames on stdin; a sine for the audio track."""
    secs = meta['frames'] / meta['fps']
    cmd = ['ffmpeg', '-hide_banner', '-loglevel', 'error', '-y', '-threads', '1',
           '-f', 'rawvideo', '-pix_fmt', 'bgr24', '-s', '%dx%d' % (meta['width'], meta['height']),
           '-r', str(meta['fps']), '-i', '-',
           '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=%.3f' % secs,
           '-map', '0:v', '-map', '1:a', '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '18',
           '-pix_fmt', 'yuv420p', '-threads', '1', '-filter_threads', '1',
           '-c:a', 'aac', '-b:a', '96k', '-movflags', '+faststart', path]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE)


def draw_truth(img, truth):
    out = img.copy()
    for fid, (x, y, w, h) in truth.items():
        cv2.rectangle(out, (int(x), int(y)), (int(x + w), int(y + h)), (0, 255, 0), 3)
        cv2.putText(out, fid, (int(x), max(20, int(y) - 8)), cv2.FONT_HERSHEY_SIMPLEX, 0.9, (0, 255, 255), 2)
    return out


def make(outdir, name, secs, draw):
    meta, frames = CLIPS[name][0](secs)
    faces = {}
    n = meta['frames']
    drawn = {0, n // 4, n // 2, 3 * n // 4, n - 1} | {c for c in meta['cuts']} if draw else set()
    enc = encoder(os.path.join(outdir, name + '.mp4'), meta)
    for t, fr in enumerate(frames()):
        img, truth = fr.bgr(), fr.truth()
        enc.stdin.write(img.tobytes())
        for fid, box in truth.items():
            faces.setdefault(fid, {})[str(t)] = [round(v, 1) for v in box]
        if t in drawn:
            cv2.imwrite(os.path.join(outdir, '%s_f%03d.png' % (name, t)), draw_truth(img, truth))
    enc.stdin.close()
    if enc.wait() != 0:
        sys.exit('ffmpeg failed for ' + name)
    meta['faces'] = [{'id': fid, 'frames': fr} for fid, fr in faces.items()]
    with open(os.path.join(outdir, name + '.json'), 'w') as f:
        json.dump(meta, f, indent=1)
    spans = ', '.join('%s %d frames (%s..%s)' % (f['id'], len(f['frames']), min(map(int, f['frames'])),
                                                 max(map(int, f['frames']))) for f in meta['faces'])
    print('%s: %dx%d %d fps, %d frames, cuts %s; %s' % (name, meta['width'], meta['height'], meta['fps'], n,
                                                        meta['cuts'] or 'none', spans))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('outdir')
    ap.add_argument('--quick', action='store_true', help='only zoom720 and cross720, 2 s each')
    ap.add_argument('--only', help='comma-separated clip names')
    ap.add_argument('--draw', action='store_true', help='write a few frames with truth boxes as PNG')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    os.makedirs(args.outdir, exist_ok=True)
    plan = dict(QUICK) if args.quick else {k: v[1] for k, v in CLIPS.items()}
    if args.only:
        plan = {k: plan.get(k, CLIPS[k][1]) for k in args.only.split(',')}
    for name, secs in plan.items():
        make(args.outdir, name, secs, args.draw)


if __name__ == '__main__':
    main()
