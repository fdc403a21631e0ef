"""Network id (bench/peers/fusiond_nets.h) -> its PyTorch mirror with the fetched weights."""
import os

from esrgan import Esrgan
from face_landmark_68 import FaceLandmark68Net
from face_recognition import FaceRecognitionNet
from ssd_mobilenet_v1 import SsdMobilenetV1
from tfjs_weights import load_layers_model, load_manifest
from tiny_face_detector import TinyFaceDetector

# Absolute, per output value. PEERS_TOLERANCE overrides it, e.g. when a change of the
# port's fp32 summation order moves the tiny detector's logits (up to 44 in magnitude; 9.0e-5
# today) past 1e-4 while the mirror is still right.
TOLERANCE = float(os.environ.get("PEERS_TOLERANCE", "1e-4"))


def _faceapi(models_dir, model):
    return load_manifest(os.path.join(models_dir, "face-api", model + "-weights_manifest.json"))


def build(id_, models_dir):
    if id_ == "tiny_face_detector_416":
        return TinyFaceDetector(_faceapi(models_dir, "tiny_face_detector_model"))
    if id_ == "face_recognition_150":
        return FaceRecognitionNet(_faceapi(models_dir, "face_recognition_model"))
    if id_ == "ssd_mobilenetv1_512":
        return SsdMobilenetV1(_faceapi(models_dir, "ssd_mobilenetv1_model"))
    if id_ == "face_landmark_68_112":
        return FaceLandmark68Net(_faceapi(models_dir, "face_landmark_68_model"))
    for family in ("slim", "medium"):
        for scale in (2, 4):
            if id_ == f"esrgan_{family}_x{scale}_64":
                return Esrgan(*load_layers_model(os.path.join(models_dir, f"esrgan-{family}", f"x{scale}", "model.json")))
    raise KeyError(f"no mirror for {id_}")
