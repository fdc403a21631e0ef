"""The 11-megapixel mosaic (3840x2896) through the Python client: the target goes by sealed
memfd over <socket>.fd and the 11 MiB PNG result comes back the same way (asserted by the
transfer counts), and the result is byte-identical to the same job through fusionctl (the C++
SDK). And a video target: its MP4 result and frame events."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import fusiond
from conftest import ASTRONAUT, HOPPER, MOSAIC, Daemon, read

# The transport, not the scan, is under test: its largest face only, found on the coarse
# pyramid levels (its faces are 190-300 px; 2.5 s instead of 8.4 s for all 13 at 120 px).
OPTIONS = {"max_side": 640, "min_face_px": 300, "faces": "largest", "simple": True}
CTL_OPTIONS = ["--max-side", "640", "--min-face-px", "300", "--faces", "largest", "--simple"]


def test_mosaic_by_memfd_both_ways_is_byte_identical_to_fusionctl(daemon: Daemon) -> None:
    if not os.access(MOSAIC, os.R_OK):
        pytest.fail(f"{MOSAIC} missing (scripts/fetch-models.sh)")
    mosaic, source = read(MOSAIC), read(ASTRONAUT)
    # The 1.4 MB JPEG is under the 4 MiB default: a 1 MiB threshold sends it by memfd, while the
    # 0.8 MB source stays inline (as fusionctl --memfd-threshold 1MiB).
    with fusiond.Client(daemon.socket, timeout=10, memfd_threshold_bytes=1 << 20) as c:
        r = c.swap(source, MOSAIC, **OPTIONS)
        t = c.transfer_stats()
    assert (r.state, r.width, r.height) == (fusiond.JobState.SUCCEEDED, 3840, 2896)
    assert r.faces_swapped == 1 and r.image_by_memfd
    assert len(r.image_bytes) > 4 << 20  # over the daemon's inline limit
    assert (t.images_by_memfd, t.bytes_by_memfd) == (2, len(mosaic) + len(r.image_bytes))
    assert (t.images_inline, t.bytes_inline, t.images_inline_fallback) == (1, len(source), 0)
    assert t.memfd_us > 0

    out = os.path.join(daemon.root, "mosaic-ctl.png")
    ctl = daemon.ctl(["--memfd-threshold", "1MiB", "swap", "--source", ASTRONAUT, "--target", MOSAIC,
                      "-o", out, "--json", *CTL_OPTIONS])
    assert ctl.returncode == 0, ctl.stderr
    j = json.loads(ctl.stdout)
    assert j["transfer"]["images_by_memfd"] == 2 and j["faces_swapped"] == r.faces_swapped
    assert read(out) == r.image_bytes, "the Python client's mosaic differs from fusionctl's"
    # The daemon is at rest again: no lease, nothing reserved.
    with fusiond.Client(daemon.socket) as c:
        m = c.memory()
    assert m.device.reserved_bytes == 0 and all(x.leases == 0 for x in m.models)


def test_a_video_target_gives_an_mp4_with_frame_events(daemon: Daemon, tmp_path) -> None:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        pytest.skip("ffmpeg absent (scripts/setup-test.sh installs it)")
    clip = str(tmp_path / "grace.mp4")  # 3 frames of Grace at 5 fps, H.264
    subprocess.run([ffmpeg, "-loglevel", "error", "-y", "-loop", "1", "-i", HOPPER, "-frames:v", "3", "-r", "5",
                    "-vf", "scale=256:300", "-c:v", "libx264", "-pix_fmt", "yuv420p", clip], check=True)
    frames = []
    with fusiond.Client(daemon.socket, timeout=10) as c:
        r = c.swap(ASTRONAUT, clip, simple=True, video_preset="ultrafast",
                   on_progress=lambda e: frames.append(e.frames_done) if isinstance(e, fusiond.FramesDone) else None)
    assert (r.kind, r.format, r.frames_total, r.frames_swapped) == (fusiond.JobKind.VIDEO, "mp4", 3, 3)
    assert (r.width, r.height) == (256, 300) and r.image_bytes[4:8] == b"ftyp"
    assert frames == sorted(frames) and frames[-1] == 3
    assert 0 < r.identity_distance_median <= r.identity_distance_worst
    with pytest.raises(ValueError, match="video"):
        r.to_numpy()
