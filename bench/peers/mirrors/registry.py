"""Network id (bench/peers/fusiond_nets.h) -> its PyTorch mirror with the fetched weights."""
import os

from face_recognition import FaceRecognitionNet
from tfjs_weights import load_manifest
from tiny_face_detector import TinyFaceDetector

TOLERANCE = 1e-4  # absolute, per output value (issue 12)


def _faceapi(models_dir, model):
    return load_manifest(os.path.join(models_dir, "face-api", model + "-weights_manifest.json"))


def build(id_, models_dir):
    if id_ == "tiny_face_detector_416":
        return TinyFaceDetector(_faceapi(models_dir, "tiny_face_detector_model"))
    if id_ == "face_recognition_150":
        return FaceRecognitionNet(_faceapi(models_dir, "face_recognition_model"))
    raise KeyError(f"no mirror for {id_}")
