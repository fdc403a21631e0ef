"""Client side of fusiond's companion fd socket ("<socket path>.fd"), byte for byte the
protocol of proto/fd_protocol.h that the C++ SDK speaks (sdk/src/memfd_transfer.cc):

One request per connection, one text line each way, fds as SCM_RIGHTS ancillary data::

    PUT\\n + a sealed memfd      -> "OK <token> <size_bytes>\\n"
    GET <token>\\n               -> "OK <size_bytes>\\n" + a sealed memfd
    any error                   -> "ERR <grpc code number> <message>\\n"

A daemon that refuses a connection at accept() writes its "ERR ..." line and closes without
reading, so a send that fails (EPIPE) still reads the reply, and the reply wins.
"""
from __future__ import annotations

import array
import errno
import fcntl
import os
import socket
from typing import List, Optional, Tuple

from .errors import Internal, ResourceExhausted, Unavailable, error_for_number

MAX_LINE = 256  # longest request or reply line, bytes (fd_protocol.h's kMaxLine)
TIMEOUT_S = 10.0  # per send/receive, as the C++ SDK's SO_RCVTIMEO/SO_SNDTIMEO
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def companion_path(socket_path: str) -> str:
    return socket_path + ".fd"


def sealed_memfd(data: bytes, name: str = "fusion-sdk-image") -> int:
    """A memfd holding a copy of ``data``, sealed against shrink, grow, write and further
    seals (close-on-exec). Raises ResourceExhausted naming the size."""
    try:
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as e:
        raise ResourceExhausted(f"memfd of {len(data)} bytes: {e.strerror}") from e
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS | fcntl.F_SEAL_SEAL)
    except OSError as e:
        os.close(fd)
        raise ResourceExhausted(f"memfd of {len(data)} bytes: {e.strerror}") from e
    return fd


def _connect(socket_path: str) -> socket.socket:
    path = companion_path(socket_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec by default
    try:
        sock.settimeout(TIMEOUT_S)
        sock.connect(path)
    except OSError as e:
        sock.close()
        raise Unavailable(f"cannot reach fusiond at unix://{path}: {e.strerror or e}") from e
    return sock


def _recv_line(sock: socket.socket) -> Tuple[Optional[str], Optional[int], int]:
    """(line without '\\n', first received fd or None, 0) or (None, None, errno). Extra fds
    are closed at once."""
    buf = b""
    fd: Optional[int] = None
    while len(buf) < MAX_LINE:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_LINE - len(buf), 8,
                                                       socket.MSG_CMSG_CLOEXEC)
        except socket.timeout:
            return _fail(fd, errno.ETIMEDOUT)
        except OSError as e:
            return _fail(fd, e.errno or errno.EIO)
        for f in fds:
            if fd is None:
                fd = f
            else:
                os.close(f)
        if not data:
            break  # peer closed before the end of the line
        buf += data
        end = buf.find(b"\n")
        if end >= 0:
            return buf[:end].decode("utf-8", "replace"), fd, 0
    return _fail(fd, errno.EPROTO)


def _fail(fd: Optional[int], err: int) -> Tuple[None, None, int]:
    if fd is not None:
        os.close(fd)
    return None, None, err


def _exchange(sock: socket.socket, request: bytes, fd_to_send: Optional[int]) -> Tuple[str, Optional[int]]:
    send_err = 0
    try:
        fds: List[int] = [] if fd_to_send is None else [fd_to_send]
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        if sock.sendmsg([request], ancillary, socket.MSG_NOSIGNAL) != len(request):
            send_err = errno.EPROTO
    except socket.timeout:
        send_err = errno.ETIMEDOUT
    except OSError as e:
        send_err = e.errno or errno.EIO
    line, fd, recv_err = _recv_line(sock)
    if line is not None and (send_err == 0 or line.startswith("ERR ")):
        return line, fd
    if fd is not None:
        os.close(fd)
    if send_err:
        raise Unavailable(f"fd socket: send: {os.strerror(send_err)}")
    raise Unavailable(f"fd socket: receive: {os.strerror(recv_err)}")


def _parse(line: str) -> List[str]:
    """'OK a b' -> ['a', 'b']; 'ERR code msg' -> raises that error."""
    parts = line.split(" ", 2)
    if parts and parts[0] == "OK":
        return parts[1:]
    if len(parts) >= 2 and parts[0] == "ERR" and parts[1].isdigit():
        raise error_for_number(int(parts[1]), parts[2] if len(parts) > 2 else "")
    raise Internal(f"fd socket: malformed reply '{line}'")


def put(socket_path: str, data: bytes) -> str:
    """Copies ``data`` into a sealed memfd, hands it to the daemon and returns its token."""
    memfd = sealed_memfd(data)
    try:
        sock = _connect(socket_path)
        try:
            line, fd = _exchange(sock, b"PUT\n", memfd)
            if fd is not None:
                os.close(fd)
        finally:
            sock.close()
    finally:
        os.close(memfd)
    parts = _parse(line)
    if not parts or not parts[0]:
        raise Internal("fd socket: reply without a token")
    return parts[0]


def get(socket_path: str, token: str) -> bytes:
    """The bytes of the daemon's memfd ``token`` (e.g. a result image)."""
    sock = _connect(socket_path)
    try:
        line, fd = _exchange(sock, f"GET {token}\n".encode(), None)
    finally:
        sock.close()
    try:
        _parse(line)
        if fd is None:
            raise Internal("fd socket: reply without an fd")
        # One pread copy (several times faster than mapping it and copying the mapping, which
        # takes a page fault per page: 1.2 vs 6-14 ms for 11 MiB here).
        size = os.fstat(fd).st_size
        chunks = []
        offset = 0
        while offset < size:
            chunk = os.pread(fd, size - offset, offset)
            if not chunk:
                raise Internal(f"fd socket: the memfd of {size} bytes ended at byte {offset}")
            chunks.append(chunk)
            offset += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        if fd is not None:
            os.close(fd)
