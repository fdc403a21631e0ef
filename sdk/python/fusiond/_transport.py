"""What the sync and async clients share: the socket target, how images travel (inline or
by sealed memfd, with the C++ SDK's inline fallback), transfer counts, and the translation of
gRPC errors into fusiond.Error subclasses (sdk/src/client.cc's Impl, in Python)."""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any, Callable, Optional, Tuple

import grpc

from . import _memfd
from ._proto.fusion.v1 import error_details_pb2
from ._proto.fusion.v1 import fusion_pb2 as pb
from .errors import Error, PermissionDenied, ResourceExhausted, Unavailable, error_for
from .types import TransferStats

DEFAULT_SOCKET = "/run/fusiond/fusiond.sock"
log = logging.getLogger("fusiond")

_TOO_LARGE = re.compile(r"^(Received|Sent) message larger than max \((\d+) vs\. (\d+)\)")
# Where gRPC carries a status's details (grpc::Status::error_details()): fusiond puts a
# serialized fusion.v1.ErrorDetails there (proto/fusion_status.h).
_DETAILS_KEY = "grpc-status-details-bin"


def error_stage(e: grpc.RpcError) -> str:
    """The stage of a failed call's fusion.v1.ErrorDetails, or "" (none, or not parseable)."""
    try:
        metadata = e.trailing_metadata() if callable(getattr(e, "trailing_metadata", None)) else None
        for key, value in metadata or ():
            if key == _DETAILS_KEY and isinstance(value, bytes):
                details = error_details_pb2.ErrorDetails()
                details.ParseFromString(value)
                return str(details.stage)
    except Exception:  # a status from elsewhere (a proxy) whose details are not ours
        return ""
    return ""


def resolve_socket(socket: Optional[str]) -> str:
    """The socket's absolute path: ``socket`` (a path or "unix://path"), else
    $FUSIOND_SOCKET, else /run/fusiond/fusiond.sock (relative paths against the current
    directory), as the C++ SDK's ResolveSocketTarget."""
    path = socket or os.environ.get("FUSIOND_SOCKET") or DEFAULT_SOCKET
    path = os.fspath(path)
    for prefix in ("unix://", "unix:"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    if not path:
        raise ValueError("empty socket path")
    path = os.path.normpath(os.path.abspath(path))
    if len(path.encode()) > 107:  # sockaddr_un.sun_path
        raise ValueError(f"socket path '{path}' is {len(path.encode())} bytes; a Unix socket "
                         "path holds at most 107")
    return path


class Transport:
    """Thread-safe: the counters are under a lock, everything else is read-only."""

    def __init__(self, socket: Optional[str], timeout: float, memfd_threshold_bytes: int,
                 max_message_bytes: int) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        self.socket_path = resolve_socket(socket)
        self.target = "unix://" + self.socket_path
        self.timeout = timeout
        self.memfd_threshold_bytes = memfd_threshold_bytes
        self.max_message_bytes = max_message_bytes
        self.channel_options = [("grpc.max_receive_message_length", -1),
                                ("grpc.max_send_message_length", -1)]
        self._lock = threading.Lock()
        self._stats = dict(TransferStats().__dict__)
        self.pid = os.getpid()

    # ---- counts ----
    def stats(self) -> TransferStats:
        with self._lock:
            return TransferStats(**self._stats)

    def _count(self, inline: bool, size: int, start: Optional[float] = None,
               fallback: bool = False) -> None:
        with self._lock:
            if inline:
                self._stats["images_inline"] += 1
                self._stats["bytes_inline"] += size
                self._stats["images_inline_fallback"] += int(fallback)
            else:
                self._stats["images_by_memfd"] += 1
                self._stats["bytes_by_memfd"] += size
                self._stats["memfd_us"] += int((time.monotonic() - (start or 0)) * 1e6)

    def check_pid(self) -> None:
        if os.getpid() != self.pid:
            raise RuntimeError(f"this fusiond client was made in process {self.pid}; gRPC channels "
                               "do not survive fork(): make a new client in the child "
                               f"(process {os.getpid()})")

    # ---- images out ----
    def fd_socket_error(self, e: Error) -> str:
        reason = e.message[len("fd socket: "):] if e.message.startswith("fd socket: ") else e.message
        return f"fd socket {_memfd.companion_path(self.socket_path)}: {reason}"

    def set_image(self, data: bytes, image: pb.ImageData, request: Any) -> None:
        """Fills ``image`` inline or, past the threshold, with a memfd token. When the fd socket
        refuses or fails (before any token exists), the image goes inline after all if the
        request then still fits max_message_bytes; else Unavailable naming both."""
        if len(data) <= self.memfd_threshold_bytes:
            image.inline_bytes = data
            self._count(True, len(data))
            return
        start = time.monotonic()
        try:
            token = _memfd.put(self.socket_path, data)
        except PermissionDenied:
            raise  # a uid the daemon refuses would be refused inline too
        except Error as e:
            needed = request.ByteSize() + len(data) + 16  # + tag and length
            if needed > self.max_message_bytes:
                raise Unavailable(f"{self.fd_socket_error(e)}; the image of {len(data)} bytes cannot "
                                  f"go inline instead (the request would be {needed} bytes, over "
                                  f"max_message_bytes {self.max_message_bytes})") from e
            log.debug("%s; sending the image of %d bytes inline instead", self.fd_socket_error(e),
                      len(data))
            image.inline_bytes = data
            self._count(True, len(data), fallback=True)
            return
        self._count(False, len(data), start)
        image.memfd.token = token
        image.memfd.size_bytes = len(data)

    def submit_request(self, source: bytes, target: bytes, options: pb.JobOptions,
                       reference: Optional[bytes]) -> pb.SubmitJobRequest:
        request = pb.SubmitJobRequest(options=options)
        if reference is not None:
            self.set_image(reference, request.options.reference, request)
        self.set_image(source, request.source, request)
        self.set_image(target, request.target, request)
        return request

    # ---- images in ----
    def result_image(self, response: pb.JobResult, request: pb.GetJobResultRequest,
                     refetch: Callable[[pb.GetJobResultRequest], pb.JobResult]
                     ) -> Tuple[bytes, bool, pb.JobResult]:
        """(image bytes, came by memfd, the response they belong to). A memfd the fd socket
        cannot deliver is asked again inline (require_inline) when it fits."""
        if response.image.HasField("memfd"):
            start = time.monotonic()
            try:
                data = _memfd.get(self.socket_path, response.image.memfd.token)
                self._count(False, len(data), start)
                return data, True, response
            except PermissionDenied:
                raise
            except Error as e:
                size = response.image.memfd.size_bytes
                if size + response.ByteSize() > self.max_message_bytes:
                    raise Unavailable(f"{self.fd_socket_error(e)}; the result of {size} bytes cannot "
                                      f"come inline instead (over max_message_bytes "
                                      f"{self.max_message_bytes})") from e
                log.debug("%s; fetching the result of %d bytes inline instead",
                          self.fd_socket_error(e), size)
                request.require_inline = True
                response = refetch(request)
                data = response.image.inline_bytes  # each access copies: once
                self._count(True, len(data), fallback=True)
                return data, False, response
        data = response.image.inline_bytes
        self._count(True, len(data))
        return data, False, response

    # ---- errors ----
    def error(self, e: grpc.RpcError, channel_ready: Optional[bool] = None) -> Error:
        """The fusiond.Error of a failed call. ``channel_ready``: whether the channel had a
        connection (a deadline with none means nobody answered: Unavailable)."""
        code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
        details = (e.details() if callable(getattr(e, "details", None)) else None) or ""
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and _TOO_LARGE.match(details):
            return self.too_large(details)
        if code == grpc.StatusCode.UNAVAILABLE:
            return Unavailable(f"cannot reach fusiond at {self.target}: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED and channel_ready is False:
            return Unavailable(f"cannot reach fusiond at {self.target}: no answer within "
                               f"{self.timeout:g} s")
        return error_for(code, details, error_stage(e))

    def too_large(self, details: str) -> ResourceExhausted:
        m = _TOO_LARGE.match(details)
        sizes = f" ({m.group(2)} bytes; the limit is {m.group(3)} bytes)" if m else ""
        return ResourceExhausted(
            f"the request is larger than fusiond's max_message_bytes{sizes}; send large images as "
            f"memfds through {_memfd.companion_path(self.socket_path)} instead (the client does so "
            f"for images over memfd_threshold_bytes, now {self.memfd_threshold_bytes} bytes), or "
            "raise max_message_bytes in fusiond's configuration")
