"""Talks to `fusion_peer_bench worker` (peer_bench.cc): one command line out, one JSON line back."""
import json
import subprocess


class WorkerError(RuntimeError):
    pass


class WorkerClient:
    def __init__(self, binary, args, env=None):
        # stderr is inherited: the worker's log lines go where the driver's go.
        self.child = subprocess.Popen([binary, "worker", *args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env, text=True, bufsize=1)

    def call(self, cmd, allow_error=False):
        """Sends `cmd`; returns the reply object, raises on {"ok":false} unless allow_error."""
        try:
            self.child.stdin.write(cmd + "\n")
            self.child.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(f"worker: {cmd}: worker exited ({self.child.wait()})") from None
        line = self.child.stdout.readline()
        if not line:
            raise WorkerError(f"worker: {cmd}: worker exited ({self.child.wait()})")
        reply = json.loads(line)
        if not reply.get("ok") and not allow_error:
            raise WorkerError(f"worker: {cmd}: {reply.get('error')}")
        return reply

    def close(self):
        if self.child.poll() is None:
            try:
                self.child.stdin.write("quit\n")
                self.child.stdin.close()
            except BrokenPipeError:
                pass
        self.child.wait()
