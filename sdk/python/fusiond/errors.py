"""Exceptions of the fusiond client: one class per gRPC status code (the status table of
proto/fusion/v1/fusion.proto says what each means for fusiond), all subclasses of
:class:`Error`, which carries the code, the daemon's message and the stage the failure belongs
to when the status names one (fusion.v1.ErrorDetails, e.g. "decode" for a live frame that does
not decode)."""
from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class Error(Exception):
    """A call to fusiond failed. ``code`` is the gRPC status code, ``message`` the daemon's
    message (it names the object — job id, model, stage, image — and the numbers), ``stage``
    the stage the status names in its fusion.v1.ErrorDetails ("decode", "detect"; "" when it
    names none), as the C++ SDK's fusion::ErrorStage."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None, *, stage: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class Cancelled(Error):
    """CANCELLED: the job or call was cancelled."""
    code = grpc.StatusCode.CANCELLED


class Unknown(Error):
    """UNKNOWN: a status fusiond does not send (e.g. from a proxy)."""
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(Error):
    """INVALID_ARGUMENT: bad option value or spec, or an image that is too large by its header,
    of an unknown format, corrupt or truncated (the message names the image)."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidOption(InvalidArgument, ValueError):
    """A swap option the client refuses before anything is sent (an InvalidArgument with the
    daemon's wording, "options: min_face_px -5 is not in [8,100000]"; also a ValueError, what
    earlier versions raised)."""


class DeadlineExceeded(Error):
    """DEADLINE_EXCEEDED: waited for memory (or for the job) until the deadline."""
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(Error):
    """NOT_FOUND: unknown job or model — also another uid's job (never revealed)."""
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    """ALREADY_EXISTS (not used by fusiond v1)."""
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    """PERMISSION_DENIED: the caller's uid is not allowed, or an admin-only method."""
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(Error):
    """RESOURCE_EXHAUSTED: does not fit even after every eviction, a per-uid quota, a full
    state disk, or a request over the daemon's max_message_bytes."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    """FAILED_PRECONDITION: pins would exceed the budget, no face in the source image, or a
    result asked of a job that has not succeeded."""
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    """ABORTED (not used by fusiond v1)."""
    code = grpc.StatusCode.ABORTED


class OutOfRange(Error):
    """OUT_OF_RANGE (not used by fusiond v1)."""
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(Error):
    """UNIMPLEMENTED: part of v1 but not built in this fusiond."""
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(Error):
    """INTERNAL: a LibTorch/CUDA/OpenCV failure that is none of the above."""
    code = grpc.StatusCode.INTERNAL


class Unavailable(Error):
    """UNAVAILABLE: fusiond cannot be reached ("cannot reach fusiond at unix://...: ...") or
    is shutting down; also a failed fd-socket transfer that could not fall back to inline."""
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(Error):
    """DATA_LOSS (not used by fusiond v1)."""
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(Error):
    """UNAUTHENTICATED (not used by fusiond v1)."""
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}


def error_for(code: grpc.StatusCode, message: str, stage: str = "") -> Error:
    """The exception of ``code`` (OK is not an error: Unknown), naming ``stage``."""
    return _BY_CODE.get(code, Unknown)(message, code if code in _BY_CODE else None, stage=stage)


def error_for_number(number: int, message: str) -> Error:
    """The exception of a google.rpc.Code number (the fd socket's "ERR <n> ..." and a
    FAILED/CANCELLED job's error_code)."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return error_for(code, message)
    return Unknown(message)
