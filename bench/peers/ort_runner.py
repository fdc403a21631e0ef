"""ONNX Runtime (onnxruntime from PyPI, CPU execution provider) on one ONNX export: a session per
intra-op thread count (inter-op 1, sequential, all graph optimisations, spinning or not), timed
per run. The options are the ones the former onnxruntime-node driver set."""
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    raise SystemExit(f"driver.py: {e.name} is not importable by {sys.executable}; run "
                     "bench/peers/setup.sh and this with its venv's python (bench/peers/venv.sh: "
                     "$PEERS_PYTHON), as run.sh does") from e

ORT_VERSION = ort.__version__


class OrtRunner:
    def __init__(self, onnx_path, threads, input_, input_shape, spin=True):
        """spin: whether the intra-op pool's threads spin while they wait for work (ORT's default)
        or sleep (session.intra_op.allow_spinning 0), to match the worker's OMP_WAIT_POLICY."""
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.session = ort.InferenceSession(onnx_path, sess_options=so,
                                            providers=["CPUExecutionProvider"])
        x = np.ascontiguousarray(np.asarray(input_, dtype=np.float32).reshape(input_shape))
        self.feeds = {self.session.get_inputs()[0].name: x}

    def forward(self):
        """The first output, flattened."""
        return self.session.run(None, self.feeds)[0].ravel()

    def time(self, iters):
        """Milliseconds of each of `iters` runs: wall clock around session.run (every output,
        as the node driver asked for; the Python call and the copy into numpy included) and this
        process's CPU time (every thread: ORT's pool and the driver's own)."""
        ms, cpu = [], []
        for _ in range(iters):
            c0 = time.process_time()
            t0 = time.perf_counter()
            self.session.run(None, self.feeds)
            ms.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        return {"ms": ms, "cpu": cpu}
