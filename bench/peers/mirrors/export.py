#!/usr/bin/python3
"""Builds the PyTorch mirror of each network of bench/peers, checks it against fusiond's C++ port
on the same input (the files `fusion_peer_bench dump` wrote), exports it to ONNX and counts its
FLOPs. Run with Debian's /usr/bin/python3 (python3-torch, python3-onnx: bench/peers/setup.sh).

  export.py --models-dir DIR --out DIR [ID...]

Per ID it writes OUT/ID.onnx and OUT/ID.mirror.json {"mirror_max_abs_diff", "max_abs_output",
"tolerance", "ok", "flops", "opset"} and prints one line. Exit status 1 when a mirror differs from the port by more
than the tolerance (1e-4 absolute on every output value).
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flops import count_flops  # noqa: E402
from registry import TOLERANCE, build  # noqa: E402

OPSET = 10  # see tf_ops.py: the newest opset whose Clip OpenCV dnn 4.6 imports
# The tracer's notes on shape-dependent Python branches: the shapes are fixed per export.
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
warnings.filterwarnings("ignore", category=FutureWarning, module="tf_ops")  # g.op in _Pad.symbolic
# Resize-10 vs PyTorch interpolation: only linear modes differ; nearest x2/x4 (ESRGAN) is exact.
warnings.filterwarnings("ignore", message="You are trying to export the model with onnx:Resize")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("ids", nargs="*")
    a = ap.parse_args()
    ids = a.ids or sorted(f[:-5] for f in os.listdir(a.out) if f.endswith(".json") and ".mirror" not in f)
    torch.set_num_threads(1)
    failed = []
    for id_ in ids:
        meta = json.load(open(os.path.join(a.out, id_ + ".json")))
        x = torch.from_numpy(np.fromfile(os.path.join(a.out, id_ + ".input.f32"), np.float32).reshape(meta["input_shape"]))
        ref = np.fromfile(os.path.join(a.out, id_ + ".fusiond.f32"), np.float32)
        model = build(id_, a.models_dir).eval()
        with torch.no_grad():
            y = model(x).reshape(-1).numpy()
        if y.size != ref.size:
            print(f"{id_}: mirror gives {y.size} values, fusiond {ref.size}")
            failed.append(id_)
            continue
        diff = float(np.abs(y - ref).max())
        onnx_path = os.path.join(a.out, id_ + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, (x,), onnx_path, opset_version=OPSET, input_names=["input"],
                              output_names=["output"], do_constant_folding=True)
        flops = count_flops(onnx_path)
        ok = diff <= TOLERANCE
        scale = float(np.abs(ref).max())
        json.dump({"mirror_max_abs_diff": diff, "max_abs_output": scale, "tolerance": TOLERANCE, "ok": ok,
                   "flops": flops, "opset": OPSET},
                  open(os.path.join(a.out, id_ + ".mirror.json"), "w"))
        print(f"{id_}: mirror vs fusiond max abs diff {diff:.3g} ({'ok' if ok else 'OVER'} {TOLERANCE:g}; "
              f"outputs up to {scale:.3g} in magnitude), "
              f"{flops / 1e9:.3f} GFLOP, ONNX opset {OPSET} -> {onnx_path}")
        if not ok:
            failed.append(id_)
    if failed:
        print("mirrors differing from fusiond: " + " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
