#!/usr/bin/python3
"""Writes tests/data/fusion/esrgan_goldens.json: outputs of UpscalerJS ESRGAN slim x2, slim x4
and medium x4 on one fixed 32x32 RGB crop, computed by the numpy reference executor
(shared/reference/upscaler_ref.py). The C++ Keras interpreter must match them within 0.1 on the
0-255 scale.

Only needed to regenerate the committed file:
  scripts/make-esrgan-goldens.py <upscaler_ref dir> <models dir> <astronaut png> > tests/data/fusion/esrgan_goldens.json
where <models dir> holds esrgan-slim/x2, esrgan-slim/x4 and esrgan-medium/x4 (model.json + shard).
Needs Debian's python3-numpy and python3-opencv.

The crop is stored in the file (so the test needs no image decoder); the output is stored at a
32x32 grid of sample positions that visits every sub-pixel phase (y = i*s + i%s,
x = j*s + (j+1)%s), raw (not clipped or rounded), plus the per-channel mean of the whole output.
"""
import json, os, sys

sys.path.insert(0, sys.argv[1])
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import upscaler_ref as ref  # noqa: E402

CROP_Y, CROP_X, CROP = 96, 200, 32  # eyes/nose region of the astronaut
MODELS = [("esrgan-slim-x2", "esrgan-slim/x2", 2), ("esrgan-slim-x4", "esrgan-slim/x4", 4),
          ("esrgan-medium-x4", "esrgan-medium/x4", 4)]


def main():
    models_dir, image = sys.argv[2], sys.argv[3]
    rgb = cv2.cvtColor(cv2.imread(image), cv2.COLOR_BGR2RGB)
    crop = rgb[CROP_Y:CROP_Y + CROP, CROP_X:CROP_X + CROP]
    out = {"source": "upscaler_ref.py, input range [0,255], NHWC RGB",
           "crop_origin_yx": [CROP_Y, CROP_X], "crop_hwc_rgb_u8": crop.reshape(-1).tolist(), "models": {}}
    for key, rel, s in MODELS:
        cfg, w = ref.load(os.path.join(models_dir, rel, "model.json"))
        y = ref.run(cfg, w, crop[None].astype(np.float32))[0]  # [32s,32s,3], raw
        ys = [i * s + i % s for i in range(CROP)]
        xs = [j * s + (j + 1) % s for j in range(CROP)]
        samples = y[np.ix_(ys, xs)]  # [32,32,3]
        out["models"][key] = {"scale": s, "out_hw": list(y.shape[:2]),
                              "sample_ys": ys, "sample_xs": xs,
                              "samples_hwc": [round(float(v), 4) for v in samples.reshape(-1)],
                              "channel_mean": [round(float(v), 5) for v in y.reshape(-1, 3).mean(0)]}
        print(key, y.shape, "min %.2f max %.2f" % (y.min(), y.max()), file=sys.stderr)
    json.dump(out, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
