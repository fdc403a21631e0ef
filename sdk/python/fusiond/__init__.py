"""fusiond: the Python client of fusiond, the face-fusion daemon that owns a GPU.

    import fusiond
    with fusiond.Client() as client:            # $FUSIOND_SOCKET or /run/fusiond/fusiond.sock
        result = client.swap("me.png", "group.jpg", enhance="x2")
        result.save("out.png")

:class:`Client` blocks; :class:`AsyncClient` has the same methods as coroutines (grpc.aio).
``client.live(source)`` opens a live session (:mod:`fusiond.live`): frames in, swapped frames
out, in order.
Errors are :class:`Error` subclasses, one per gRPC status code. See each class for
thread- and fork-safety.
"""
from .aio import AsyncClient, AsyncJob
from .client import Client, Job
from .live import AsyncLiveSession, LiveSession
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                     FailedPrecondition, Internal, InvalidArgument, InvalidOption, NotFound,
                     OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                     Unimplemented, Unknown)
from .types import (ClientUsage, Counters, Degradation, Done, FaceReport, FramesDone, JobEvent,
                    JobInfo, JobKind, JobState, LiveLatency, LiveOpened, LiveResult, LiveSessionInfo,
                    LiveSummary, LiveTimings, MemoryState, ModelInfo, Queued, ServingStatus,
                    StageFinished, StageReport, StageStarted, SwapResult, TierState, TransferStats)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "AsyncJob", "AsyncLiveSession", "Client", "Job", "LiveSession",
    "Error", "Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "Internal", "InvalidArgument", "InvalidOption", "NotFound", "OutOfRange",
    "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable", "Unimplemented",
    "Unknown",
    "ClientUsage", "Counters", "Degradation", "Done", "FaceReport", "FramesDone", "JobEvent",
    "JobInfo", "JobKind", "JobState", "LiveLatency", "LiveOpened", "LiveResult", "LiveSessionInfo",
    "LiveSummary", "LiveTimings",
    "MemoryState", "ModelInfo", "Queued", "ServingStatus",
    "StageFinished", "StageReport", "StageStarted", "SwapResult", "TierState", "TransferStats",
]
