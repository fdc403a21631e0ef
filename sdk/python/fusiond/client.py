"""fusiond.Client: the blocking client of fusiond (gRPC over its Unix socket).

Thread-safety: one Client may be shared by every thread of a process (a web server's worker
threads): its gRPC channel multiplexes concurrent calls and its transfer counters are under a
lock. A Job handle may be used from any thread.

Fork-safety: gRPC (its core, not only a channel) does not survive fork() once a process has
made a channel. Make Clients only in the processes that use them, after they fork: in each
gunicorn/uvicorn worker (the app's startup hook, gunicorn's post_fork), never in a parent that
forks afterwards (gunicorn --preload may import fusiond, but must not make a Client). A Client
used in a child of the process that made it raises RuntimeError instead of hanging. A parent
that must use gRPC before it forks needs gRPC's fork support: start it with
GRPC_ENABLE_FORK_SUPPORT=true GRPC_POLL_STRATEGY=poll in its environment.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union, cast

import grpc

from . import _convert
from ._images import ImageInput, read_image
from ._proto.fusion.v1 import fusion_pb2 as pb
from ._proto.fusion.v1 import fusion_pb2_grpc as pb_grpc
from ._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
from ._transport import Transport
from .errors import Error, error_for_number
from .live import LiveSession
from .types import (AnyJobEvent, Done, JobInfo, JobState, LiveSessionInfo, MemoryState, ModelInfo, ServingStatus,
                    SwapResult, TransferStats)

# SubmitJob, GetJobResult, LoadModel and PinModel carry images or may upload: 30x the timeout
# (as the C++ SDK).
LONG_CALL_FACTOR = 30
ProgressCallback = Callable[[AnyJobEvent], None]


def job_failure(info: JobInfo) -> Error:
    """The error of a FAILED or CANCELLED job (its code, "job ID FAILED: message")."""
    return error_for_number(info.error_code or 2,
                            f"job {info.job_id} {info.state.name}: {info.error_message}")


class Client:
    """A client of fusiond at ``socket`` (a path or "unix://path"; None: $FUSIOND_SOCKET,
    else /run/fusiond/fusiond.sock). ``timeout`` is the deadline of each unary call, seconds
    (calls that carry images or upload models get 30x). Images larger than
    ``memfd_threshold_bytes`` travel as sealed memfds over ``<socket>.fd``;
    ``max_message_bytes`` is the daemon's limit, used to decide whether an image may go
    inline when the fd socket refuses it. Nothing connects until the first call.

    Errors are fusiond.Error subclasses (fusiond.Unavailable "cannot reach fusiond at ..."
    when no daemon answers). Use as a context manager, or call close()."""

    def __init__(self, socket: Optional[str] = None, timeout: float = 2.0, *,
                 memfd_threshold_bytes: int = 4 << 20, max_message_bytes: int = 32 << 20) -> None:
        self._t = Transport(socket, timeout, memfd_threshold_bytes, max_message_bytes)
        self._channel = grpc.insecure_channel(self._t.target, options=self._t.channel_options)
        self._stub = pb_grpc.FusionStub(self._channel)  # type: ignore[no-untyped-call]
        self._health = health_pb2_grpc.HealthStub(self._channel)  # type: ignore[no-untyped-call]
        self._closed = threading.Event()

    # ---- lifetime ----
    def close(self) -> None:
        """Closes the channel (calls in flight are cancelled). Idempotent."""
        if not self._closed.is_set():
            self._closed.set()
            self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def target(self) -> str:
        """"unix:///path/to.sock"."""
        return self._t.target

    @property
    def socket_path(self) -> str:
        return self._t.socket_path

    def transfer_stats(self) -> TransferStats:
        """How this client's images travelled so far (a snapshot; thread-safe)."""
        return self._t.stats()

    # ---- plumbing ----
    def _call(self, method: Callable[..., Any], request: Any, factor: int = 1) -> Any:
        self._t.check_pid()
        try:
            return method(request, timeout=self._t.timeout * factor)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _error(self, e: grpc.RpcError) -> Error:
        ready = None
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            # Whether the channel has a connection: a deadline without one means nobody
            # answered (Unavailable). Asked only here: watching the channel's state for its
            # whole life costs a polling thread (and ~0.2 s at close).
            try:
                grpc.channel_ready_future(self._channel).result(timeout=0.05)
                ready = True
            except grpc.FutureTimeoutError:
                ready = False
        return self._t.error(e, ready)

    def _stream(self, call: Any) -> Iterator[Any]:
        """Yields a server stream's messages; cancels the call when the caller stops early."""
        try:
            for message in call:
                yield message
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED or not call.cancelled():
                raise self._error(e) from None
        finally:
            call.cancel()

    # ---- health and memory ----
    def health(self, service: str = "") -> ServingStatus:
        """grpc.health.v1 Check of ``service`` ("" = the whole server, or "fusion.v1.Fusion").
        Raises fusiond.Unavailable when the daemon cannot be reached."""
        r = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return ServingStatus(r.status)

    def memory(self) -> MemoryState:
        """Device and host tiers, models, clients and counters (`fusionctl mem`)."""
        return _convert.memory(self._call(self._stub.GetMemoryState, pb.GetMemoryStateRequest()))

    def watch_memory(self, interval: float = 1.0) -> Iterator[MemoryState]:
        """One MemoryState now, then one every ``interval`` seconds (at least 0.1) until the
        caller stops iterating (break, or close() of the generator); no deadline."""
        self._t.check_pid()
        call = self._stub.WatchMemory(pb.WatchMemoryRequest(interval_ms=max(100, round(interval * 1000))))
        for state in self._stream(call):
            yield _convert.memory(state)

    # ---- models (catalogue names, never paths) ----
    def models(self) -> List[ModelInfo]:
        """Every catalogue model with its residency."""
        r = self._call(self._stub.ListModels, pb.ListModelsRequest())
        return [_convert.model(m) for m in r.models]

    def load(self, name: str) -> ModelInfo:
        """Brings the model to the device tier (evictable). Admins only (PermissionDenied);
        NotFound for an unknown name; ResourceExhausted/DeadlineExceeded when it does not fit."""
        return _convert.model(self._call(self._stub.LoadModel, pb.ModelRequest(name=name), LONG_CALL_FACTOR))

    def unload(self, name: str) -> ModelInfo:
        """Drops the model's device and host copies (FailedPrecondition when pinned or in use)."""
        return _convert.model(self._call(self._stub.UnloadModel, pb.ModelRequest(name=name)))

    def pin(self, name: str) -> ModelInfo:
        """Loads the model and never evicts it (FailedPrecondition when pins would exceed the
        device budget)."""
        return _convert.model(self._call(self._stub.PinModel, pb.ModelRequest(name=name), LONG_CALL_FACTOR))

    def unpin(self, name: str) -> ModelInfo:
        return _convert.model(self._call(self._stub.UnpinModel, pb.ModelRequest(name=name)))

    # ---- live sessions ----
    def live(self, source: ImageInput, **options: Any) -> LiveSession:
        """Opens a live session (fusiond.live: frames in, swapped frames out, in order) with the
        face of ``source`` and returns it once the daemon has leased the session's models and
        analysed the source::

            with client.live("me.png", simple=True) as session:
                for result in session.swap(frames):   # numpy BGR arrays or encoded images
                    ...                               # result.to_numpy(), result.timings
            session.summary                           # frames received, returned, dropped

        ``options``: ratio, enhance ("x2"/"x4"), enhance_model, faces ("all"/"largest"),
        max_side or low_vram, simple, min_face_px, min_face_score, video_detect ("track" /
        "every-frame"), keyframe_interval — as :meth:`swap`; others are a TypeError.
        Raises FailedPrecondition (stage "detect") when the source has no face,
        InvalidArgument (stage "decode") when it does not decode, ResourceExhausted when the
        session's models cannot be held on the device or the uid has max_live_sessions_per_uid
        sessions open. No deadline: a session lives until it ends or is closed."""
        return LiveSession(self, source, _convert.live_options(**options))

    # ---- jobs ----
    def submit(self, source: ImageInput, target: ImageInput, **options: Any) -> "Job":
        """Submits a swap of the face in ``source`` onto the faces of ``target`` and returns
        its Job, QUEUED (already in the daemon's journal). Options as :meth:`swap`."""
        opts, reference = _convert.job_options(**options)
        src, tgt = read_image(source, "source image"), read_image(target, "target image")
        self._t.check_pid()
        request = self._t.submit_request(src, tgt, opts, reference)
        r = self._call(self._stub.SubmitJob, request, LONG_CALL_FACTOR)
        return Job(self, _convert.job(r.job))

    def swap(self, source: ImageInput, target: ImageInput, *, ratio: float = 1.0,
             enhance: Union[None, str, int] = None, upscale: Union[None, str, int] = None,
             faces: str = "all", reference: Optional[ImageInput] = None,
             max_side: Optional[int] = None, low_vram: bool = False, simple: bool = False,
             format: str = "png", priority: str = "normal",
             on_progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None,
             **later_options: Any) -> SwapResult:
        """Swaps the face of ``source`` into ``target``'s faces, waits, and returns the result.

        ``source``/``target``/``reference``: bytes of an encoded image (a target may also be a
        video: MP4/MOV, MKV/WebM, AVI), a path (read here, never sent as a path), a binary file
        object, or a numpy HxWx3/4 uint8 BGR array (encoded losslessly as PNG).
        Options are fusion.v1.JobOptions with `fusionctl swap`'s defaults, so the same call
        gives the same bytes: ``ratio`` in [0,1] (0 keeps the target face); ``enhance``
        None/"x2"/"x4" face super-resolution; ``upscale`` None/"x2"/"x4" of the whole frame;
        ``faces`` "all"/"largest"/"reference" (with ``reference``); ``max_side`` cap on one
        detection pass's input side, pixels (416..1024; None = 1024), or ``low_vram`` (640);
        ``simple`` skips colour correction and Poisson blending; ``format`` "png"/"jpeg";
        ``priority`` "low"/"normal"/"high". ``later_options``: any other JobOptions field by
        name (min_face_px, min_face_score, reference_max_distance, enhance_model,
        start_seconds, duration_seconds, video_crf, video_preset, video_detect ("track", the
        default: detect on keyframes and track faces between them, or "every-frame"),
        keyframe_interval (1..300 frames between tracking's periodic keyframes; None = 15), and
        fields newer than this client). ``on_progress`` is called with each progress event on
        this thread; ``timeout`` bounds the wait for the job, seconds (None: no limit;
        DeadlineExceeded).

        Raises the job's error when it fails (e.g. FailedPrecondition for no face in the
        source, InvalidArgument for a bad image)."""
        job = self.submit(source, target, ratio=ratio, enhance=enhance, upscale=upscale, faces=faces,
                          reference=reference, max_side=max_side, low_vram=low_vram, simple=simple,
                          format=format, priority=priority, **later_options)
        return job.result(timeout=timeout, on_progress=on_progress)

    def jobs(self, states: Sequence[JobState] = (), limit: int = 0) -> List[JobInfo]:
        """The caller's jobs, newest first; ``states`` empty = all; ``limit`` 0 = all."""
        r = self._call(self._stub.ListJobs, pb.ListJobsRequest(states=[cast(Any, s.value) for s in states], limit=limit))
        return [_convert.job(j) for j in r.jobs]

    def live_sessions(self, all_uids: bool = False) -> List[LiveSessionInfo]:
        """The caller's open live sessions, in the order they started; ``all_uids``: every uid's
        (admins only, else PermissionDenied, as ``fusionctl jobs --all``)."""
        r = self._call(self._stub.ListLiveSessions, pb.ListLiveSessionsRequest(all_uids=all_uids))
        return [_convert.live_session(s) for s in r.sessions]

    def job(self, job_id: str) -> "Job":
        """The Job of ``job_id`` (NotFound for an unknown job or another uid's)."""
        return Job(self, self._get_job(job_id))

    def _get_job(self, job_id: str) -> JobInfo:
        return _convert.job(self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id)))

    def _cancel(self, job_id: str) -> JobInfo:
        return _convert.job(self._call(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id)))

    def _events(self, job_id: str, timeout: Optional[float]) -> Iterator[AnyJobEvent]:
        self._t.check_pid()
        call = self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id), timeout=timeout)
        for e in self._stream(call):
            yield _convert.event(e)

    def _result(self, job_id: str, prefer_memfd: bool) -> SwapResult:
        request = pb.GetJobResultRequest(job_id=job_id, prefer_memfd=prefer_memfd)
        response = self._call(self._stub.GetJobResult, request, LONG_CALL_FACTOR)
        refetch = lambda req: self._call(self._stub.GetJobResult, req, LONG_CALL_FACTOR)  # noqa: E731
        image, by_memfd, response = self._t.result_image(response, request, refetch)
        return _convert.result(response, image, by_memfd)


class JobHandle:
    """What Job and AsyncJob share: ``info``, the last snapshot seen, with its id and state."""

    def __init__(self, info: JobInfo) -> None:
        self.info = info

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, {self.info.state.name})"

    @property
    def id(self) -> str:
        return self.info.job_id

    @property
    def state(self) -> JobState:
        """The state of the last snapshot (refresh() asks the daemon)."""
        return self.info.state


class Job(JobHandle):
    """A handle on one job of the caller's. ``info`` is the last snapshot seen."""

    def __init__(self, client: Client, info: JobInfo) -> None:
        super().__init__(info)
        self._client = client

    def refresh(self) -> JobInfo:
        """Asks the daemon for the job now."""
        self.info = self._client._get_job(self.id)
        return self.info

    def events(self, timeout: Optional[float] = None) -> Iterator[AnyJobEvent]:
        """The job's progress events, from its current state (Queued or StageStarted) to its
        Done event, which ends the iteration (a finished job yields Done at once). Each is a
        typed event of fusiond.types; ``timeout`` bounds the whole stream, seconds."""
        for e in self._client._events(self.id, timeout):
            if isinstance(e, Done):
                self.info = e.job
            yield e

    def wait(self, timeout: Optional[float] = None,
             on_progress: Optional[ProgressCallback] = None) -> JobInfo:
        """Waits until the job is final and returns it (whatever the final state).
        ``timeout`` in seconds (DeadlineExceeded past it); None: no limit."""
        if self.info.state.final:
            return self.info
        for e in self.events(timeout):
            if on_progress is not None:
                on_progress(e)
        return self.info

    def cancel(self) -> JobInfo:
        """Cancels the job: a queued one at once, a running one at its next face, tile,
        detection pass or stage (RUNNING with cancel_requested until then)."""
        self.info = self._client._cancel(self.id)
        return self.info

    def result(self, timeout: Optional[float] = None, prefer_memfd: bool = False,
               on_progress: Optional[ProgressCallback] = None) -> SwapResult:
        """Waits for the job and returns its result, image included (by memfd when the daemon
        sends one, or always with ``prefer_memfd``). Raises the job's error when it FAILED or
        was CANCELLED."""
        info = self.wait(timeout, on_progress)
        if info.state != JobState.SUCCEEDED:
            raise job_failure(info)
        return self._client._result(self.id, prefer_memfd)
