"""fusion.v1 messages <-> the value types of fusiond.types, and swap options -> JobOptions
with the defaults of `fusionctl swap` (client/swap.cc), so the same call gives the same job."""
from __future__ import annotations

import numbers
from typing import Any, Dict, Optional, Tuple

from ._images import ImageInput, read_image
from .errors import InvalidOption
from ._proto.fusion.v1 import fusion_pb2 as pb
from .types import (AnyJobEvent, ClientUsage, Counters, Degradation, Done, FaceReport, FramesDone,
                    JobInfo, JobKind, JobState, LiveLatency, LiveSessionInfo, MemoryState, ModelInfo, Queued, StageFinished,
                    StageReport, StageStarted, SwapResult, TierState)

_SCALES = {None: 0, 0: 0, "none": 0, 2: 2, "x2": 2, 4: 4, "x4": 4}
_UPSCALES = {None: 0, 0: 0, 2: 2, "x2": 2, 4: 4, "x4": 4}
_FACES = {"all": pb.ALL, "largest": pb.LARGEST, "reference": pb.REFERENCE}
_FORMATS = {"png": pb.PNG, "jpeg": pb.JPEG, "jpg": pb.JPEG}
_PRIORITIES = {"low": pb.LOW, "normal": pb.NORMAL, "high": pb.HIGH}
_MODES = {pb.DEVICE: "device", pb.TILED: "tiled", pb.CPU_FALLBACK: "cpu_fallback", pb.HOST: "host"}
_VIDEO_DETECT = {None: pb.VIDEO_DETECT_UNSPECIFIED, "track": pb.VIDEO_DETECT_TRACK,
                 "every-frame": pb.VIDEO_DETECT_EVERY_FRAME}


def _choice(table: Dict[Any, Any], value: Any, name: str) -> Any:
    key = value.lower() if isinstance(value, str) else value
    if key not in table:
        allowed = ", ".join(repr(k) for k in table if k is not None)
        raise ValueError(f"{name}: expected one of {allowed}, not {value!r}")
    return table[key]


def _number(value: Any, name: str, low: float, high: float, allowed: str, *, integer: bool = False,
            high_open: bool = False) -> Any:
    """`value` as a JobOptions number, InvalidOption naming `name` when it is no number or out
    of [low, high] (high excluded when high_open): the daemon's check (job_options.cc), made
    here so that a negative uint32 is not protobuf's raw ValueError."""
    kind = numbers.Integral if integer else numbers.Real  # numpy's numbers too
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidOption(f"options: {name} {value!r} is not {'an integer' if integer else 'a number'}")
    if not (low <= value and (value < high if high_open else value <= high)):
        raise InvalidOption(f"options: {name} {value} is not in {allowed}")
    return value


def job_options(*, ratio: float = 1.0, enhance: Any = None, enhance_model: Optional[str] = None,
                upscale: Any = None, faces: str = "all", reference: Optional[ImageInput] = None,
                reference_max_distance: float = 0.0, max_side: Optional[int] = None,
                low_vram: bool = False, min_face_px: Optional[int] = None,
                min_face_score: Optional[float] = None, simple: bool = False,
                format: str = "png", priority: str = "normal", start_seconds: float = 0.0,
                duration_seconds: float = 0.0, video_crf: Optional[int] = None,
                video_preset: Optional[str] = None, video_detect: Optional[str] = None,
                keyframe_interval: Optional[int] = None,
                **later_options: Any) -> Tuple[pb.JobOptions, Optional[bytes]]:
    """JobOptions of a swap and the reference image's bytes (None when not REFERENCE).
    Raises InvalidOption (an InvalidArgument and a ValueError) naming the option for a value
    fusiond refuses, ValueError/TypeError for a value fusionctl would refuse as a usage error."""
    ratio = _number(ratio, "ratio", 0, 1, "[0,1]")
    reference_max_distance = _number(reference_max_distance, "reference_max_distance", 0, float("inf"), "[0,inf)")
    if max_side is not None:  # any value is clamped to 416..1024 by fusiond
        max_side = _number(max_side, "max_side", 0, 2**32 - 1, "[0,4294967295]", integer=True)
    if min_face_px:
        min_face_px = _number(min_face_px, "min_face_px", 8, 100000, "[8,100000]", integer=True)
    if min_face_score:
        min_face_score = _number(min_face_score, "min_face_score", 0, 1, "(0,1)", high_open=True)
        if min_face_score <= 0:
            raise InvalidOption(f"options: min_face_score {min_face_score} is not in (0,1)")
    start_seconds = _number(start_seconds, "start_seconds", 0, 1e7, "[0,1e7)", high_open=True)
    duration_seconds = _number(duration_seconds, "duration_seconds", 0, 1e7, "[0,1e7)", high_open=True)
    if video_crf:
        video_crf = _number(video_crf, "video_crf", 1, 51, "[1,51] (0 = 18)", integer=True)
    if keyframe_interval:
        keyframe_interval = _number(keyframe_interval, "keyframe_interval", 1, 300, "[1,300] (0 = 15)",
                                    integer=True)
    if max_side and low_vram:
        raise ValueError("max_side and low_vram exclude each other (low_vram is max_side 640)")
    if isinstance(faces, str) and faces.startswith("reference:"):
        faces, reference = "reference", faces[len("reference:"):]
    mode = _choice(_FACES, faces, "faces")
    if mode == pb.REFERENCE and reference is None:
        raise ValueError("faces='reference' needs reference= (an image with the face to pick)")
    if mode != pb.REFERENCE and reference is not None:
        raise ValueError("reference= is used with faces='reference' only")
    o = pb.JobOptions(
        ratio=ratio, enhance_scale=_choice(_SCALES, enhance, "enhance"),
        enhance_model=enhance_model or "",
        upscale=_choice(_UPSCALES, upscale, "upscale"),
        faces=mode, reference_max_distance=reference_max_distance, max_side=max_side or 0,
        low_vram=low_vram, min_face_px=min_face_px or 0, min_face_score=min_face_score or 0.0,
        simple=simple, format=_choice(_FORMATS, format, "format"),
        priority=_choice(_PRIORITIES, priority, "priority"), start_seconds=start_seconds,
        duration_seconds=duration_seconds, video_crf=video_crf or 0,
        video_preset=video_preset or "",
        video_detect=_choice(_VIDEO_DETECT, video_detect, "video_detect"),
        keyframe_interval=keyframe_interval or 0)
    for name, value in later_options.items():  # JobOptions fields newer than this client
        if name not in pb.JobOptions.DESCRIPTOR.fields_by_name or name == "reference":
            raise TypeError(f"swap() got an unexpected keyword argument '{name}' "
                            "(not a fusion.v1.JobOptions field)")
        setattr(o, name, value)
    ref = read_image(reference, "reference image") if reference is not None else None
    return o, ref


def live_options(*, ratio: float = 1.0, enhance: Any = None, enhance_model: Optional[str] = None,
                 faces: str = "all", max_side: Optional[int] = None, low_vram: bool = False,
                 simple: bool = False, min_face_px: Optional[int] = None,
                 min_face_score: Optional[float] = None, video_detect: Optional[str] = None,
                 keyframe_interval: Optional[int] = None) -> pb.JobOptions:
    """The JobOptions of a live session: the options a session reads (LiveOpen in fusion.proto),
    checked as job_options does; faces "all" or "largest" (a session has no reference). Any
    other keyword is a TypeError here, before anything is sent."""
    if _choice(_FACES, faces, "faces") == pb.REFERENCE:
        raise ValueError("faces: a live session swaps 'all' or 'largest', not 'reference'")
    options, _ = job_options(ratio=ratio, enhance=enhance, enhance_model=enhance_model, faces=faces,
                             max_side=max_side, low_vram=low_vram, simple=simple, min_face_px=min_face_px,
                             min_face_score=min_face_score, video_detect=video_detect,
                             keyframe_interval=keyframe_interval)
    return options


def tier(p: pb.TierState) -> TierState:
    return TierState(tier=p.tier, kind=p.kind, capacity_bytes=p.capacity_bytes,
                     available_bytes=p.available_bytes, budget_bytes=p.budget_bytes,
                     limit_bytes=p.limit_bytes, used_bytes=p.used_bytes,
                     reserved_bytes=p.reserved_bytes, peak_bytes=p.peak_bytes,
                     external_bytes=p.external_bytes, over_budget=p.over_budget,
                     cache_bytes=p.cache_bytes)


def model(p: pb.ModelInfo) -> ModelInfo:
    return ModelInfo(name=p.name, stage=p.stage, state=p.state, tier=p.tier, bytes=p.bytes,
                     host_bytes=p.host_bytes, pinned=p.pinned, leases=p.leases,
                     last_use_unix_ms=p.last_use_unix_ms, loads=p.loads, uploads=p.uploads,
                     evictions=p.evictions, hits=p.hits, misses=p.misses, one_shot=p.one_shot,
                     tileable=p.tileable,
                     keep_alive_seconds=(p.keep_alive_seconds
                                         if p.HasField("keep_alive_seconds") else None),
                     expires_in_seconds=(p.expires_in_seconds
                                         if p.HasField("expires_in_seconds") else None))


def memory(p: pb.MemoryState) -> MemoryState:
    c = p.counters
    return MemoryState(
        device=tier(p.device), host=tier(p.host), models=[model(m) for m in p.models],
        clients=[ClientUsage(uid=u.uid, jobs_queued=u.jobs_queued, jobs_running=u.jobs_running,
                             working_bytes=u.working_bytes) for u in p.clients],
        counters=Counters(bytes_uploaded=c.bytes_uploaded, loads=c.loads, uploads=c.uploads,
                          evictions=c.evictions, hits=c.hits, misses=c.misses, waits=c.waits,
                          refusals=c.refusals, oom_recovered=dict(c.oom_recovered),
                          expirations=c.expirations),
        unix_ms=p.unix_ms, live_sessions=[live_session(s) for s in p.live_sessions])


def live_session(p: pb.LiveSessionInfo) -> LiveSessionInfo:
    lat = p.latency
    return LiveSessionInfo(session_id=p.session_id, owner_uid=p.owner_uid, started_unix_ms=p.started_unix_ms,
                           device=p.device, models=list(p.models), model_bytes=p.model_bytes,
                           frames_received=p.frames_received, frames_returned=p.frames_returned,
                           frames_dropped=p.frames_dropped,
                           latency=LiveLatency(frames=lat.frames, p50_ms=lat.p50_ms, p95_ms=lat.p95_ms,
                                               p99_ms=lat.p99_ms))


def job(p: pb.Job) -> JobInfo:
    return JobInfo(job_id=p.job_id, owner_uid=p.owner_uid, state=JobState(p.state), stage=p.stage,
                   queue_position=p.queue_position, progress=p.progress,
                   created_unix_ms=p.created_unix_ms, started_unix_ms=p.started_unix_ms,
                   finished_unix_ms=p.finished_unix_ms, error_code=p.error_code,
                   error_message=p.error_message, cancel_requested=p.cancel_requested,
                   frames_done=p.frames_done, frames_total=p.frames_total,
                   frames_per_second=p.frames_per_second, error_stage=p.error_stage)


def stage(p: pb.StageReport) -> StageReport:
    return StageReport(name=p.name, model=p.model, ms=p.ms, mode=_MODES.get(p.mode, "unspecified"),
                       attempts=p.attempts, tile=p.tile, upload_wait_ms=p.upload_wait_ms,
                       peak_bytes=p.peak_bytes)


def event(p: pb.JobEvent) -> AnyJobEvent:
    which = p.WhichOneof("event")
    jid, ms = p.job_id, p.unix_ms
    if which == "queued":
        return Queued(jid, ms, position=p.queued.position)
    if which == "stage_started":
        return StageStarted(jid, ms, stage=p.stage_started.stage, progress=p.stage_started.progress)
    if which == "stage_finished":
        f = p.stage_finished
        return StageFinished(jid, ms, stage=f.report.name, progress=f.progress, report=stage(f.report))
    if which == "degradation":
        return Degradation(jid, ms, text=p.degradation)
    if which == "frames":
        fr = p.frames
        return FramesDone(jid, ms, frames_done=fr.frames_done, frames_total=fr.frames_total,
                          frames_per_second=fr.frames_per_second, progress=fr.progress)
    return Done(jid, ms, job=job(p.done.job))


def result(p: pb.JobResult, image: bytes, by_memfd: bool) -> SwapResult:
    kind = JobKind(p.kind)
    fmt = "mp4" if kind == JobKind.VIDEO else ("jpeg" if p.format == pb.JPEG else "png")
    return SwapResult(
        job_id=p.job_id, state=JobState(p.state), device=p.device, faces_swapped=p.faces_swapped,
        faces=[FaceReport(box=tuple(f.box) + (0.0,) * (4 - len(f.box)),  # type: ignore[arg-type]
                          identity_distance=f.identity_distance,
                          target_identity_distance=f.target_identity_distance,
                          score=f.score) for f in p.faces],
        stages=[stage(s) for s in p.stages], degradations=list(p.degradations), image_bytes=image,
        image_by_memfd=by_memfd, format=fmt, width=p.width, height=p.height, kind=kind,
        frames_total=p.frames_total, frames_swapped=p.frames_swapped,
        frames_without_face=p.frames_without_face, frame_rate=p.frame_rate,
        duration_seconds=p.duration_seconds, frames_per_second=p.frames_per_second,
        frames_resumed=p.frames_resumed, chunk_frames=p.chunk_frames,
        identity_distance_median=p.identity_distance_median,
        identity_distance_worst=p.identity_distance_worst, keyframes=p.keyframes,
        frames_tracked=p.frames_tracked, tracks=p.tracks, flicker_ratio=p.flicker_ratio)
