"""TF.js weights-manifest reader for the PyTorch mirrors (same format as models/tfjs/weights.h and
shared/reference/faceapi_ref.py's load_weights): groups of shards holding tensors back to back,
float32, int32 or affine uint8 (q * scale + min; int32 ones rounded). Returns {name: torch.float32 tensor} in TF layouts
(HWIO conv filters, [kh,kw,C,1] depthwise, [in,out] dense)."""
import json
import os

import numpy as np
import torch


def decode_groups(groups, directory):
    out = {}
    for grp in groups:
        buf = b"".join(open(os.path.join(directory, p), "rb").read() for p in grp["paths"])
        off = 0
        for w in grp["weights"]:
            n = int(np.prod(w["shape"])) if w["shape"] else 1
            q = w.get("quantization")
            if q:
                assert q["dtype"] == "uint8", q
                a = np.frombuffer(buf, np.uint8, n, off).astype(np.float32) * np.float32(q["scale"]) + np.float32(q["min"])
                off += n
            else:
                assert w["dtype"] in ("float32", "int32"), w
                a = np.frombuffer(buf, np.float32 if w["dtype"] == "float32" else np.int32, n, off).copy()
                off += 4 * n
            if w["dtype"] == "int32":  # shape constants (SSD's manifest): exact integers
                a = np.rint(a).astype(np.int32)
            out[w["name"]] = torch.from_numpy(a.reshape(w["shape"]))
        assert off == len(buf), (directory, off, len(buf))
    return out


def load_manifest(path):
    """A face-api '*-weights_manifest.json' (a JSON array of groups)."""
    return decode_groups(json.load(open(path)), os.path.dirname(path))


def load_layers_model(model_json):
    """A TF.js layers-model: (Keras model config, weights)."""
    m = json.load(open(model_json))
    return m["modelTopology"]["model_config"]["config"], decode_groups(m["weightsManifest"], os.path.dirname(model_json))
