"""Plain value types of the fusiond client. They mirror fusion.v1 messages
(proto/fusion/v1/fusion.proto). Byte counts are ints in bytes, times are Unix milliseconds,
durations in milliseconds (``ms``) or seconds (``*_seconds``). Frozen dataclasses: safe to
share between threads."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union


class ServingStatus(enum.Enum):
    """grpc.health.v1 serving status."""
    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3


class JobState(enum.Enum):
    """A job's state: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED."""
    UNSPECIFIED = 0
    QUEUED = 1
    RUNNING = 2
    SUCCEEDED = 3
    FAILED = 4
    CANCELLED = 5

    @property
    def final(self) -> bool:
        """SUCCEEDED, FAILED or CANCELLED."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class JobKind(enum.Enum):
    UNSPECIFIED = 0
    IMAGE = 1  # the result is a PNG or JPEG image
    VIDEO = 2  # the result is an MP4 file


# ---- Memory ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TierState:
    """One memory tier ("device" or "host"). Byte counts are bytes."""
    tier: str              # "device" | "host"
    kind: str              # device: "cpu" | "cuda:N"; host: "host"
    capacity_bytes: int    # physical size (RAM for cpu, VRAM for cuda)
    available_bytes: int   # free now, as the OS/driver reports it
    budget_bytes: int      # min(limit, free + fusiond's usage - reserve)
    limit_bytes: int       # configured limit; 0 = none
    used_bytes: int        # resident model bytes
    reserved_bytes: int    # working sets reserved by running stages
    peak_bytes: int        # high-water mark of used + reserved
    external_bytes: int    # used by other processes
    over_budget: bool      # pinned + leased bytes exceed the budget
    cache_bytes: int = 0   # of reserved_bytes, held by the daemon's caches between jobs


@dataclass(frozen=True)
class ModelInfo:
    """A catalogue model and its residency."""
    name: str
    stage: str             # detect|landmarks|encode|generate|enhance
    state: str             # ABSENT|LOADING|HOST|UPLOADING|DEVICE|IN_USE|EVICTING
    tier: str              # storage|host|device
    bytes: int             # measured device bytes once loaded, else the catalogue's figure
    host_bytes: int        # bytes of the host copy in RAM; 0 = none
    pinned: bool
    leases: int
    last_use_unix_ms: int
    loads: int             # storage -> host loads
    uploads: int           # host -> device uploads
    evictions: int
    hits: int
    misses: int
    one_shot: bool
    tileable: bool
    # Keep-alive (docs/MEMORY.md#keep-alive), seconds: how long the model may stay on the device
    # unused (None = forever, or pinned), and the time left before it leaves (None unless the
    # countdown runs: on the device, unleased, unpinned, finite keep-alive).
    keep_alive_seconds: Optional[float] = None
    expires_in_seconds: Optional[float] = None


@dataclass(frozen=True)
class ClientUsage:
    """What one client uid has in the daemon now."""
    uid: int
    jobs_queued: int
    jobs_running: int
    working_bytes: int     # working sets the uid's running stages hold now, bytes


@dataclass(frozen=True)
class Counters:
    bytes_uploaded: int
    loads: int
    uploads: int
    evictions: int
    hits: int
    misses: int
    waits: int
    refusals: int
    oom_recovered: Dict[str, int]  # by ladder step: evict_retry, tiled, cpu_fallback, failed
    expirations: int = 0   # of evictions, those whose keep-alive ran out


@dataclass(frozen=True)
class LiveLatency:
    """Nearest-rank percentiles of the daemon-side total_ms (received -> result sent) of a
    session's last returned frames (at most 256), milliseconds; all 0 before its first result."""
    frames: int            # frames the percentiles are over
    p50_ms: float
    p95_ms: float
    p99_ms: float


@dataclass(frozen=True)
class LiveSessionInfo:
    """An open live session (fusion.v1.LiveSessionInfo): ``client.live_sessions()`` and
    ``MemoryState.live_sessions``."""
    session_id: str        # "live-N", as the daemon's log names it
    owner_uid: int
    started_unix_ms: int
    device: str            # its leases: "" and [] (model_bytes 0) until they are held
    models: List[str]
    model_bytes: int       # the leased models' device bytes together
    frames_received: int
    frames_returned: int
    frames_dropped: int
    latency: LiveLatency


@dataclass(frozen=True)
class MemoryState:
    """The daemon's memory: tiers, models, clients and counters (`fusionctl mem`)."""
    device: TierState
    host: TierState
    models: List[ModelInfo]
    clients: List[ClientUsage]
    counters: Counters
    unix_ms: int
    # Open live sessions with their leases: the caller's own; an admin's, every uid's.
    live_sessions: List[LiveSessionInfo] = field(default_factory=list)


# ---- Jobs -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one job (fusion.v1.Job)."""
    job_id: str
    owner_uid: int
    state: JobState
    stage: str              # current stage while RUNNING
    queue_position: int     # while QUEUED: 0 = next
    progress: float         # [0,1]
    created_unix_ms: int
    started_unix_ms: int
    finished_unix_ms: int
    error_code: int         # google.rpc.Code of a FAILED/CANCELLED job
    error_message: str
    cancel_requested: bool  # while RUNNING: ends at its next face, tile, pass or stage
    frames_done: int        # a RUNNING video job's frames encoded so far (0 for images)
    frames_total: int
    frames_per_second: float
    error_stage: str = ""   # the stage a FAILED/CANCELLED job ended in ("" before any)


@dataclass(frozen=True)
class StageReport:
    name: str
    model: str
    ms: float               # wall time of the stage, milliseconds
    mode: str               # "device" | "tiled" | "cpu_fallback" | "host"
    attempts: int
    tile: int               # tile side in pixels when tiled
    upload_wait_ms: float   # time spent waiting for the model to reach the device
    peak_bytes: int         # measured peak working set, bytes


@dataclass(frozen=True)
class FaceReport:
    box: Tuple[float, float, float, float]  # x, y, w, h in target pixels
    identity_distance: float         # result face to the source (smaller: more alike)
    target_identity_distance: float  # the target face before the swap to the source
    score: float = 0.0               # the detector's confidence in the box, 0..1


@dataclass(frozen=True)
class TransferStats:
    """How a client's images travelled since it was made (every call together): images sent
    (submit) and received (results) inline or by sealed memfd over ``<socket>.fd``;
    ``images_inline_fallback`` counts inline ones (included in ``images_inline``) that went
    inline only because the fd socket refused or failed; ``memfd_us`` is the wall time of
    the fd-socket puts and gets, microseconds. Same fields as the C++ SDK's TransferStats."""
    images_inline: int = 0
    bytes_inline: int = 0
    images_inline_fallback: int = 0
    images_by_memfd: int = 0
    bytes_by_memfd: int = 0
    memfd_us: int = 0


# ---- Job events (WatchJob) ------------------------------------------------------------------

@dataclass(frozen=True)
class JobEvent:
    """Base of the typed progress events of :meth:`fusiond.Job.events`."""
    job_id: str
    unix_ms: int


@dataclass(frozen=True)
class Queued(JobEvent):
    position: int  # 0 = next


@dataclass(frozen=True)
class StageStarted(JobEvent):
    stage: str      # "" for the job starting to run
    progress: float  # [0,1]


@dataclass(frozen=True)
class StageFinished(JobEvent):
    stage: str
    progress: float
    report: StageReport


@dataclass(frozen=True)
class Degradation(JobEvent):
    text: str  # e.g. the OOM ladder's step for a stage


@dataclass(frozen=True)
class FramesDone(JobEvent):
    frames_done: int
    frames_total: int
    frames_per_second: float
    progress: float


@dataclass(frozen=True)
class Done(JobEvent):
    job: JobInfo  # the final job


AnyJobEvent = Union[Queued, StageStarted, StageFinished, Degradation, FramesDone, Done]


# ---- Results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class SwapResult:
    """The result of a SUCCEEDED job: the encoded image (PNG/JPEG; a video's MP4) and the
    report."""
    job_id: str
    state: JobState
    device: str                      # "cpu", "cuda:0"
    faces_swapped: int
    faces: List[FaceReport]
    stages: List[StageReport]
    degradations: List[str]
    image_bytes: bytes = field(repr=False)
    image_by_memfd: bool             # how the image travelled
    format: str                      # "png" | "jpeg" ("mp4" for a video)
    width: int
    height: int
    kind: JobKind
    frames_total: int = 0
    frames_swapped: int = 0
    frames_without_face: int = 0
    frame_rate: float = 0.0
    duration_seconds: float = 0.0
    frames_per_second: float = 0.0
    frames_resumed: int = 0
    chunk_frames: int = 0
    identity_distance_median: float = 0.0
    identity_distance_worst: float = 0.0
    keyframes: int = 0               # video, tracking: frames the detector scanned
    frames_tracked: int = 0          # frames whose faces came from tracks alone
    tracks: int = 0                  # face tracks started
    flicker_ratio: float = 0.0       # tracked faces' change in the output over the input's (0: none)

    def save(self, path: str) -> None:
        """Writes the encoded result to ``path``."""
        with open(path, "wb") as f:
            f.write(self.image_bytes)

    def to_numpy(self) -> Any:
        """The result image as a numpy.ndarray, HxWx3 uint8 BGR (OpenCV's layout). Needs numpy
        and OpenCV (python3-opencv); not for video results."""
        from ._images import decode_image
        if self.kind == JobKind.VIDEO:
            raise ValueError(f"job {self.job_id}: a video result has no single image")
        return decode_image(self.image_bytes)


# ---- Live sessions (Client.live) ------------------------------------------------------------

@dataclass(frozen=True)
class LiveOpened:
    """What the daemon answered when a live session opened."""
    device: str              # "cpu", "cuda:0"
    models: List[str]        # the models the session leases while it is open
    model_bytes: int         # their device bytes together


@dataclass(frozen=True)
class LiveTimings:
    """One live frame's times in the daemon, milliseconds."""
    wait_ms: float = 0.0     # received -> its swap began (waiting behind the frame before)
    decode_ms: float = 0.0   # decode (or the raw frame's copy)
    swap_ms: float = 0.0     # tracking (detection on keyframes) and the per-face stages
    encode_ms: float = 0.0   # the result's encode (0 for a raw frame)
    total_ms: float = 0.0    # received -> result handed to gRPC


@dataclass(frozen=True)
class LiveResult:
    """One swapped frame of a live session, in the form it was sent: ``format`` "raw" (BGR
    pixels, ``width * height * 3`` bytes, rows packed) for a numpy frame, "jpeg" for a JPEG,
    "png" for any other encoded image."""
    sequence: int                    # the number the frame was sent with
    image_bytes: bytes = field(repr=False)
    format: str                      # "raw" | "jpeg" | "png"
    width: int
    height: int
    faces_swapped: int
    keyframe: bool                   # the detector scanned this frame (else tracked)
    frames_dropped: int              # frames of this session the daemon dropped so far
    timings: LiveTimings
    stages: List[StageReport]        # this frame's model stages
    latency_ms: float = 0.0          # measured by the client: sent -> this result received

    def to_numpy(self) -> Any:
        """The frame as a numpy.ndarray, HxWx3 uint8 BGR. A raw frame needs numpy only (the
        array is a read-only view of ``image_bytes``); an encoded one also OpenCV."""
        if self.format == "raw":
            import numpy as np
            return np.frombuffer(self.image_bytes, np.uint8).reshape(self.height, self.width, 3)
        from ._images import decode_image
        return decode_image(self.image_bytes)


@dataclass(frozen=True)
class LiveSummary:
    """A live session's totals, sent by the daemon after the client's last frame:
    ``frames_received == frames_returned + frames_dropped``."""
    frames_received: int
    frames_returned: int
    frames_dropped: int
