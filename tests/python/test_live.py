"""Live sessions of the Python SDK (fusiond.Client.live, fusiond.AsyncClient.live) against a
real fusiond: frames back in order and swapped, the daemon's newest-frame-wins counts, memfd
frames, errors with their stage, the async variant, the leases gone after the session, and the
open session listed (live_sessions, memory) with its counts, latency and leases."""
from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
from typing import AsyncIterator, Dict, Iterator, List

import numpy as np
import pytest

import fusiond
from conftest import ASTRONAUT, HOPPER, NOBODY, Daemon, read, run_as

cv2 = pytest.importorskip("cv2")


def hopper() -> np.ndarray:
    image = cv2.imread(HOPPER, cv2.IMREAD_COLOR)
    assert image is not None and image.shape == (600, 512, 3)
    return image


def changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Pixels whose colour moved by more than 24 levels in some channel."""
    return np.abs(before.astype(np.int16) - after.astype(np.int16)).max(axis=2) > 24


def assert_face_swapped(before: np.ndarray, after: np.ndarray) -> None:
    """Hopper's face region changed, the frame's border did not (a swap, not a filter)."""
    assert after.shape == before.shape
    moved = changed(before, after)
    face = moved[150:420, 130:400]  # her face, the box the detector finds (jobs' reports)
    assert face.mean() > 0.05, f"only {face.mean():.3f} of the face region changed"
    border = np.concatenate([moved[:40].ravel(), moved[-40:].ravel(), moved[:, :40].ravel(), moved[:, -40:].ravel()])
    assert border.mean() < 0.001, f"{border.mean():.4f} of the border changed"


def leases(client: fusiond.Client) -> Dict[str, int]:
    return {m.name: m.leases for m in client.memory().models if m.leases}


def wait_no_leases(client: fusiond.Client, within: float = 2.0) -> float:
    """Seconds until no model has a lease (fails past ``within``)."""
    start = time.monotonic()
    while (held := leases(client)):
        assert time.monotonic() - start < within, f"leases still held {within} s after the session: {held}"
        time.sleep(0.05)
    return time.monotonic() - start


def test_frames_come_back_in_order_swapped_with_counts(daemon: Daemon, client: fusiond.Client) -> None:
    frame = hopper()
    frames = [frame] * 12  # sent as fast as gRPC takes them: the daemon drops all but the newest waiting
    with client.live(ASTRONAUT, simple=True) as session:
        assert session.opened.device == "cpu"
        assert {"ssd_mobilenetv1", "face_landmark_68"} <= set(session.opened.models), session.opened
        assert session.opened.model_bytes > 0
        held = leases(client)
        assert set(session.opened.models) <= set(held), held  # leased while the session is open
        results = list(session.swap(frames))
    summary = session.summary
    assert summary is not None and session.ended
    assert summary.frames_received == 12
    assert summary.frames_returned == len(results) >= 2
    assert summary.frames_received == summary.frames_returned + summary.frames_dropped
    sequences = [r.sequence for r in results]
    assert sequences == sorted(set(sequences)) and set(sequences) <= set(range(12)), sequences
    assert sequences[-1] == 11  # after the half-close the frame waiting is swapped: the last always comes back
    assert results[-1].frames_dropped == summary.frames_dropped
    assert [r.frames_dropped for r in results] == sorted(r.frames_dropped for r in results)
    assert results[0].keyframe  # the detector scans the session's first frame
    for r in results:
        assert (r.format, r.width, r.height, r.faces_swapped) == ("raw", 512, 600, 1)
        assert len(r.image_bytes) == 512 * 600 * 3
        t = r.timings
        assert t.total_ms >= t.swap_ms > 0 and 0 <= t.decode_ms < 50 and 0 <= t.encode_ms < 50, t  # raw: copies, no codec
        assert r.latency_ms >= t.total_ms * 0.5 > 0  # measured here: sent -> received
        assert any(s.name == "generate" for s in r.stages), r.stages
        assert_face_swapped(frame, r.to_numpy())


def test_lockstep_send_and_receive_encoded_frames(client: fusiond.Client) -> None:
    jpeg, grey = read(HOPPER), cv2.imencode(".png", np.full((240, 320, 3), 128, np.uint8))[1].tobytes()
    with client.live(read(ASTRONAUT), ratio=1.0, keyframe_interval=1) as session:
        got: List[fusiond.LiveResult] = []
        for i, frame in enumerate([jpeg, grey, jpeg]):
            assert session.send(frame, sequence=100 + i) == 100 + i
            got.append(next(session))  # one at a time: nothing waits, nothing is dropped
        session.close_send()
        assert list(session) == []
    assert [r.sequence for r in got] == [100, 101, 102]
    assert [(r.format, r.width, r.height) for r in got] == [("jpeg", 512, 600), ("png", 320, 240), ("jpeg", 512, 600)]
    assert [r.faces_swapped for r in got] == [1, 0, 1]
    assert all(r.keyframe for r in got)  # keyframe_interval 1
    assert all(r.frames_dropped == 0 for r in got)
    assert session.summary == fusiond.LiveSummary(frames_received=3, frames_returned=3, frames_dropped=0)
    assert got[0].image_bytes.startswith(b"\xff\xd8\xff") and got[1].image_bytes.startswith(b"\x89PNG")
    assert (got[1].to_numpy() == 128).all()  # no face: the frame comes back as it went
    assert_face_swapped(hopper(), got[0].to_numpy())
    with pytest.raises(ValueError, match="ended"):
        session.send(jpeg)


def test_a_sender_that_outpaces_the_daemon_is_dropped_not_queued(daemon: Daemon) -> None:
    # Frames over the memfd threshold go by memfd (64 KiB here: every 921600-byte raw frame).
    frame = hopper()
    with fusiond.Client(daemon.socket, timeout=10, memfd_threshold_bytes=64 << 10) as client:
        with client.live(ASTRONAUT, simple=True) as session:
            results = list(session.swap(frame for _ in range(40)))
        stats = client.transfer_stats()
    s = session.summary
    assert s is not None and s.frames_received == 40 and s.frames_dropped > 0, s
    assert s.frames_returned == len(results) == 40 - s.frames_dropped
    assert results[-1].sequence == 39
    assert stats.images_by_memfd == 41 and stats.bytes_by_memfd >= 40 * 921600, stats  # 40 frames + the source
    assert all(r.faces_swapped == 1 for r in results)


OUTPACE = r"""
import sys
import numpy as np
import fusiond

def peak_mib():  # the process's peak resident memory so far
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024

socket, source, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
frame = np.random.default_rng(1).integers(0, 255, (720, 1280, 3), np.uint8)  # 2.6 MiB raw
with fusiond.Client(socket, timeout=10) as client:
    with client.live(source, simple=True) as session:  # warm: gRPC's buffers, the models
        list(session.swap([frame] * 3))
    before = peak_mib()
    with client.live(source, simple=True) as session:
        returned = sum(1 for _ in session.swap(frame for _ in range(n)))  # none kept: 2.6 MiB each
    s = session.summary
    print(f"{peak_mib() - before:.1f} {s.frames_received} {returned} {s.frames_dropped}")
"""


def test_a_sender_that_outpaces_the_daemon_does_not_grow_memory(daemon: Daemon) -> None:
    # 300 raw 720p frames (790 MiB) from a generator as fast as it yields: the SDK holds at most
    # two (its one-frame mailbox, the one gRPC writes), fusiond drops all but the newest
    # waiting. A queue in the SDK would grow by hundreds of MiB here (750 MiB measured with a
    # queue.Queue in place of the mailbox); in its own process, for its own peak.
    r = subprocess.run([sys.executable, "-c", OUTPACE, daemon.socket, ASTRONAUT, "300"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    growth, received, returned, dropped = r.stdout.split()
    assert int(received) == 300 and int(returned) + int(dropped) == 300 and int(dropped) > 100, r.stdout
    assert float(growth) < 100, f"the peak grew by {growth} MiB while streaming"


def test_a_frame_that_does_not_decode_ends_the_session_with_stage_decode(client: fusiond.Client) -> None:
    session = client.live(ASTRONAUT)
    with session:
        session.send(hopper())
        assert next(session).faces_swapped == 1
        session.send(b"not an image at all", sequence=7)
        with pytest.raises(fusiond.InvalidArgument) as e:
            next(session)
    assert e.value.stage == "decode"
    assert "sequence 7" in e.value.message, e.value.message
    assert session.ended and session.summary is None
    with pytest.raises(fusiond.InvalidArgument):  # the session's error, again
        session.send(hopper())
    wait_no_leases(client)


def test_swap_raises_the_stage_of_a_bad_frame(client: fusiond.Client) -> None:
    with client.live(ASTRONAUT) as session:
        with pytest.raises(fusiond.InvalidArgument) as e:
            for _ in session.swap([hopper(), b"\x89PNG\r\n\x1a\n truncated"]):
                pass
    assert e.value.stage == "decode", e.value
    assert e.value.code.name == "INVALID_ARGUMENT"


def test_a_source_without_a_face_is_failed_precondition_stage_detect(client: fusiond.Client) -> None:
    grey = np.full((200, 200, 3), 128, np.uint8)
    with pytest.raises(fusiond.FailedPrecondition) as e:
        client.live(grey)
    assert e.value.stage == "detect" and "face" in e.value.message, e.value


def test_options_a_session_does_not_take_are_refused_before_sending(client: fusiond.Client) -> None:
    with pytest.raises(TypeError):
        client.live(ASTRONAUT, upscale="x2")  # not an option of a session
    with pytest.raises(ValueError, match="reference"):
        client.live(ASTRONAUT, faces="reference")
    with pytest.raises(fusiond.InvalidOption, match="keyframe_interval"):
        client.live(ASTRONAUT, keyframe_interval=301)
    with pytest.raises(ValueError, match="HxWx3"):
        with client.live(ASTRONAUT) as session:
            session.send(np.zeros((10, 10, 4), np.uint8))


def test_an_exception_in_the_frames_cancels_the_session(client: fusiond.Client) -> None:
    def frames() -> Iterator[np.ndarray]:
        yield hopper()
        raise KeyError("camera gone")

    with client.live(ASTRONAUT) as session:
        with pytest.raises(KeyError, match="camera gone"):
            list(session.swap(frames()))
    assert session.ended and session.summary is None
    wait_no_leases(client)


def test_leases_are_gone_shortly_after_the_session_ends(daemon: Daemon, client: fusiond.Client) -> None:
    # Ended by its summary.
    with client.live(ASTRONAUT) as session:
        session.send(hopper())
        assert next(session).faces_swapped == 1
        held = leases(client)
        assert held and set(held) == set(session.opened.models), held  # one lease each, the session's
        session.close_send()
        assert list(session) == [] and session.summary is not None
    assert wait_no_leases(client) < 1.5
    # Ended by the client stopping early (break cancels the stream).
    with client.live(ASTRONAUT) as session:
        for _ in session.swap(hopper() for _ in range(1000)):
            break
    assert session.ended
    assert wait_no_leases(client) < 1.5
    # fusionctl mem --json agrees.
    r = daemon.ctl(["mem", "--json"])
    assert r.returncode == 0, r.stderr
    import json
    assert all(m["leases"] == 0 for m in json.loads(r.stdout)["models"]), r.stdout


def test_a_session_dropped_without_close_is_released(client: fusiond.Client) -> None:
    import gc
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a, b = client.live(ASTRONAUT), client.live(ASTRONAUT)  # the uid's limit: 2
        a.send(hopper())
        assert next(a).faces_swapped == 1
        del a, b
        gc.collect()
    assert sum(issubclass(w.category, ResourceWarning) for w in caught) == 2, [str(w.message) for w in caught]
    assert wait_no_leases(client) < 1.5
    deadline = time.monotonic() + 2
    while client.live_sessions():
        assert time.monotonic() < deadline, client.live_sessions()
        time.sleep(0.05)
    with client.live(ASTRONAUT) as session:  # a slot is free again
        session.send(hopper())
        assert next(session).faces_swapped == 1


def test_the_error_stage_of_a_submit_that_does_not_decode(client: fusiond.Client) -> None:
    with pytest.raises(fusiond.InvalidArgument) as e:
        client.submit(ASTRONAUT, b"neither an image nor a video")
    assert e.value.stage == "decode", e.value


def test_async_live_session(daemon: Daemon) -> None:
    frame = hopper()

    async def frames() -> AsyncIterator[np.ndarray]:
        for _ in range(8):
            yield frame
            await asyncio.sleep(0)

    async def main() -> None:
        async with fusiond.AsyncClient(daemon.socket, timeout=10) as client:
            async with client.live(ASTRONAUT, simple=True) as session:
                assert session.opened.device == "cpu" and session.opened.models
                results = [r async for r in session.swap(frames())]
            s = session.summary
            assert s is not None and s.frames_received == 8
            assert s.frames_returned + s.frames_dropped == 8 == len(results) + s.frames_dropped
            sequences = [r.sequence for r in results]
            assert sequences == sorted(set(sequences)) and sequences[-1] == 7
            assert all(r.faces_swapped == 1 and r.format == "raw" for r in results)
            assert_face_swapped(frame, results[-1].to_numpy())
            # By hand, and a bad frame: InvalidArgument with stage 'decode'.
            async with client.live(ASTRONAUT) as session:
                assert await session.send(read(HOPPER)) == 0
                first = await session.__anext__()
                assert (first.sequence, first.format, first.faces_swapped) == (0, "jpeg", 1)
                await session.send(b"garbage")
                with pytest.raises(fusiond.InvalidArgument) as e:
                    await session.__anext__()
                assert e.value.stage == "decode"
            # No face in the source.
            with pytest.raises(fusiond.FailedPrecondition) as e2:
                async with client.live(np.full((120, 120, 3), 90, np.uint8)):
                    pass
            assert e2.value.stage == "detect"

    asyncio.run(main())
    with fusiond.Client(daemon.socket, timeout=10) as client:
        wait_no_leases(client)


def test_an_async_session_dropped_without_close_is_released(daemon: Daemon) -> None:
    import gc
    import warnings

    async def main() -> None:
        async with fusiond.AsyncClient(daemon.socket, timeout=10) as client:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                a = await client.live(ASTRONAUT).open()
                b = await client.live(ASTRONAUT).open()  # the uid's limit: 2
                del a, b
                gc.collect()
            assert sum(issubclass(w.category, ResourceWarning) for w in caught) == 2, [str(w.message) for w in caught]
            deadline = time.monotonic() + 2
            while await client.live_sessions():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            async with client.live(ASTRONAUT) as session:  # a slot is free again
                await session.send(hopper())
                assert (await session.__anext__()).faces_swapped == 1

    asyncio.run(main())
    with fusiond.Client(daemon.socket, timeout=10) as client:
        wait_no_leases(client)


def nearest_rank(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(max(math.ceil(p * len(ordered)), 1), len(ordered)) - 1]


def test_an_open_session_is_listed_with_its_counts_latency_and_leases(daemon: Daemon, client: fusiond.Client) -> None:
    assert client.live_sessions() == [] and client.memory().live_sessions == []
    started = int(time.time() * 1000)
    with client.live(ASTRONAUT) as session:
        totals = []
        for i in range(3):  # one at a time: nothing waits, nothing is dropped
            session.send(hopper(), sequence=i)
            totals.append(next(session).timings.total_ms)
        listed = client.live_sessions()
        assert len(listed) == 1, listed
        s = listed[0]
        assert s.session_id.startswith("live-") and s.owner_uid == os.geteuid()
        assert started <= s.started_unix_ms <= int(time.time() * 1000)
        assert s.device == "cpu"
        assert sorted(s.models) == sorted(session.opened.models)
        assert s.model_bytes == session.opened.model_bytes > 0
        assert (s.frames_received, s.frames_returned, s.frames_dropped) == (3, 3, 0)
        # The percentiles are of the very total_ms the results carried.
        assert s.latency == fusiond.LiveLatency(frames=3, p50_ms=nearest_rank(totals, 0.5),
                                                p95_ms=nearest_rank(totals, 0.95), p99_ms=nearest_rank(totals, 0.99))
        assert client.memory().live_sessions == [s]
        # Another uid sees none of it and may not list every uid's.
        code = ("import sys, fusiond\n"
                "c = fusiond.Client(sys.argv[1])\n"
                "print(len(c.live_sessions()), len(c.memory().live_sessions))\n"
                "try:\n    c.live_sessions(all_uids=True)\nexcept fusiond.PermissionDenied:\n    print('denied')\n")
        nobody = run_as(NOBODY, code, daemon.socket)
        assert nobody.returncode == 0, nobody.stderr
        assert nobody.stdout.split() == ["0", "0", "denied"], nobody.stdout
        assert [x.session_id for x in client.live_sessions(all_uids=True)] == [s.session_id]  # root: an admin
        session.close_send()
        assert list(session) == []
    ended = time.monotonic()
    while client.live_sessions() or client.memory().live_sessions:
        assert time.monotonic() - ended < 1.0, "the session is still listed a second after its end"
        time.sleep(0.02)
