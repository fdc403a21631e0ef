"""fusiond.AsyncClient: the same methods as fusiond.Client, as coroutines on grpc.aio.

Use it from one event loop (the one it was made in — grpc.aio channels belong to a loop).
The fd-socket transfers of large images and the encoding of arrays run in the loop's default
executor, so they never block the loop. Fork-safety as fusiond.Client.
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, List, Optional, Sequence, cast

import grpc
import grpc.aio

from . import _convert
from ._images import ImageInput, read_image
from ._proto.fusion.v1 import fusion_pb2 as pb
from ._proto.fusion.v1 import fusion_pb2_grpc as pb_grpc
from ._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
from ._transport import Transport
from .client import LONG_CALL_FACTOR, JobHandle, ProgressCallback, job_failure
from .errors import Error
from .live import AsyncLiveSession
from .types import (AnyJobEvent, Done, JobInfo, JobState, LiveSessionInfo, MemoryState, ModelInfo, ServingStatus,
                    SwapResult, TransferStats)


class AsyncClient:
    """Asynchronous client of fusiond; arguments, errors and options as fusiond.Client.
    ``async with fusiond.AsyncClient() as client: ...``, or await close()."""

    def __init__(self, socket: Optional[str] = None, timeout: float = 2.0, *,
                 memfd_threshold_bytes: int = 4 << 20, max_message_bytes: int = 32 << 20) -> None:
        self._t = Transport(socket, timeout, memfd_threshold_bytes, max_message_bytes)
        self._channel = grpc.aio.insecure_channel(self._t.target, options=self._t.channel_options)
        self._stub = pb_grpc.FusionStub(self._channel)  # type: ignore[no-untyped-call]
        self._health = health_pb2_grpc.HealthStub(self._channel)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def target(self) -> str:
        return self._t.target

    def transfer_stats(self) -> TransferStats:
        return self._t.stats()

    def _error(self, e: grpc.RpcError) -> Error:
        ready = self._channel.get_state(try_to_connect=False) == grpc.ChannelConnectivity.READY
        return self._t.error(e, ready)

    async def _call(self, method: Any, request: Any, factor: int = 1) -> Any:
        self._t.check_pid()
        try:
            return await method(request, timeout=self._t.timeout * factor)
        except grpc.RpcError as e:
            raise self._error(e) from None

    async def _stream(self, call: Any) -> AsyncIterator[Any]:
        try:
            async for message in call:
                yield message
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()

    # ---- health and memory ----
    async def health(self, service: str = "") -> ServingStatus:
        r = await self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return ServingStatus(r.status)

    async def memory(self) -> MemoryState:
        return _convert.memory(await self._call(self._stub.GetMemoryState, pb.GetMemoryStateRequest()))

    async def watch_memory(self, interval: float = 1.0) -> AsyncIterator[MemoryState]:
        """Async iterator: one MemoryState now, then one every ``interval`` seconds."""
        self._t.check_pid()
        call = self._stub.WatchMemory(pb.WatchMemoryRequest(interval_ms=max(100, round(interval * 1000))))
        async for state in self._stream(call):
            yield _convert.memory(state)

    # ---- models ----
    async def models(self) -> List[ModelInfo]:
        r = await self._call(self._stub.ListModels, pb.ListModelsRequest())
        return [_convert.model(m) for m in r.models]

    async def load(self, name: str) -> ModelInfo:
        return _convert.model(await self._call(self._stub.LoadModel, pb.ModelRequest(name=name), LONG_CALL_FACTOR))

    async def unload(self, name: str) -> ModelInfo:
        return _convert.model(await self._call(self._stub.UnloadModel, pb.ModelRequest(name=name)))

    async def pin(self, name: str) -> ModelInfo:
        return _convert.model(await self._call(self._stub.PinModel, pb.ModelRequest(name=name), LONG_CALL_FACTOR))

    async def unpin(self, name: str) -> ModelInfo:
        return _convert.model(await self._call(self._stub.UnpinModel, pb.ModelRequest(name=name)))

    # ---- live sessions ----
    def live(self, source: ImageInput, **options: Any) -> AsyncLiveSession:
        """A live session with the face of ``source``, opened by ``async with`` (or ``await
        session.open()``); options and errors as fusiond.Client.live::

            async with client.live("me.png") as session:
                async for result in session.swap(frames):  # an iterable or an async iterable
                    ...
        """
        return AsyncLiveSession(self, source, _convert.live_options(**options))

    # ---- jobs ----
    async def submit(self, source: ImageInput, target: ImageInput, **options: Any) -> "AsyncJob":
        opts, reference = _convert.job_options(**options)

        def prepare() -> pb.SubmitJobRequest:  # file reads, encoding, memfd puts: off the loop
            src, tgt = read_image(source, "source image"), read_image(target, "target image")
            return self._t.submit_request(src, tgt, opts, reference)

        self._t.check_pid()
        request = await asyncio.get_running_loop().run_in_executor(None, prepare)
        r = await self._call(self._stub.SubmitJob, request, LONG_CALL_FACTOR)
        return AsyncJob(self, _convert.job(r.job))

    async def swap(self, source: ImageInput, target: ImageInput, *,
                   on_progress: Optional[ProgressCallback] = None, timeout: Optional[float] = None,
                   **options: Any) -> SwapResult:
        """As fusiond.Client.swap (same options and defaults)."""
        job = await self.submit(source, target, **options)
        return await job.result(timeout=timeout, on_progress=on_progress)

    async def jobs(self, states: Sequence[JobState] = (), limit: int = 0) -> List[JobInfo]:
        r = await self._call(self._stub.ListJobs, pb.ListJobsRequest(states=[cast(Any, s.value) for s in states], limit=limit))
        return [_convert.job(j) for j in r.jobs]

    async def live_sessions(self, all_uids: bool = False) -> List[LiveSessionInfo]:
        r = await self._call(self._stub.ListLiveSessions, pb.ListLiveSessionsRequest(all_uids=all_uids))
        return [_convert.live_session(s) for s in r.sessions]

    async def job(self, job_id: str) -> "AsyncJob":
        return AsyncJob(self, await self._get_job(job_id))

    async def _get_job(self, job_id: str) -> JobInfo:
        return _convert.job(await self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id)))

    async def _cancel(self, job_id: str) -> JobInfo:
        return _convert.job(await self._call(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id)))

    async def _events(self, job_id: str, timeout: Optional[float]) -> AsyncIterator[AnyJobEvent]:
        self._t.check_pid()
        call = self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id), timeout=timeout)
        async for e in self._stream(call):
            yield _convert.event(e)

    async def _result(self, job_id: str, prefer_memfd: bool) -> SwapResult:
        request = pb.GetJobResultRequest(job_id=job_id, prefer_memfd=prefer_memfd)
        response = await self._call(self._stub.GetJobResult, request, LONG_CALL_FACTOR)
        loop = asyncio.get_running_loop()
        if response.image.HasField("memfd"):
            # The memfd get (and, failing that, an inline refetch) off the loop.
            def refetch(req: pb.GetJobResultRequest) -> pb.JobResult:
                return cast(pb.JobResult, asyncio.run_coroutine_threadsafe(
                    self._call(self._stub.GetJobResult, req, LONG_CALL_FACTOR), loop).result())
            image, by_memfd, response = await loop.run_in_executor(
                None, self._t.result_image, response, request, refetch)
        else:
            image, by_memfd, response = self._t.result_image(response, request, lambda r: r)
        return _convert.result(response, image, by_memfd)


class AsyncJob(JobHandle):
    """As fusiond.Job, with coroutines and an async iterator of events."""

    def __init__(self, client: AsyncClient, info: JobInfo) -> None:
        super().__init__(info)
        self._client = client

    async def refresh(self) -> JobInfo:
        self.info = await self._client._get_job(self.id)
        return self.info

    async def events(self, timeout: Optional[float] = None) -> AsyncIterator[AnyJobEvent]:
        async for e in self._client._events(self.id, timeout):
            if isinstance(e, Done):
                self.info = e.job
            yield e

    async def wait(self, timeout: Optional[float] = None,
                   on_progress: Optional[ProgressCallback] = None) -> JobInfo:
        if self.info.state.final:
            return self.info
        async for e in self.events(timeout):
            if on_progress is not None:
                on_progress(e)
        return self.info

    async def cancel(self) -> JobInfo:
        self.info = await self._client._cancel(self.id)
        return self.info

    async def result(self, timeout: Optional[float] = None, prefer_memfd: bool = False,
                     on_progress: Optional[ProgressCallback] = None) -> SwapResult:
        info = await self.wait(timeout, on_progress)
        if info.state != JobState.SUCCEEDED:
            raise job_failure(info)
        return await self._client._result(self.id, prefer_memfd)
