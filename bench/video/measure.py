#!/usr/bin/python3
"""What a face swap did to a clip of bench/video/make_clips.py: compares OUTPUT with its INPUT.
Not a test: prints figures.

usage: /usr/bin/python3 bench/video/measure.py INPUT.mp4 OUTPUT.mp4 GROUND_TRUTH.json [--json]

Prints (or with --json, one JSON object with the same figures):
  frames      both files' frame counts (ffprobe packets and decoded frames); a mismatch is reported
              and the first min(n_in, n_out) frames are compared.
  flicker     flicker ratio = sum(B) / sum(A) over every pair of consecutive frames (t-1, t) and every
              face found in both frames of the INPUT (boxes with IoU >= 0.5), where A = mean |I_t - I_t-1|
              of the input (8-bit gray) inside the union of the two boxes grown by 10% of its width and
              height on each side (clipped to the frame), B = the same for the output; pairs whose
              whole-frame input mean gray difference exceeds 40 (cuts) are skipped. 1.0: the swapped
              faces change from frame to frame as much as the input's; above: the swap adds flicker.
              Given twice: with the ground-truth boxes, and with OpenCV's Haar frontal-face detector
              (haarcascade_frontalface_alt2, minNeighbors 3) on the input, a detector that is not the
              product's; Haar boxes of consecutive frames are paired by IoU >= 0.5.
              An extra figure, not that definition: the same with the ground-truth boxes after warping
              frame t-1 by the face box's motion (scale, shift) onto t, both for A and B ("moved"):
              the plain ratio is dominated by the faces' own motion when they move fast, this one
              by what changes on a face beyond its motion (pairs with a box at the frame's edge are
              left out).
  follow      follow share: of the Haar boxes found in the input frames that lie on a ground-truth face
              (IoU >= 0.3: Haar boxes are cut differently), how many have a Haar box in the same output
              frame at IoU >= 0.5. (Haar also fires on textures such as window blinds; those boxes are
              left out, as they would count as followed.) The JSON also has the share over all boxes.
  swapped     per ground-truth face: in how many of its frames the output differs from the input
              inside its box shrunk to the central 60% (mean abs gray difference > 3.0); the minimum
              share over the faces present in >= 5 frames; the face-frames swapped in all.
Needs /usr/bin/python3 (cv2, numpy) and ffprobe.
"""
import argparse
import json
import os
import subprocess
import sys

import cv2
import numpy as np

IOU_SAME = 0.5        # the same face in two frames, or a followed face
IOU_ON_FACE = 0.3     # a Haar box on a ground-truth face
GROW = 0.10           # flicker region: union box grown by this share of its size on each side
CUT_DIFF = 40.0       # whole-frame mean gray difference above which a pair is a cut
SWAP_DIFF = 3.0       # mean abs gray difference in the central box above which a face is swapped
SWAP_CORE = 0.60      # central share of the box (width and height) for the swapped test
MIN_FRAMES = 5        # faces present in fewer frames are left out of the minimum swapped share
HAAR_WIDTH = 640      # frames are scaled down to this width for the Haar detector


# ---- boxes -----------------------------------------------------------------------------------

def iou(a, b):
    ix = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    u = a[2] * a[3] + b[2] * b[3] - ix * iy
    return ix * iy / u if u > 0 else 0.0


def flicker_region(a, b, w, h):
    """Union of two boxes grown by GROW of its size on each side, clipped: (x0, y0, x1, y1) ints."""
    x0, y0 = min(a[0], b[0]), min(a[1], b[1])
    x1, y1 = max(a[0] + a[2], b[0] + b[2]), max(a[1] + a[3], b[1] + b[3])
    gx, gy = GROW * (x1 - x0), GROW * (y1 - y0)
    return (max(0, int(np.floor(x0 - gx))), max(0, int(np.floor(y0 - gy))),
            min(w, int(np.ceil(x1 + gx))), min(h, int(np.ceil(y1 + gy))))


def core(box, w, h):
    """The box shrunk to its central SWAP_CORE, clipped: (x0, y0, x1, y1) ints."""
    x, y, bw, bh = box
    m = (1 - SWAP_CORE) / 2
    return (max(0, int(round(x + m * bw))), max(0, int(round(y + m * bh))),
            min(w, int(round(x + (1 - m) * bw))), min(h, int(round(y + (1 - m) * bh))))


def mean_abs(a, b, r):
    x0, y0, x1, y1 = r
    if x1 <= x0 or y1 <= y0:
        return None
    return float(cv2.absdiff(a[y0:y1, x0:x1], b[y0:y1, x0:x1]).mean())


# ---- video -----------------------------------------------------------------------------------

def packets(path):
    """Video frame count from ffprobe (packets of the first video stream)."""
    out = subprocess.run(['ffprobe', '-v', 'error', '-select_streams', 'v:0', '-count_packets', '-show_entries',
                          'stream=nb_read_packets', '-of', 'csv=p=0', path], capture_output=True, text=True)
    try:
        return int(out.stdout.strip().split(',')[0])
    except ValueError:
        return None


def gray_frames(path):
    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        sys.exit('cannot open ' + path)
    while True:
        ok, img = cap.read()
        if not ok:
            break
        yield cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    cap.release()


def haar():
    name = 'haarcascade_frontalface_alt2.xml'
    dirs = [getattr(getattr(cv2, 'data', None), 'haarcascades', ''), '/usr/share/opencv4/haarcascades',
            '/usr/share/opencv/haarcascades', '/usr/local/share/opencv4/haarcascades']
    for d in dirs:
        if d and os.path.exists(os.path.join(d, name)):
            return cv2.CascadeClassifier(os.path.join(d, name))
    sys.exit('no ' + name + ' (install opencv-data)')


def detect(cascade, gray):
    """Haar frontal faces, [x, y, w, h] in frame pixels (found on a copy scaled to HAAR_WIDTH)."""
    s = min(1.0, HAAR_WIDTH / gray.shape[1])
    small = cv2.resize(gray, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else gray
    found = cascade.detectMultiScale(small, scaleFactor=1.1, minNeighbors=3, minSize=(24, 24))
    return [tuple(float(v) / s for v in b) for b in found]


# ---- the figures -------------------------------------------------------------------------------

def inside(box, w, h):
    x, y, bw, bh = box
    return x > 0.5 and y > 0.5 and x + bw < w - 0.5 and y + bh < h - 0.5


def moved_diff(prev, cur, a, b, r):
    """Mean |cur - prev| in region r after warping prev by the motion of box a onto box b."""
    x0, y0, x1, y1 = r
    sx, sy = b[2] / a[2], b[3] / a[3]
    m = np.array([[sx, 0, b[0] - sx * a[0] - x0], [0, sy, b[1] - sy * a[1] - y0]])
    moved = cv2.warpAffine(prev, m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return float(cv2.absdiff(cur[y0:y1, x0:x1], moved).mean())


class Flicker:
    """Sums A (input) and B (output) over consecutive-frame pairs of the same face. Compensated:
    frame t-1 is first warped by the motion of the face's box (scale and shift) onto frame t, so
    that A is what is left of the input's change once the face's motion is taken out (pairs where
    a box touches the frame's edge are left out: a clipped box does not give the motion)."""

    def __init__(self, compensated=False):
        self.compensated = compensated
        self.a = self.b = 0.0
        self.pairs = 0
        self.per_face = {}

    def add(self, fid, prev_box, box, in0, in1, out0, out1):
        h, w = in1.shape
        r = flicker_region(prev_box, box, w, h)
        if r[2] <= r[0] or r[3] <= r[1]:
            return
        if self.compensated:
            if not (inside(prev_box, w, h) and inside(box, w, h)):
                return
            a, b = moved_diff(in0, in1, prev_box, box, r), moved_diff(out0, out1, prev_box, box, r)
        else:
            a, b = mean_abs(in0, in1, r), mean_abs(out0, out1, r)
        self.a += a
        self.b += b
        self.pairs += 1
        if fid is not None:
            s = self.per_face.setdefault(fid, [0.0, 0.0])
            s[0] += a
            s[1] += b

    def ratio(self):
        return self.b / self.a if self.a > 0 else None

    def figures(self):
        f = {'ratio': self.ratio(), 'pairs': self.pairs, 'sum_a': round(self.a, 3), 'sum_b': round(self.b, 3)}
        if self.per_face:
            f['per_face'] = {k: (round(b / a, 3) if a > 0 else None) for k, (a, b) in self.per_face.items()}
        return f


def truth_at(truth, t):
    return {f['id']: f['frames'][str(t)] for f in truth['faces'] if str(t) in f['frames']}


def same_faces_by_id(prev, cur):
    """(id, prev box, box) for the truth faces in both frames with IoU >= IOU_SAME."""
    return [(k, prev[k], cur[k]) for k in cur if k in prev and iou(prev[k], cur[k]) >= IOU_SAME]


def same_faces_by_box(prev, cur):
    """(None, prev box, box): each detected box with its best match of the previous frame."""
    out = []
    for b in cur:
        best = max(prev, key=lambda p: iou(p, b), default=None)
        if best is not None and iou(best, b) >= IOU_SAME:
            out.append((None, best, b))
    return out


def measure(inp, outp, truth):
    cascade = haar()
    n_in_pk, n_out_pk = packets(inp), packets(outp)
    flick_truth, flick_haar, flick_moved = Flicker(), Flicker(), Flicker(compensated=True)
    followed = found = followed_all = found_all = cuts = t = 0
    swapped = {f['id']: [0, 0] for f in truth['faces']}
    resized = False
    prev = None  # (input gray, output gray, truth boxes, haar boxes)
    n_in = n_out = 0
    frames_out = gray_frames(outp)
    for g_in in gray_frames(inp):
        n_in += 1
        g_out = next(frames_out, None)
        if g_out is None:
            continue
        n_out += 1
        if g_out.shape != g_in.shape:
            g_out, resized = cv2.resize(g_out, (g_in.shape[1], g_in.shape[0]), interpolation=cv2.INTER_AREA), True
        h, w = g_in.shape
        boxes = truth_at(truth, t)
        det_in, det_out = detect(cascade, g_in), detect(cascade, g_out)
        hits = [any(iou(b, o) >= IOU_SAME for o in det_out) for b in det_in]
        on_face = [any(iou(b, f) >= IOU_ON_FACE for f in boxes.values()) for b in det_in]
        found_all, followed_all = found_all + len(det_in), followed_all + sum(hits)
        found += sum(on_face)
        followed += sum(h for h, f in zip(hits, on_face) if f)
        for fid, box in boxes.items():
            d = mean_abs(g_in, g_out, core(box, w, h))
            swapped[fid][1] += 1
            swapped[fid][0] += int(d is not None and d > SWAP_DIFF)
        if prev is not None:
            p_in, p_out, p_boxes, p_det = prev
            if float(cv2.absdiff(g_in, p_in).mean()) > CUT_DIFF:
                cuts += 1
            else:
                for fid, a, b in same_faces_by_id(p_boxes, boxes):
                    flick_truth.add(fid, a, b, p_in, g_in, p_out, g_out)
                    flick_moved.add(fid, a, b, p_in, g_in, p_out, g_out)
                for fid, a, b in same_faces_by_box(p_det, det_in):
                    flick_haar.add(fid, a, b, p_in, g_in, p_out, g_out)
        prev = (g_in, g_out, boxes, det_in)
        t += 1
    n_out += sum(1 for _ in frames_out)
    return report(n_in_pk, n_out_pk, n_in, n_out, t, truth, resized, cuts, flick_truth, flick_haar, flick_moved,
                  (followed, found, followed_all, found_all), swapped)


def report(n_in_pk, n_out_pk, n_in, n_out, compared, truth, resized, cuts, flick_truth, flick_haar, flick_moved,
           follow, swapped):
    followed, found, followed_all, found_all = follow
    faces = {k: {'swapped': s, 'frames': n, 'share': round(s / n, 4) if n else None} for k, (s, n) in swapped.items()}
    present = {k: v for k, v in faces.items() if v['frames'] >= MIN_FRAMES}
    worst = min(present, key=lambda k: present[k]['share'], default=None)
    return {
        'frames_input': n_in, 'frames_output': n_out, 'packets_input': n_in_pk, 'packets_output': n_out_pk,
        'frames_truth': truth.get('frames'), 'frames_compared': compared,
        'frames_match': n_in == n_out and n_in_pk == n_out_pk, 'output_resized': resized,
        'pairs_skipped_as_cuts': cuts, 'cuts_in_truth': truth.get('cuts', []),
        'flicker_truth': flick_truth.figures(), 'flicker_haar': flick_haar.figures(),
        'flicker_moved': flick_moved.figures(),
        'flicker_ratio': flick_truth.ratio(), 'flicker_ratio_haar': flick_haar.ratio(),
        'flicker_ratio_moved': flick_moved.ratio(),
        'follow_share': followed / found if found else None, 'follow_matched': followed, 'follow_total': found,
        'follow_share_all_boxes': followed_all / found_all if found_all else None,
        'follow_matched_all_boxes': followed_all, 'follow_total_all_boxes': found_all,
        'swapped': faces, 'swapped_min_share': present[worst]['share'] if worst else None, 'swapped_min_face': worst,
        'face_frames_swapped': sum(v['swapped'] for v in faces.values()),
        'face_frames_total': sum(v['frames'] for v in faces.values()),
    }


# ---- printing ----------------------------------------------------------------------------------

def ratio_text(f):
    if f['pairs'] == 0:
        return 'undefined (no face pairs)'
    if f['ratio'] is None:
        return 'undefined (input does not change in the face regions: sum A = 0)'
    note = ''
    if f['sum_b'] == 0:
        note = ' (the output does not change in the face regions: sum B = 0)'
    elif f['sum_b'] == f['sum_a']:
        note = ' (the output changes exactly as the input: identical faces give 1 by definition)'
    return '%.3f%s  [sum B %.1f / sum A %.1f over %d pairs]' % (f['ratio'], note, f['sum_b'], f['sum_a'], f['pairs'])


def print_text(r):
    match = 'equal' if r['frames_match'] else 'MISMATCH'
    print('frames: input %d (%s packets), output %d (%s packets): %s; truth %s; compared %d%s' % (
        r['frames_input'], r['packets_input'], r['frames_output'], r['packets_output'], match, r['frames_truth'],
        r['frames_compared'], '; output RESIZED to the input size' if r['output_resized'] else ''))
    print('pairs skipped as cuts (input mean gray difference > %g): %d (truth cuts at %s)' % (
        CUT_DIFF, r['pairs_skipped_as_cuts'], r['cuts_in_truth'] or 'none'))
    print('flicker ratio, ground-truth boxes: ' + ratio_text(r['flicker_truth']))
    for k, v in r['flicker_truth'].get('per_face', {}).items():
        print('  %s: %s' % (k, '-' if v is None else '%.3f' % v))
    print('flicker ratio, Haar boxes of the input: ' + ratio_text(r['flicker_haar']))
    print('flicker ratio, ground-truth boxes, motion-compensated (an extra figure, not the definition '
          'above): ' + ratio_text(r['flicker_moved']))
    if r['follow_total']:
        print('follow share (input Haar boxes on a truth face with an output Haar box at IoU >= %.1f): '
              '%d of %d = %.3f  [all input Haar boxes: %d of %d]' % (
                  IOU_SAME, r['follow_matched'], r['follow_total'], r['follow_share'],
                  r['follow_matched_all_boxes'], r['follow_total_all_boxes']))
    else:
        print('follow share: undefined (the Haar detector found no truth face in the input)')
    print('swapped per face (central %d%% of the truth box, mean abs gray difference > %.1f):' % (
        SWAP_CORE * 100, SWAP_DIFF))
    for k, v in r['swapped'].items():
        print('  %s: swapped %d of %d frames (%.0f%%)' % (k, v['swapped'], v['frames'], 100 * (v['share'] or 0)))
    if r['swapped_min_face']:
        print('  minimum over faces in >= %d frames: %.0f%% (%s)' % (MIN_FRAMES, 100 * r['swapped_min_share'],
                                                                     r['swapped_min_face']))
    print('  face-frames swapped: %d of %d' % (r['face_frames_swapped'], r['face_frames_total']))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('input')
    ap.add_argument('output')
    ap.add_argument('truth')
    ap.add_argument('--json', action='store_true', help='print one JSON object')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    with open(args.truth) as f:
        truth = json.load(f)
    r = measure(args.input, args.output, truth)
    if args.json:
        print(json.dumps(r))
    else:
        print_text(r)


if __name__ == '__main__':
    main()
