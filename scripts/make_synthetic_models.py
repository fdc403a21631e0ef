#!/usr/bin/env python3
"""Writes FaceFusion-sized synthetic TorchScript models and a manifest that serves them.

The sizes are those of FaceFusion's models in docs/PERFORMANCE.md's traces (fp32 parameter
bytes). Each module is a TorchScript *generator* with the contract of
models/generator/generator.h:
    forward(source, source_landmarks, target, target_landmarks, ratio: float) -> Tensor
source/target [1,3,S,S] float32 RGB [0,1]; the output is the target moved towards a 3x3
convolution of the source by `ratio`, plus the mean of every weight (so a run reads all of its
parameter bytes, as a network reads its weights once per forward). Weights are zeros except the
identity kernel, so the output is a plausible face crop. Not a face swapper: a stand-in of the
right size for residency, upload, eviction and admission under load (scripts/gpu-check's
loadgen step, tests/synthetic_loadgen_test.sh).

fusiond runs TorchScript only in the generate stage (a catalogue entry of format "torchscript",
chosen with `fusiond --generator NAME`); detect, landmarks and encode are the face-api networks
and enhance is Keras ESRGAN, whose outputs the pipeline needs. So the manifest written here is
the project's manifest plus one entry per synthetic model, and a daemon runs one of them (by
default the largest, inswapper_128) as its generator.

Usage:
  make_synthetic_models.py --out DIR --weights WEIGHTS_DIR [--scale 1] [--only NAME,...]
                           [--base-manifest models/manifest.json]
writes DIR/models/ (a symlink per entry of WEIGHTS_DIR, the real weights, and synthetic/*.pt)
and DIR/manifest.json; prints one JSON line: the models written, their bytes, the seconds taken.
Run fusiond with --models-dir DIR/models --manifest DIR/manifest.json --generator synthetic-inswapper_128.
Needs python3 with torch (Debian's python3-torch, or the GPU machine's torch wheel: the files are
made where they are used, never carried).
"""
import argparse
import hashlib
import json
import os
import pathlib
import sys
import time

# FaceFusion model -> fp32 parameter bytes (docs/PERFORMANCE.md, the residency traces).
FACEFUSION_BYTES = {
    "inswapper_128": 554_253_681,
    "gfpgan_1.4": 340_300_000,
    "arcface_w600k_r50": 174_400_000,
    "retinaface_10g": 16_900_000,
    "2dfan4": 93_000_000,
    "real_esrgan_x4": 67_000_000,
}


# The stage each runs as in fusiond: generate (a generator), or enhance with a scale (an
# enhancer, models/generator/torchscript_enhancer.h). arcface, RetinaFace and 2dfan4 have no
# TorchScript stage in fusiond (detect, landmarks and encode are the face-api networks, whose
# outputs the pipeline uses): asked for, they are written as generators of their size.
STAGE = {"inswapper_128": ("generate", 0), "gfpgan_1.4": ("enhance", 2), "real_esrgan_x4": ("enhance", 4)}
DEFAULT = "inswapper_128,gfpgan_1.4,real_esrgan_x4"


def build_enhancer(torch, numel, scale):
    class SyntheticEnhancer(torch.nn.Module):
        scale: int

        def __init__(self, numel: int, scale: int):
            super().__init__()
            self.scale = scale
            w = torch.zeros(numel, dtype=torch.float32)
            k = torch.zeros(3, 3, 3, 3)
            for c in range(3):
                k[c, c, 1, 1] = 1.0
            w[:81] = k.reshape(-1)
            self.weight = torch.nn.Parameter(w, requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            kernel = self.weight[:81].view(3, 3, 3, 3)
            y = torch.nn.functional.conv2d(x, kernel, padding=1)
            up = torch.nn.functional.interpolate(y, scale_factor=float(self.scale), mode="nearest")
            return up.add_(self.weight.mean())

    return torch.jit.script(SyntheticEnhancer(numel, scale).eval())


def build_module(torch, numel):
    class SyntheticGenerator(torch.nn.Module):
        def __init__(self, numel: int):
            super().__init__()
            w = torch.zeros(numel, dtype=torch.float32)
            k = torch.zeros(3, 3, 3, 3)
            for c in range(3):
                k[c, c, 1, 1] = 1.0  # identity 3x3 kernel: the convolution returns the source
            w[:81] = k.reshape(-1)
            self.weight = torch.nn.Parameter(w, requires_grad=False)

        def forward(self, source: torch.Tensor, source_landmarks: torch.Tensor, target: torch.Tensor,
                    target_landmarks: torch.Tensor, ratio: float) -> torch.Tensor:
            kernel = self.weight[:81].view(3, 3, 3, 3)
            mixed = torch.nn.functional.conv2d(source, kernel, padding=1)
            out = target + ratio * (mixed - target) + self.weight.mean()
            return out.clamp(0.0, 1.0).contiguous()

    return torch.jit.script(SyntheticGenerator(numel).eval())


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--weights", required=True, help="the real weights (fusiond --models-dir), linked into OUT/models")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size by this (e.g. 0.01 for CI)")
    ap.add_argument("--only", default=DEFAULT,
                    help=f"comma-separated FaceFusion names to write (default {DEFAULT}; 'all' = every size)")
    ap.add_argument("--base-manifest", default=str(pathlib.Path(__file__).resolve().parent.parent / "models" / "manifest.json"))
    a = ap.parse_args()
    if not 0 < a.scale <= 1:
        sys.exit("make_synthetic_models: --scale must be in (0, 1]")
    names = list(FACEFUSION_BYTES) if a.only == "all" else [n for n in a.only.split(",") if n]
    unknown = [n for n in names if n not in FACEFUSION_BYTES]
    if unknown:
        sys.exit(f"make_synthetic_models: unknown model(s) {unknown}; known: {', '.join(FACEFUSION_BYTES)}")
    weights = pathlib.Path(a.weights).resolve()
    if not weights.is_dir():
        sys.exit(f"make_synthetic_models: --weights {weights} is not a directory")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"make_synthetic_models: python torch is needed ({e}); on Debian: apt-get install python3-torch")

    t0 = time.monotonic()
    out = pathlib.Path(a.out).resolve()
    models_dir = out / "models"
    (models_dir / "synthetic").mkdir(parents=True, exist_ok=True)
    for entry in weights.iterdir():  # the real weights, unchanged, beside the synthetic ones
        link = models_dir / entry.name
        if entry.name != "synthetic" and not link.exists():
            link.symlink_to(entry)
    manifest = json.loads(pathlib.Path(a.base_manifest).read_text())
    written = []
    for name in names:
        numel = max(81, int(FACEFUSION_BYTES[name] * a.scale) // 4)
        rel = f"synthetic/{name}.pt"
        path = models_dir / rel
        stage, scale = STAGE.get(name, ("generate", 0))
        (build_enhancer(torch, numel, scale) if stage == "enhance" else build_module(torch, numel)).save(str(path))
        entry = {
            "name": f"synthetic-{name}",
            "stage": stage,
            "format": "torchscript",
            "files": [{"path": rel, "sha256": sha256(path), "file_bytes": path.stat().st_size,
                       "package": "scripts/make_synthetic_models.py", "member": rel}],
            "device_bytes": numel * 4,
            # Activations of a [1,3,S,S] crop: the conv output, the blend's temporaries (~5 fp32
            # images of the crop) per pixel of the network input.
            # Per pixel of the network input: a generator's conv output and blend temporaries
            # (~5 fp32 crops); an enhancer's im2col (27 floats), conv output and input copy, and
            # its upsampled output with the stage's float conversion (2 x s^2 fp32 images).
            "working_set_bytes_per_pixel": 64 if stage == "generate" else 24 * scale * scale + 160,
            "default_precision": "fp32",
            "pinned_by_default": False,
            "one_shot": False,
            "tileable": False,
            "input": ("generator contract (models/generator/generator.h): [1,3,S,S] float32 RGB [0,1] crops, [1,68,2] landmarks"
                      if stage == "generate" else
                      f"enhancer contract (models/generator/torchscript_enhancer.h): [1,3,H,W] float32 RGB 0..255 -> x{scale}"),
            "license": "synthetic (zeros and an identity kernel), no trained weights",
            "source": f"scripts/make_synthetic_models.py --scale {a.scale}: FaceFusion {name} "
                      f"({FACEFUSION_BYTES[name]} bytes) x {a.scale}",
        }
        manifest["models"] = [m for m in manifest["models"] if m["name"] != entry["name"]] + [entry]
        written.append({"name": entry["name"], "stage": stage, "device_bytes": entry["device_bytes"],
                        "file_bytes": entry["files"][0]["file_bytes"]})
    manifest["_about"] = ("models/manifest.json plus FaceFusion-sized synthetic TorchScript generators "
                          "(scripts/make_synthetic_models.py); not the project's catalogue")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps({"manifest": str(out / "manifest.json"), "models_dir": str(models_dir), "scale": a.scale,
                      "torch": torch.__version__, "models": written,
                      "seconds": round(time.monotonic() - t0, 2)}))


if __name__ == "__main__":
    main()
