"""Fixtures of the Python SDK tests: a real fusiond (CPU device, the fetched weights) on a
temporary socket, configured so that uid 65534 (nobody) may call and 65532 may not."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List

import pytest

import fusiond

FUSIOND_BIN = os.path.abspath(os.environ.get("FUSIOND_BIN", "build/daemon/fusiond"))
FUSIONCTL_BIN = os.path.abspath(os.environ.get("FUSIONCTL_BIN", "build/client/fusionctl"))
MODELS_DIR = os.path.abspath(os.environ.get("FUSION_MODELS_DIR", "build/fetched/models"))
DATA_DIR = os.path.abspath(os.environ.get("FUSION_TEST_DATA_DIR", "tests/data"))
FETCHED_DIR = os.path.abspath(os.environ.get("FUSION_FETCHED_TESTDATA_DIR", "build/fetched/testdata"))
SOURCE_DIR = os.path.abspath(os.environ.get("FUSION_SOURCE_DIR", "."))
ASTRONAUT = os.path.join(DATA_DIR, "faces", "astronaut_eileen_collins_512.png")
HOPPER = os.path.join(DATA_DIR, "faces", "grace_hopper_512x600.jpg")
MOSAIC = os.path.join(FETCHED_DIR, "faces", "mosaic_3840x2896.jpg")
NOBODY, OUTSIDER, NOGROUP = 65534, 65532, 65534


class Daemon:
    def __init__(self, root: str) -> None:
        self.root = root
        self.socket = os.path.join(root, "f.sock")
        config = os.path.join(root, "fusiond.toml")
        with open(config, "w") as f:
            f.write(f'socket_group = "nogroup"\nallowed_uids = [{NOBODY}]\n')
        self.log = open(os.path.join(root, "fusiond.log"), "wb")
        # setpriv --pdeathsig: the daemon gets SIGTERM should pytest itself die (no leftover).
        self.proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "TERM", FUSIOND_BIN, "--socket", self.socket, "--device", "cpu", "--device-memory-limit", "1GiB",
             "--state-dir", os.path.join(root, "state"), "--models-dir", MODELS_DIR, "--config", config],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=root)
        deadline = time.monotonic() + 30
        while not self._serving():
            assert self.proc.poll() is None, f"fusiond exited {self.proc.returncode}: {self.log_text()}"
            assert time.monotonic() < deadline, "fusiond did not serve within 30 s"
            time.sleep(0.05)

    def _serving(self) -> bool:
        if not os.path.exists(self.socket):
            return False
        with fusiond.Client(self.socket) as c:  # a fresh channel: no reconnect backoff
            try:
                return c.health() == fusiond.ServingStatus.SERVING
            except fusiond.Unavailable:
                return False

    def log_text(self) -> str:
        with open(os.path.join(self.root, "fusiond.log"), errors="replace") as f:
            return f.read()[-4000:]

    def ctl(self, args: List[str], timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([FUSIONCTL_BIN, "--socket", self.socket, "--timeout-ms", "120000", *args],
                              capture_output=True, text=True, timeout=timeout, cwd=self.root)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            assert self.proc.wait(20) == 0, self.log_text()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory(prefix="fusiond-py-") as root:
        os.chmod(root, 0o755)  # other uids reach the socket
        d = Daemon(root)
        try:
            yield d
        finally:
            d.stop()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[fusiond.Client]:
    with fusiond.Client(daemon.socket, timeout=10) as c:
        yield c


def run_as(uid: int, code: str, *args: str) -> subprocess.CompletedProcess:
    """Runs ``code`` in this venv's Python as ``uid`` (group nogroup); its argv[1:] = args.
    Through setpriv (util-linux): subprocess's own user=/group= fork without exec'ing at
    once, and a forked child of a process with gRPC threads may crash before it execs."""
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={NOGROUP}", "--clear-groups",
                           sys.executable, "-c", code, *args],
                          capture_output=True, text=True, timeout=60, cwd="/")


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
