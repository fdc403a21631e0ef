"""Turning what a caller passes as an image into encoded bytes, and results into arrays.

An image argument is one of: ``bytes``/``bytearray``/``memoryview`` (an encoded image: PNG,
JPEG, WebP, TIFF, BMP; or a video file for a target), a path (``str`` or ``os.PathLike``; read
by the client, never sent as a path), a binary file object (anything with ``read()``), or a
numpy array (HxW, HxWx3 or HxWx4 uint8 in OpenCV's BGR/BGRA order), which is encoded
losslessly as PNG here (with OpenCV when installed, else with zlib).
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Any, Union

ImageInput = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", Any]


def read_image(image: ImageInput, what: str) -> bytes:
    """Encoded bytes of ``image`` (see the module docstring); ``what`` names it in errors
    ("source", "target", "reference")."""
    if isinstance(image, bytes):
        return image
    if isinstance(image, (bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        path = os.fspath(image)
        if os.path.isdir(path):
            raise ValueError(f"{what}: '{path}' is a directory")
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise ValueError(f"{what}: cannot read '{path}': {e.strerror}") from e
    if hasattr(image, "read"):
        data = image.read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"{what}: the file object must be opened in binary mode")
        return bytes(data)
    if type(image).__module__ == "numpy" and hasattr(image, "dtype"):
        return encode_png(image, what)
    raise TypeError(f"{what}: expected bytes, a path, a binary file or a numpy array, "
                    f"not {type(image).__name__}")


def encode_png(array: Any, what: str = "image") -> bytes:
    """A lossless PNG of an HxW (grey), HxWx3 (BGR) or HxWx4 (BGRA) uint8 array."""
    import numpy as np
    a = np.asarray(array)
    if a.dtype != np.uint8:
        raise ValueError(f"{what}: a numpy image must be uint8, not {a.dtype}")
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 3, 4))):
        raise ValueError(f"{what}: a numpy image must be HxW, HxWx3 (BGR) or HxWx4 (BGRA), "
                         f"not shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"{what}: a numpy image must not be empty (shape {a.shape})")
    try:
        import cv2
        ok, buf = cv2.imencode(".png", a)
        if ok:
            png: bytes = buf.tobytes()
            return png
    except ImportError:
        pass
    return _png_with_zlib(a)


def _png_with_zlib(a: Any) -> bytes:
    """PNG of a uint8 array without OpenCV: filter type 0 rows, one IDAT."""
    import numpy as np
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        colour, rgb = 0, a
    elif a.shape[2] == 3:
        colour, rgb = 2, a[:, :, ::-1]
    else:
        colour, rgb = 6, a[:, :, [2, 1, 0, 3]]
    h, w = a.shape[0], a.shape[1]
    rows = np.ascontiguousarray(rgb).reshape(h, -1)
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rows], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def decode_image(data: bytes) -> Any:
    """An encoded image as an HxWx3 uint8 BGR array (needs numpy and OpenCV)."""
    try:
        import cv2
        import numpy as np
    except ImportError as e:
        raise ImportError("to_numpy() needs numpy and OpenCV (Debian: python3-numpy "
                          "python3-opencv)") from e
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("the result is not an image OpenCV decodes")
    return image
