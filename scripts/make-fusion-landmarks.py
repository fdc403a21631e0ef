#!/usr/bin/python3
"""Writes tests/data/fusion/landmarks68.json: the 68 iBUG landmarks (image pixels, x,y) of the
faces the fusion tests swap, computed by the numpy face-api reference
(shared/reference/faceapi_ref.py: TinyFaceDetector at 416, FaceLandmark68Net on the box crop).

Only needed to regenerate the committed file:
  FACEAPI_MODEL_DIR=<models>/face-api scripts/make-fusion-landmarks.py <faceapi_ref dir> <faces dir>
with <faces dir> holding astronaut_eileen_collins_512.png, grace_hopper_512x600.jpg and
faceapi_group_sample1.jpg (shared/data/faces). Needs Debian's python3-numpy and python3-opencv.
"""
import json, os, sys

sys.path.insert(0, sys.argv[1])
import cv2  # noqa: E402
import faceapi_ref as ref  # noqa: E402

IMAGES = ["astronaut_eileen_collins_512.png", "grace_hopper_512x600.jpg", "faceapi_group_sample1.jpg"]


def main():
    faces_dir = sys.argv[2]
    det_w = ref.load_weights("tiny_face_detector_model")
    lm_w = ref.load_weights("face_landmark_68_model")
    out = {"source": "faceapi_ref.py TinyFaceDetector@416 + FaceLandmark68Net", "images": {}}
    for name in IMAGES:
        rgb = cv2.cvtColor(cv2.imread(os.path.join(faces_dir, name)), cv2.COLOR_BGR2RGB)
        faces = []
        for score, *box in ref.tiny_face_detector(rgb, det_w):
            crop, (ox, oy) = ref.crop(rgb, box)
            pts = ref.landmarks68(crop, lm_w) + [ox, oy]
            faces.append({"score": round(float(score), 4),
                          "box_xywh": [round(float(v), 2) for v in box],
                          "landmarks": [[round(float(x), 2), round(float(y), 2)] for x, y in pts]})
        faces.sort(key=lambda f: f["box_xywh"][0])  # left to right
        out["images"][name] = faces
        print(name, len(faces), "faces", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
