"""Live sessions of the Python SDK (fusion.v1 Live; docs/USER-GUIDE.md "Live sessions").

A live session swaps the frames of a stream as they come (a webcam, a call): it is opened with a
source image and options, frames go in, and each comes back swapped, in the order sent, with its
sequence number, the daemon's timings, faces_swapped, keyframe and frames_dropped; after the
last frame the daemon sends the session's summary.

Blocking (:meth:`fusiond.Client.live`)::

    with client.live("me.png", simple=True) as session:      # returns once the models are leased
        for result in session.swap(frames):                   # frames: any iterable of frames
            show(result.to_numpy(), result.timings.total_ms)
    print(session.summary)        # frames_received == frames_returned + frames_dropped

``swap(frames)`` sends from a thread of its own while the caller reads the results. The same by
hand: ``session.send(frame)`` from one thread, ``for result in session: ...`` on another (the
iteration ends after the summary), ``session.close_send()`` after the last frame.

Asynchronous (:meth:`fusiond.AsyncClient.live`), the same methods as coroutines::

    async with client.live("me.png") as session:
        async for result in session.swap(frames):     # an iterable or an async iterable
            ...

Frames: a numpy HxWx3 uint8 BGR array goes as raw pixels (and comes back raw: ``format``
"raw", ``to_numpy()`` needs numpy only); ``bytes`` (or a path, a binary file) of an encoded
image goes as it is and comes back JPEG for a JPEG, PNG for other formats. Frames larger than
the client's ``memfd_threshold_bytes`` travel as sealed memfds over ``<socket>.fd``, with the
inline fallback of the other calls (as the C++ SDK's LiveSession).

Pace and memory: when frames come faster than the daemon swaps them, the daemon keeps only the
newest waiting frame and drops the older ones (counted in ``frames_dropped``), so latency stays
bounded. The SDK queues nothing either: ``send()`` returns once gRPC has taken the frame before
(at most one frame waits in the SDK and one is being written), so a sender that outpaces the
daemon is held to the pace at which the daemon reads frames, which it does as they come.

Errors end the session and are raised where the results are read (and by a later ``send()``),
as fusiond.Error subclasses with the status's stage (``Error.stage``): InvalidArgument with
stage "decode" for a frame that does not decode (or a raw frame whose bytes do not match its
size), FailedPrecondition with stage "detect" from ``live()`` when the source has no face,
ResourceExhausted when the session's models cannot be held or the uid's
max_live_sessions_per_uid is reached, Unavailable when the daemon stops. Options fusiond refuses
raise InvalidOption before anything is sent.

Thread-safety: ``send()``/``close_send()`` may be called from any thread (serialised inside),
while one other thread iterates the results; ``swap()`` does both. ``cancel()``/``close()``
from any thread. An AsyncLiveSession belongs to its event loop.

Lifetime: leaving the ``with`` block (or ``close()``) cancels a stream that has not ended; the
daemon releases the session's leases within a second of the stream's end either way.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
import warnings
from typing import (TYPE_CHECKING, Any, AsyncIterable, AsyncIterator, Callable, Deque, Iterable, Iterator,
                    Optional, Tuple, Union)

import grpc

from . import _convert
from ._images import ImageInput, read_image
from ._proto.fusion.v1 import fusion_pb2 as pb
from .errors import Cancelled, Error, Internal
from .types import LiveOpened, LiveResult, LiveSummary, LiveTimings

if TYPE_CHECKING:  # pragma: no cover
    from .aio import AsyncClient
    from .client import Client

Frame = Union[ImageInput, Any]  # a numpy HxWx3 uint8 BGR array, or an encoded image
_PNG, _JPEG = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"


# ---- what both sessions share ---------------------------------------------------------------

def frame_payload(frame: Frame) -> Tuple[bytes, Optional[Tuple[int, int]]]:
    """(bytes, (width, height) for raw BGR pixels or None for an encoded image) of ``frame``.
    Raises ValueError/TypeError for what cannot be a frame."""
    if type(frame).__module__ == "numpy" and hasattr(frame, "dtype"):
        import numpy as np
        a = np.asarray(frame)
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"live frame: a numpy frame must be HxWx3 uint8 BGR, not shape {a.shape} "
                             f"{a.dtype} (cv2.cvtColor converts grey and BGRA)")
        if a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"live frame: a numpy frame must not be empty (shape {a.shape})")
        return a.tobytes(), (int(a.shape[1]), int(a.shape[0]))  # tobytes: C order, packed rows
    return read_image(frame, "live frame"), None


def opened(p: pb.LiveResponse) -> LiveOpened:
    if p.WhichOneof("response") != "opened":
        raise Internal(f"Live: the daemon answered the open with {p.WhichOneof('response')}, not 'opened'")
    o = p.opened
    return LiveOpened(device=o.device, models=list(o.models), model_bytes=o.model_bytes)


def _format(image: bytes, raw: Optional[bool], width: int, height: int) -> str:
    if raw is None:  # not sent by this session (never, unless the daemon misnumbers): by the bytes
        raw = len(image) == width * height * 3 and not image.startswith((_PNG, _JPEG))
    if raw:
        return "raw"
    return "jpeg" if image.startswith(_JPEG) else "png"


class _InFlight:
    """Frames sent whose result has not come: sequence -> (send time, raw). Results come in
    the order sent, so a result also retires every frame sent before it (dropped by the
    daemon): the record holds the frames in flight, and at most LIMIT (a sender whose results
    nobody reads: the oldest are forgotten, their results get latency_ms 0). Thread-safe."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: Deque[Tuple[int, float, bool]] = collections.deque(maxlen=self.LIMIT)
        self._next = 0

    def number(self, sequence: Optional[int], raw: bool) -> int:
        with self._lock:
            if sequence is None:
                sequence = self._next
            if not 0 <= sequence < 2**64:
                raise ValueError(f"live frame: sequence {sequence} is not in [0, 2**64)")
            self._next = max(self._next, sequence + 1)
            self._sent.append((sequence, time.monotonic(), raw))
            return sequence

    def forget(self, sequence: int) -> None:
        """A frame numbered but not sent after all (its transfer failed)."""
        with self._lock:
            for i in range(len(self._sent) - 1, -1, -1):
                if self._sent[i][0] == sequence:
                    del self._sent[i]
                    return

    def retire(self, sequence: int) -> Tuple[Optional[float], Optional[bool]]:
        """(latency ms, raw) of the frame ``sequence``; (None, None) when it is not known."""
        now = time.monotonic()
        with self._lock:
            if not any(s == sequence for s, _, _ in self._sent):
                return None, None
            while self._sent:
                s, sent, raw = self._sent.popleft()
                if s == sequence:
                    return (now - sent) * 1e3, raw
            return None, None  # unreachable: the sequence is in the record


def result(p: pb.LiveResponse, in_flight: _InFlight) -> LiveResult:
    f = p.frame
    latency, raw = in_flight.retire(f.sequence)
    image = f.image  # each access copies: once
    t = f.timings
    return LiveResult(
        sequence=f.sequence, image_bytes=image, format=_format(image, raw, f.width, f.height),
        width=f.width, height=f.height, faces_swapped=f.faces_swapped, keyframe=f.keyframe,
        frames_dropped=f.frames_dropped,
        timings=LiveTimings(wait_ms=t.wait_ms, decode_ms=t.decode_ms, swap_ms=t.swap_ms,
                            encode_ms=t.encode_ms, total_ms=t.total_ms),
        stages=[_convert.stage(s) for s in f.stages], latency_ms=latency or 0.0)


def summary(p: pb.LiveResponse) -> LiveSummary:
    s = p.summary
    return LiveSummary(frames_received=s.frames_received, frames_returned=s.frames_returned,
                       frames_dropped=s.frames_dropped)


class _Slot:
    """A one-request mailbox between send() and gRPC's request iterator: put() waits while a
    request waits; take() waits for one. finish(): no more requests (take() hands out the one
    waiting, then None). abort(): the stream is over (the waiting one is dropped; put() and
    take() return at once)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._item: Optional[pb.LiveRequest] = None
        self._finished = False
        self._aborted = False

    def put(self, item: pb.LiveRequest, gone: Callable[[], bool]) -> bool:
        """False when the stream no longer takes requests: finished, aborted, or ``gone()``
        (the call ended while nobody reads its results, so gRPC takes no more)."""
        with self._cv:
            while not self._cv.wait_for(lambda: self._item is None or self._finished or self._aborted,
                                        timeout=0.1):
                if gone():
                    return False
            if self._finished or self._aborted:
                return False
            self._item = item
            self._cv.notify_all()
            return True

    def take(self) -> Optional[pb.LiveRequest]:
        with self._cv:
            self._cv.wait_for(lambda: self._item is not None or self._finished or self._aborted)
            item, self._item = (None if self._aborted else self._item), None
            self._cv.notify_all()
            return item

    def finish(self) -> bool:
        """False when already finished or aborted."""
        with self._cv:
            if self._finished or self._aborted:
                return False
            self._finished = True
            self._cv.notify_all()
            return True

    def abort(self) -> None:
        with self._cv:
            self._aborted = True
            self._item = None
            self._cv.notify_all()


class _Base:
    """State both sessions keep: the open's answer, the summary, the frames in flight, how the
    stream ended."""

    def __init__(self) -> None:
        self._opened: Optional[LiveOpened] = None
        self._summary: Optional[LiveSummary] = None
        self._in_flight = _InFlight()
        self._error: Optional[BaseException] = None  # why the stream ended, when not OK
        self._ended = False
        self._send_error: Optional[BaseException] = None  # swap()'s sender failed (its frames)

    @property
    def opened(self) -> LiveOpened:
        """The daemon's answer to the open: device, the models leased, their bytes."""
        assert self._opened is not None, "the session is not open"
        return self._opened

    @property
    def summary(self) -> Optional[LiveSummary]:
        """The session's totals once the daemon sent them (after close_send() and the last
        result); None before, and when the stream ended otherwise."""
        return self._summary

    @property
    def ended(self) -> bool:
        """The stream is over (summary read, error, or cancelled)."""
        return self._ended

    def _closed_error(self) -> BaseException:
        if self._error is not None:
            return self._error
        if self._ended:
            return ValueError("live session: the stream has ended")
        return ValueError("live session: close_send() was called; no more frames")

    def _raise_end(self) -> None:
        """Raises why a stream that ended with a cancellation ended: swap()'s sender's error
        (its frames iterable raised) comes first."""
        if self._send_error is not None:
            raise self._send_error
        assert self._error is not None
        raise self._error


# ---- blocking -------------------------------------------------------------------------------

class LiveSession(_Base):
    """A live session of a :class:`fusiond.Client` (see the module docstring); made by
    :meth:`fusiond.Client.live`, open when returned. An iterator of :class:`LiveResult`."""

    def __init__(self, client: "Client", source: ImageInput, options: pb.JobOptions) -> None:
        super().__init__()
        self._client = client
        self._t = client._t
        self._slot = _Slot()
        self._send_lock = threading.Lock()
        self._t.check_pid()
        request = pb.LiveRequest(open=pb.LiveOpen(options=options))
        self._t.set_image(read_image(source, "source image"), request.open.source, request)
        # The request iterator holds the slot, not the session: a session dropped unclosed can
        # be collected, and __del__ ends its stream.
        self._call = client._stub.Live(_requests(request, self._slot))
        try:
            self._opened = opened(next(self._call))
        except grpc.RpcError as e:
            self._end(self._client._error(e))
            raise self._closed_error() from None
        except StopIteration:
            self._end(Internal("Live: the daemon ended the stream without opening the session"))
            raise self._closed_error() from None
        except Error as e:
            self._call.cancel()
            self._end(e)
            raise

    def _end(self, error: Optional[BaseException]) -> None:
        if not self._ended:
            self._error, self._ended = error, True
        self._slot.abort()

    # ---- sending ----
    def send(self, frame: Frame, sequence: Optional[int] = None) -> int:
        """Sends ``frame`` (module docstring) and returns its sequence number (``sequence``, or
        one more than the highest so far, from 0). Waits only while gRPC still writes the frame
        before. Raises the session's error when it has ended, ValueError after close_send()."""
        data, size = frame_payload(frame)
        with self._send_lock:
            if self._ended or self._error is not None:
                raise self._closed_error()
            seq = self._in_flight.number(sequence, size is not None)
            request = pb.LiveRequest(frame=pb.LiveFrame(sequence=seq))
            if size is not None:
                request.frame.raw.width, request.frame.raw.height = size
            try:
                self._t.set_image(data, request.frame.image, request)
                if not self._slot.put(request, self._call.done):
                    raise self._stream_error()
            except BaseException:
                self._in_flight.forget(seq)
                raise
            return seq

    def _stream_error(self) -> BaseException:
        """Why send() cannot send: the session's end, else the status of a call that ended
        unread (its results stay readable), else close_send()."""
        if self._error is None and self._call.done() and self._call.code() != grpc.StatusCode.OK:
            if self._call.code() == grpc.StatusCode.CANCELLED and self._call.cancelled():
                return Cancelled("live session cancelled")
            return self._client._error(self._call)  # the call is an RpcError with its status
        return self._closed_error()

    def close_send(self) -> None:
        """No more frames: the daemon swaps the frame waiting, sends the summary and ends the
        stream (iterate to the end to read them). Idempotent."""
        with self._send_lock:
            self._slot.finish()

    # ---- results ----
    def __iter__(self) -> "LiveSession":
        return self

    def __next__(self) -> LiveResult:
        """The next result in the order sent; StopIteration after the summary; the session's
        error (fusiond.Error with its stage) when the stream ends otherwise."""
        if self._ended:
            if self._error is not None:
                self._raise_end()
            raise StopIteration
        try:
            response = next(self._call)
        except grpc.RpcError as e:
            cancelled = e.code() == grpc.StatusCode.CANCELLED and self._call.cancelled()
            self._end(Cancelled("live session cancelled") if cancelled else self._client._error(e))
            self._raise_end()
            raise  # unreachable: _raise_end raises
        except StopIteration:
            self._end(Internal("Live: the daemon ended the stream without a summary"))
            self._raise_end()
            raise
        which = response.WhichOneof("response")
        if which == "frame":
            return result(response, self._in_flight)
        if which == "summary":
            self._summary = summary(response)
            self._end(None)
            raise StopIteration
        self._call.cancel()
        self._end(Internal(f"Live: unexpected message '{which}' in the stream"))
        self._raise_end()
        raise AssertionError  # unreachable

    def swap(self, frames: Iterable[Frame]) -> Iterator[LiveResult]:
        """Sends every frame of ``frames`` from a thread of its own, then close_send(), and
        yields the results as they come (on the caller's thread) until the summary
        (``session.summary``). Stopping early (break) cancels the session. An exception of
        ``frames`` (or a frame that is not one) cancels the session and is raised here. A
        ``frames`` that blocks keeps its sender (a daemon thread) until it yields again."""
        sender = threading.Thread(target=self._send_all, args=(frames,), name="fusiond-live-send", daemon=True)
        sender.start()
        try:
            yield from self
        finally:
            if not self._ended:  # the caller stopped early, or raised
                self.cancel()
            sender.join(timeout=1.0)

    def _send_all(self, frames: Iterable[Frame]) -> None:
        try:
            for frame in frames:
                self.send(frame)
            self.close_send()
        except BaseException as e:  # noqa: B036 - handed to the reading thread
            if not self._ended:  # else the stream's own end is what the reader raises
                self._send_error = e
                self.cancel()

    # ---- end ----
    def cancel(self) -> None:
        """Ends the stream now (the daemon sees the client gone and releases the session)."""
        self._call.cancel()
        self._end(self._error or Cancelled("live session cancelled"))

    def close(self) -> None:
        """Cancels the stream unless it has ended. Idempotent."""
        if not self._ended:
            self.cancel()

    def __enter__(self) -> "LiveSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropped unclosed (no ``with``, no close()): the stream is cancelled here, so the daemon
        # releases the session and its leases instead of keeping them until the Client closes.
        if getattr(self, "_ended", True) or getattr(self, "_call", None) is None:
            return
        warnings.warn("fusiond: a live session was dropped without close(); it is cancelled now",
                      ResourceWarning, stacklevel=2)
        self.cancel()


def _requests(first: pb.LiveRequest, slot: _Slot) -> Iterator[pb.LiveRequest]:
    """gRPC's request iterator for a LiveSession (on a thread of gRPC's): the open, then each
    frame send() puts in the slot, until it is finished or aborted."""
    yield first
    while (request := slot.take()) is not None:
        yield request


# ---- asynchronous ---------------------------------------------------------------------------

class AsyncLiveSession(_Base):
    """A live session of a :class:`fusiond.AsyncClient`; made by
    :meth:`fusiond.AsyncClient.live` and opened by ``async with`` (or ``await
    session.open()``). An async iterator of :class:`LiveResult`. Frames over the memfd
    threshold (and the raw copy of a numpy frame) are prepared in the loop's default executor."""

    def __init__(self, client: "AsyncClient", source: ImageInput, options: pb.JobOptions) -> None:
        super().__init__()
        self._client = client
        self._t = client._t
        self._source, self._options = source, options
        self._call: Any = None
        self._write_lock = asyncio.Lock()
        self._writes_done = False

    async def open(self) -> "AsyncLiveSession":
        """Opens the session: returns once the daemon leased its models and analysed the source
        (FailedPrecondition with stage "detect" when it has no face)."""
        if self._call is not None:
            raise ValueError("live session: already opened")
        self._t.check_pid()
        loop = asyncio.get_running_loop()

        def prepare() -> pb.LiveRequest:  # file read, memfd put: off the loop
            request = pb.LiveRequest(open=pb.LiveOpen(options=self._options))
            self._t.set_image(read_image(self._source, "source image"), request.open.source, request)
            return request

        request = await loop.run_in_executor(None, prepare)
        self._call = self._client._stub.Live()
        try:
            await self._call.write(request)
            response = await self._call.read()
        except grpc.RpcError as e:
            self._end(self._client._error(e))
            raise self._closed_error() from None
        if response is grpc.aio.EOF:  # ended OK (an error is raised by read())
            self._end(Internal("Live: the daemon ended the stream without opening the session"))
            raise self._closed_error()
        try:
            self._opened = opened(response)
        except Error as e:
            self._call.cancel()
            self._end(e)
            raise
        return self

    async def _stream_error(self) -> BaseException:
        """As LiveSession._stream_error: why send() cannot send."""
        if self._error is None and self._call.done():
            code = await self._call.code()
            if code == grpc.StatusCode.CANCELLED and self._call.cancelled():
                return Cancelled("live session cancelled")
            if code != grpc.StatusCode.OK:
                return self._client._error(grpc.aio.AioRpcError(
                    code, await self._call.initial_metadata(), await self._call.trailing_metadata(),
                    await self._call.details()))
        return self._closed_error()

    def _end(self, error: Optional[BaseException]) -> None:
        if not self._ended:
            self._error, self._ended = error, True

    async def __aenter__(self) -> "AsyncLiveSession":
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    # ---- sending ----
    async def send(self, frame: Frame, sequence: Optional[int] = None) -> int:
        """As LiveSession.send: returns once gRPC has written the frame (the write's own
        flow control is the only wait)."""
        if self._call is None:
            raise ValueError("live session: not opened (async with client.live(...) as session)")
        loop = asyncio.get_running_loop()
        data, size = await loop.run_in_executor(None, frame_payload, frame)
        async with self._write_lock:
            if self._ended or self._writes_done:
                raise self._closed_error()
            seq = self._in_flight.number(sequence, size is not None)
            request = pb.LiveRequest(frame=pb.LiveFrame(sequence=seq))
            if size is not None:
                request.frame.raw.width, request.frame.raw.height = size
            try:
                if len(data) > self._t.memfd_threshold_bytes:
                    await loop.run_in_executor(None, self._t.set_image, data, request.frame.image, request)
                else:
                    self._t.set_image(data, request.frame.image, request)
                await self._call.write(request)
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.CancelledError) as e:
                self._in_flight.forget(seq)
                if isinstance(e, asyncio.CancelledError) and not self._call.done():
                    raise  # this task was cancelled, not the call
                raise (await self._stream_error()) from None
            except BaseException:
                self._in_flight.forget(seq)
                raise
            return seq

    async def close_send(self) -> None:
        """As LiveSession.close_send. Idempotent."""
        async with self._write_lock:
            if self._writes_done or self._ended:
                return
            self._writes_done = True
            try:
                await self._call.done_writing()
            except (grpc.RpcError, asyncio.InvalidStateError):
                pass  # the stream ended: the reader raises why

    # ---- results ----
    def __aiter__(self) -> "AsyncLiveSession":
        return self

    async def __anext__(self) -> LiveResult:
        if self._call is None:
            raise ValueError("live session: not opened (async with client.live(...) as session)")
        if self._ended:
            if self._error is not None:
                self._raise_end()
            raise StopAsyncIteration
        try:
            response = await self._call.read()
        except grpc.RpcError as e:
            cancelled = e.code() == grpc.StatusCode.CANCELLED and self._call.cancelled()
            self._end(Cancelled("live session cancelled") if cancelled else self._client._error(e))
            self._raise_end()
            raise
        except asyncio.CancelledError:  # read() raises it for a call cancelled here, too
            if self._ended:
                self._raise_end()  # cancel(): swap()'s sender failed, or the caller cancelled
            self.cancel()  # this task was cancelled
            raise
        if response is grpc.aio.EOF:  # ended OK without a summary (an error is raised by read())
            self._end(Internal("Live: the daemon ended the stream without a summary"))
            self._raise_end()
        which = response.WhichOneof("response")
        if which == "frame":
            return result(response, self._in_flight)
        if which == "summary":
            self._summary = summary(response)
            self._end(None)
            raise StopAsyncIteration
        self._call.cancel()
        self._end(Internal(f"Live: unexpected message '{which}' in the stream"))
        self._raise_end()
        raise AssertionError  # unreachable

    async def swap(self, frames: Union[Iterable[Frame], AsyncIterable[Frame]]) -> AsyncIterator[LiveResult]:
        """As LiveSession.swap: sends ``frames`` (an iterable or an async iterable) from a task
        of its own, then close_send(), and yields the results until the summary. Stopping
        early cancels the session; an exception of ``frames`` cancels it and is raised here."""
        sender = asyncio.get_running_loop().create_task(self._send_all(frames))
        try:
            async for r in self:
                yield r
        finally:
            if not self._ended:
                self.cancel()
            if not sender.done():
                sender.cancel()
            try:
                await sender
            except BaseException:  # noqa: B036 - kept in _send_error or the stream's end
                pass

    async def _send_all(self, frames: Union[Iterable[Frame], AsyncIterable[Frame]]) -> None:
        try:
            if isinstance(frames, AsyncIterable):
                async for frame in frames:
                    await self.send(frame)
            else:
                for frame in frames:
                    await self.send(frame)
            await self.close_send()
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: B036 - handed to the reading task
            if not self._ended:
                self._send_error = e
                self.cancel()

    # ---- end ----
    def cancel(self) -> None:
        """Ends the stream now."""
        if self._call is not None:
            self._call.cancel()
        self._end(self._error or Cancelled("live session cancelled"))

    def close(self) -> None:
        """Cancels the stream unless it has ended. Idempotent."""
        if not self._ended:
            self.cancel()

    def __del__(self) -> None:
        # As LiveSession's: an opened session dropped unclosed is cancelled (on the loop's thread,
        # where its last reference goes), so the daemon releases it.
        if getattr(self, "_ended", True) or getattr(self, "_call", None) is None:
            return
        warnings.warn("fusiond: an async live session was dropped without close(); it is cancelled now",
                      ResourceWarning, stacklevel=2)
        try:
            self.cancel()
        except Exception:  # noqa: BLE001 - a closed loop: the channel's close ends the call
            pass
