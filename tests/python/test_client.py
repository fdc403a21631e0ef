"""fusiond.Client and fusiond.AsyncClient against a real fusiond (CPU): every method, progress
events, cancel, each error class from a real failure, two concurrent clients, fork, and the
inline fallback when the fd socket is unreachable."""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import tempfile
import threading

import grpc
import numpy as np
import pytest

import fusiond
from conftest import ASTRONAUT, HOPPER, NOBODY, OUTSIDER, Daemon, read, run_as

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STAGES = ["detect", "landmarks", "encode", "generate", "blend", "score"]
# A job whose source an earlier job of the same daemon analysed: the source-face cache (on by
# default) has its face, and no other image needs describing, so there is no encode stage.
STAGES_CACHED_SOURCE = [s for s in STAGES if s != "encode"]


@pytest.fixture(scope="module")
def simple_swap(daemon: Daemon) -> fusiond.SwapResult:
    """The astronaut onto Grace Hopper, --simple: the reference result of this module."""
    with fusiond.Client(daemon.socket, timeout=10) as c:
        return c.swap(ASTRONAUT, HOPPER, simple=True)


def test_health_memory_and_models(client: fusiond.Client) -> None:
    assert client.health() == fusiond.ServingStatus.SERVING
    assert client.health("fusion.v1.Fusion") == fusiond.ServingStatus.SERVING
    m = client.memory()
    assert (m.device.tier, m.device.kind, m.host.tier, m.host.kind) == ("device", "cpu", "host", "host")
    assert m.device.limit_bytes == 1 << 30
    assert 0 < m.device.budget_bytes <= 1 << 30
    assert isinstance(m.device.capacity_bytes, int) and m.device.capacity_bytes > m.device.budget_bytes
    assert m.unix_ms > 1_700_000_000_000
    names = [x.name for x in client.models()]
    assert {"ssd_mobilenetv1", "face_landmark_68", "face_recognition", "classical-fusion"} <= set(names)
    assert sorted(names) == sorted(x.name for x in m.models)


def test_load_pin_unpin_unload(client: fusiond.Client) -> None:
    loaded = client.load("face_landmark_68")
    assert (loaded.name, loaded.tier, loaded.pinned) == ("face_landmark_68", "device", False)
    assert loaded.bytes > 0
    assert client.pin("face_landmark_68").pinned
    assert any(x.name == "face_landmark_68" and x.pinned for x in client.memory().models)
    assert not client.unpin("face_landmark_68").pinned
    assert client.unload("face_landmark_68").tier != "device"
    with pytest.raises(fusiond.NotFound, match="no-such-model"):
        client.load("no-such-model")


def test_swap_result(simple_swap: fusiond.SwapResult, tmp_path) -> None:
    r = simple_swap
    assert r.job_id.startswith("j-") and r.state == fusiond.JobState.SUCCEEDED
    assert (r.device, r.faces_swapped, r.width, r.height, r.format) == ("cpu", 1, 512, 600, "png")
    assert r.kind == fusiond.JobKind.IMAGE and r.image_bytes.startswith(PNG_MAGIC)
    assert not r.image_by_memfd and r.degradations == []
    [face] = r.faces
    assert face.identity_distance + 0.1 < face.target_identity_distance
    assert 0.9 < face.score <= 1.0  # the detector's confidence in Grace's box
    assert 100 < face.box[2] < 300 and 100 < face.box[3] < 300
    assert [s.name for s in r.stages] == STAGES
    assert all(s.mode in ("device", "host") and s.ms > 0 and s.attempts == 1 for s in r.stages)
    assert r.to_numpy().shape == (600, 512, 3)
    r.save(str(tmp_path / "out.png"))
    assert read(str(tmp_path / "out.png")) == r.image_bytes


def test_fusionctl_gives_the_same_bytes(daemon: Daemon, simple_swap: fusiond.SwapResult) -> None:
    # Every other option at its default on both sides: the defaults are fusionctl swap's.
    out = os.path.join(daemon.root, "ctl.png")
    ctl = daemon.ctl(["swap", "--source", ASTRONAUT, "--target", HOPPER, "-o", out, "--simple"])
    assert ctl.returncode == 0, ctl.stderr
    assert read(out) == simple_swap.image_bytes


def test_progress_events_arrive_in_order_then_jobs_and_job(client: fusiond.Client,
                                                           simple_swap: fusiond.SwapResult) -> None:
    job = client.submit(ASTRONAUT, HOPPER, simple=True)
    assert job.state in (fusiond.JobState.QUEUED, fusiond.JobState.RUNNING)
    events = list(job.events())
    assert isinstance(events[0], (fusiond.Queued, fusiond.StageStarted))
    assert isinstance(events[-1], fusiond.Done) and events[-1].job.state == fusiond.JobState.SUCCEEDED
    assert job.state == fusiond.JobState.SUCCEEDED
    assert all(e.job_id == job.id for e in events)
    # Within a stage, StageStarted repeats with a note: "detect (target image: pass 2 of 3)".
    notes = [e for e in events if isinstance(e, fusiond.StageStarted) and " (" in e.stage]
    assert notes and all(e.stage.startswith("detect (") for e in notes)
    events = [e for e in events if e not in notes]
    started = [e.stage for e in events if isinstance(e, fusiond.StageStarted) and e.stage]
    finished = [e for e in events if isinstance(e, fusiond.StageFinished)]
    # simple_swap analysed the astronaut first: this job's source comes from the face cache.
    # "decode" starts first and has no StageFinished: a damaged image fails in it.
    assert started == ["decode"] + STAGES_CACHED_SOURCE and [e.stage for e in finished] == STAGES_CACHED_SOURCE
    assert all(e.report.name == e.stage and e.report.ms > 0 for e in finished)
    # Each stage starts, then finishes, before the next starts; progress never goes back.
    kinds = [(type(e).__name__, e.stage) for e in events if isinstance(e, (fusiond.StageStarted, fusiond.StageFinished)) and e.stage]
    assert kinds == [("StageStarted", "decode")] + [(k, s) for s in STAGES_CACHED_SOURCE for k in ("StageStarted", "StageFinished")]
    progress = [e.progress for e in events if hasattr(e, "progress")]
    assert progress == sorted(progress) and progress[-1] < 1
    assert [e.unix_ms for e in events] == sorted(e.unix_ms for e in events)
    # A finished job's stream is its Done event alone.
    [done] = list(job.events())
    assert isinstance(done, fusiond.Done) and done.job.state == fusiond.JobState.SUCCEEDED
    seen = []
    assert job.wait(on_progress=seen.append).state == fusiond.JobState.SUCCEEDED and seen == []

    listed = client.jobs()
    assert listed[0].job_id == job.id  # newest first
    assert all(j.owner_uid == os.getuid() for j in listed)
    [newest] = client.jobs(states=[fusiond.JobState.SUCCEEDED], limit=1)
    assert newest.job_id == job.id
    assert client.jobs(states=[fusiond.JobState.QUEUED]) == []
    again = client.job(job.id)
    assert again.state == fusiond.JobState.SUCCEEDED and again.info.progress == 1
    assert again.result().image_bytes == simple_swap.image_bytes


def test_cancel_a_running_job(client: fusiond.Client) -> None:
    job = client.submit(ASTRONAUT, HOPPER, enhance="x4")
    with pytest.raises(fusiond.DeadlineExceeded):
        job.wait(timeout=0.05)
    for e in job.events():
        # "detect", or "detect (source image: pass 1 of 2)" when the watch starts mid-stage
        if isinstance(e, fusiond.StageStarted) and e.stage.split(" (")[0] == "detect":
            info = job.cancel()
            assert info.state == fusiond.JobState.CANCELLED or info.cancel_requested
    assert job.state == fusiond.JobState.CANCELLED
    assert job.info.error_code == grpc.StatusCode.CANCELLED.value[0]
    with pytest.raises(fusiond.Cancelled, match=f"job {job.id} CANCELLED"):
        job.result()
    with pytest.raises(fusiond.FailedPrecondition):  # the daemon's own answer
        client._result(job.id, False)
    m = client.memory()
    assert m.device.reserved_bytes == 0 and all(x.leases == 0 for x in m.models)


def test_errors_from_real_failures(client: fusiond.Client, daemon: Daemon) -> None:
    with fusiond.Client(os.path.join(daemon.root, "nobody-here.sock"), timeout=2) as c:
        with pytest.raises(fusiond.Unavailable, match="cannot reach fusiond at unix://.*nobody-here.sock"):
            c.health()
        with pytest.raises(fusiond.Unavailable):
            c.memory()
    # A socket that takes connections but never speaks (a hung daemon): no answer in time.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
        mute.bind(os.path.join(daemon.root, "mute.sock"))
        mute.listen(8)
        with fusiond.Client(os.path.join(daemon.root, "mute.sock"), timeout=0.5) as c:
            with pytest.raises(fusiond.Unavailable, match=r"mute.sock: no answer within 0.5 s"):
                c.health()
    with pytest.raises(fusiond.NotFound, match="j-0123456789abcdef"):
        client.job("j-0123456789abcdef")
    with pytest.raises(fusiond.InvalidArgument, match="source image"):
        client.submit(b"this is not an image", HOPPER)
    grey = np.full((256, 256, 3), 128, np.uint8)  # a numpy source with no face in it
    with pytest.raises(fusiond.FailedPrecondition, match="no face"):
        client.swap(grey, HOPPER, simple=True)
    with fusiond.Client(daemon.socket, timeout=10, memfd_threshold_bytes=1 << 40) as inline:
        big = np.random.default_rng(1).integers(0, 255, 33 << 20, np.uint8).tobytes()
        with pytest.raises(fusiond.ResourceExhausted, match="larger than fusiond's max_message_bytes"):
            inline.submit(ASTRONAUT, big)
    for e in (fusiond.Unavailable, fusiond.NotFound, fusiond.InvalidArgument, fusiond.FailedPrecondition,
              fusiond.ResourceExhausted, fusiond.Cancelled, fusiond.DeadlineExceeded, fusiond.PermissionDenied):
        assert issubclass(e, fusiond.Error)
    # Usage errors fusionctl refuses before sending anything.
    with pytest.raises(ValueError, match="enhance"):
        client.submit(ASTRONAUT, HOPPER, enhance="x3")
    with pytest.raises(ValueError, match="video_detect: expected one of 'track', 'every-frame', not 'sometimes'"):
        client.submit(ASTRONAUT, HOPPER, video_detect="sometimes")
    with pytest.raises(TypeError, match="no_such_option"):
        client.submit(ASTRONAUT, HOPPER, no_such_option=1)
    with pytest.raises(ValueError, match="cannot read"):
        client.submit(os.path.join(daemon.root, "missing.png"), HOPPER)
    # Out-of-range numbers: fusiond's InvalidArgument naming the option, raised before sending
    # (min_face_px=-5 was protobuf's raw "Value out of range" ValueError).
    for bad, text in (({"min_face_px": -5}, "options: min_face_px -5 is not in [8,100000]"),
                      ({"min_face_px": 4}, "options: min_face_px 4 is not in"),
                      ({"max_side": -1}, "options: max_side -1 is not in"),
                      ({"min_face_score": 1.5}, "options: min_face_score 1.5 is not in (0,1)"),
                      ({"ratio": 2}, "options: ratio 2 is not in [0,1]"),
                      ({"video_crf": 60}, "options: video_crf 60 is not in [1,51]"),
                      ({"keyframe_interval": 301}, "options: keyframe_interval 301 is not in [1,300] (0 = 15)"),
                      ({"keyframe_interval": -1}, "options: keyframe_interval -1 is not in [1,300]"),
                      ({"keyframe_interval": 2.5}, "options: keyframe_interval 2.5 is not an integer"),
                      ({"min_face_px": "40"}, "options: min_face_px '40' is not an integer")):
        with pytest.raises(fusiond.InvalidOption) as caught:
            client.submit(ASTRONAUT, HOPPER, **bad)
        assert caught.value.message.startswith(text), caught.value.message
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert isinstance(caught.value, fusiond.InvalidArgument) and isinstance(caught.value, ValueError)


def test_video_options_and_report_fields_convert() -> None:
    from fusiond import _convert
    from fusiond._proto.fusion.v1 import fusion_pb2 as pb
    o, _ = _convert.job_options()
    assert (o.video_detect, o.keyframe_interval) == (pb.VIDEO_DETECT_UNSPECIFIED, 0)
    o, _ = _convert.job_options(video_detect="track", keyframe_interval=25)
    assert (o.video_detect, o.keyframe_interval) == (pb.VIDEO_DETECT_TRACK, 25)
    o, _ = _convert.job_options(video_detect="every-frame", video_crf=20, video_preset="fast")
    assert (o.video_detect, o.keyframe_interval, o.video_crf, o.video_preset) == (
        pb.VIDEO_DETECT_EVERY_FRAME, 0, 20, "fast")
    with pytest.raises(ValueError, match="video_detect"):
        _convert.job_options(video_detect=2)
    p = pb.JobResult(kind=pb.VIDEO, frames_total=90, frames_resumed=30, keyframes=11, frames_tracked=79,
                     tracks=2, flicker_ratio=0.85)
    r = _convert.result(p, b"", False)
    assert (r.kind, r.frames_total, r.frames_resumed) == (fusiond.JobKind.VIDEO, 90, 30)
    assert (r.keyframes, r.frames_tracked, r.tracks, r.flicker_ratio) == (11, 79, 2, 0.85)
    r = _convert.result(pb.JobResult(kind=pb.IMAGE), b"", False)
    assert (r.keyframes, r.frames_tracked, r.tracks, r.flicker_ratio) == (0, 0, 0, 0.0)


def test_keep_alive_fields_convert() -> None:
    from fusiond import _convert
    from fusiond._proto.fusion.v1 import fusion_pb2 as pb
    p = pb.MemoryState(models=[pb.ModelInfo(name="a", keep_alive_seconds=300, expires_in_seconds=12.5),
                               pb.ModelInfo(name="pinned", pinned=True)],
                       counters=pb.Counters(expirations=3))
    m = _convert.memory(p)
    assert (m.models[0].keep_alive_seconds, m.models[0].expires_in_seconds) == (300.0, 12.5)
    assert (m.models[1].keep_alive_seconds, m.models[1].expires_in_seconds) == (None, None)
    assert m.counters.expirations == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run clients as other uids")
def test_other_uids(daemon: Daemon, simple_swap: fusiond.SwapResult) -> None:
    code = """
import sys, fusiond
c = fusiond.Client(sys.argv[1], timeout=10)
def outcome(f):
    try:
        f(); return "ok"
    except fusiond.Error as e:
        return type(e).__name__ + ": " + e.message
print(outcome(c.health))
print(outcome(lambda: c.job(sys.argv[2])))
print(outcome(lambda: c._result(sys.argv[2], False)))
print(outcome(lambda: c._cancel(sys.argv[2])))
print(outcome(lambda: c.load("face_recognition")))
print(outcome(c.memory))
if len(sys.argv) > 3:  # an image over the memfd threshold: the fd socket refuses this uid too
    big = fusiond.Client(sys.argv[1], timeout=10, memfd_threshold_bytes=1000)
    print(outcome(lambda: big.submit(sys.argv[3], sys.argv[3])))
    print(big.transfer_stats().images_inline_fallback)
"""
    nobody = run_as(NOBODY, code, daemon.socket, simple_swap.job_id)
    assert nobody.returncode == 0, nobody.stderr
    lines = nobody.stdout.splitlines()
    assert lines[0] == "ok" and lines[5] == "ok"
    for line in lines[1:4]:  # another uid's job: never revealed
        assert line.startswith("NotFound: ") and simple_swap.job_id in line
    assert lines[4].startswith("PermissionDenied: ") and "LoadModel" in lines[4]
    outsider = run_as(OUTSIDER, code, daemon.socket, simple_swap.job_id, ASTRONAUT)
    assert outsider.returncode == 0, outsider.stderr
    lines = outsider.stdout.splitlines()
    assert f"PermissionDenied: uid {OUTSIDER} is not allowed" in lines[5]
    # Refused at the fd socket's accept: no inline fallback (it would be refused inline too).
    assert lines[6].startswith("PermissionDenied: ") and str(OUTSIDER) in lines[6], lines[6]
    assert lines[7] == "0"


def test_two_concurrent_clients_and_every_kind_of_image_argument(
        daemon: Daemon, simple_swap: fusiond.SwapResult) -> None:
    cv2 = pytest.importorskip("cv2")
    results: dict = {}

    def run(name: str, source, target, faces: str) -> None:
        with fusiond.Client(daemon.socket, timeout=10) as c:
            results[name] = c.swap(source, target, simple=True, faces=faces)
            results[name + " stats"] = c.transfer_stats()

    with open(HOPPER, "rb") as target_file:
        # Paths; and a BGR array (as OpenCV users hold images) with a binary file object, picking
        # the largest face (Grace has one: the same bytes).
        threads = [threading.Thread(target=run, args=("paths", ASTRONAUT, HOPPER, "all")),
                   threading.Thread(target=run, args=("objects", cv2.imread(ASTRONAUT, cv2.IMREAD_COLOR),
                                                      target_file, "largest"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    for name in ("paths", "objects"):  # the same bytes as the job run alone
        assert results[name].image_bytes == simple_swap.image_bytes, name
        assert results[name].degradations == []
        assert results[name + " stats"].images_inline == 3  # source, target, result
    assert np.array_equal(results["objects"].to_numpy(), simple_swap.to_numpy())


def test_one_client_shared_by_threads(client: fusiond.Client) -> None:
    errors: list = []

    def poll() -> None:
        try:
            for _ in range(20):
                assert client.memory().device.kind == "cpu"
                assert client.health() == fusiond.ServingStatus.SERVING
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def test_async_client(daemon: Daemon, simple_swap: fusiond.SwapResult) -> None:
    async def main() -> None:
        async with fusiond.AsyncClient(daemon.socket, timeout=10) as c:
            assert await c.health() == fusiond.ServingStatus.SERVING
            assert (await c.memory()).device.kind == "cpu"
            assert "face_recognition" in [m.name for m in await c.models()]
            seen: list = []
            # REFERENCE mode with Grace herself as the reference: her one face, the same bytes.
            r = await c.swap(ASTRONAUT, HOPPER, simple=True, faces="reference", reference=HOPPER,
                             on_progress=seen.append)
            assert r.image_bytes == simple_swap.image_bytes and r.faces_swapped == 1
            assert [e.stage for e in seen if isinstance(e, fusiond.StageFinished)] == STAGES
            assert (await c.jobs(limit=1))[0].job_id == r.job_id
            job = await c.job(r.job_id)
            assert [type(e) for e in [e async for e in job.events()]] == [fusiond.Done]
            assert (await job.result()).image_bytes == r.image_bytes
            states = []
            async for state in c.watch_memory(0.1):
                states.append(state.unix_ms)
                if len(states) == 3:
                    break
            assert states == sorted(states) and states[2] - states[0] >= 150
            with pytest.raises(fusiond.NotFound):
                await c.job("j-0123456789abcdef")
            info = await c.load("face_recognition")
            assert info.tier == "device"
            assert (await c.pin("face_recognition")).pinned
            assert not (await c.unpin("face_recognition")).pinned
            assert (await c.unload("face_recognition")).tier != "device"
            doomed = await c.submit(ASTRONAUT, HOPPER, enhance="x4")
            await doomed.cancel()
            assert (await doomed.wait()).state == fusiond.JobState.CANCELLED
            assert (await doomed.refresh()).state == fusiond.JobState.CANCELLED
            with pytest.raises(fusiond.Cancelled):
                await doomed.result()
            assert c.transfer_stats().images_inline == 3 + 2 + 2  # 5 images up, 2 results down
    asyncio.run(main())


def test_watch_memory_stops_when_the_caller_does(client: fusiond.Client) -> None:
    states = []
    for state in client.watch_memory(0.1):
        states.append(state)
        if len(states) == 3:
            break
    assert [s.unix_ms for s in states] == sorted(s.unix_ms for s in states)
    assert all(s.device.kind == "cpu" for s in states)
    assert client.health() == fusiond.ServingStatus.SERVING  # the client is fine afterwards


def test_without_the_fd_socket_images_go_inline_with_the_same_result(
        daemon: Daemon, simple_swap: fusiond.SwapResult, caplog) -> None:
    # The same daemon through a symlink in a directory without "f.sock.fd": every fd-socket
    # transfer fails, so images over the threshold go inline instead, both ways.
    with tempfile.TemporaryDirectory() as d:
        os.symlink(daemon.socket, os.path.join(d, "f.sock"))
        with fusiond.Client(os.path.join(d, "f.sock"), timeout=10, memfd_threshold_bytes=50_000) as c:
            caplog.set_level(logging.DEBUG, logger="fusiond")
            r = c.submit(ASTRONAUT, HOPPER, simple=True).result(prefer_memfd=True)
            t = c.transfer_stats()
    assert r.image_bytes == simple_swap.image_bytes and not r.image_by_memfd
    size_a, size_h = os.path.getsize(ASTRONAUT), os.path.getsize(HOPPER)
    assert (t.images_by_memfd, t.images_inline, t.images_inline_fallback) == (0, 3, 3)
    assert t.bytes_inline == size_a + size_h + len(r.image_bytes)
    notes = [rec.getMessage() for rec in caplog.records if rec.name == "fusiond"]
    assert len(notes) == 3 and "f.sock.fd: cannot reach fusiond" in notes[0]
    assert f"sending the image of {size_a} bytes inline instead" in notes[0]
    assert f"fetching the result of {len(r.image_bytes)} bytes inline instead" in notes[2]


def test_fork_a_used_client_refuses_in_the_child_and_workers_make_their_own(
        daemon: Daemon, client: fusiond.Client) -> None:
    assert client.health() == fusiond.ServingStatus.SERVING
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if the parent's client refuses, naming fork
        code = 1
        try:
            client.health()
        except RuntimeError as e:
            code = 0 if "fork" in str(e) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The pre-fork server pattern (gunicorn --preload): the parent imports fusiond but makes no
    # Client before it forks; each worker makes its own.
    code = """
import os, sys, fusiond
workers = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            with fusiond.Client(sys.argv[1], timeout=10) as mine:
                ok = mine.health() == fusiond.ServingStatus.SERVING and mine.memory().device.kind == "cpu"
        finally:
            os._exit(0 if ok else 1)
    workers.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in workers]
print(codes, fusiond.Client(sys.argv[1]).health().name)
"""
    r = run_as(os.getuid(), code, daemon.socket)
    assert r.returncode == 0 and r.stdout.strip() == "[0, 0] SERVING", r.stderr
