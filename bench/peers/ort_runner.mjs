// ONNX Runtime (onnxruntime-node 1.30.0, CPU execution provider) on one ONNX export: a session
// per intra-op thread count (inter-op 1, sequential, all graph optimisations, spinning or not),
// timed per run.
import { performance } from 'node:perf_hooks';
import ort from 'onnxruntime-node';

export const ortVersion = ort.env.versions?.node ?? 'unknown';

export class OrtRunner {
  // spin: whether the intra-op pool's threads spin while they wait for work (ORT's default) or
  // sleep (session.intra_op.allow_spinning 0), to match the worker's OMP_WAIT_POLICY.
  static async create(onnxPath, threads, input, inputShape, spin = true) {
    const session = await ort.InferenceSession.create(onnxPath, {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      extra: { session: { intra_op: { allow_spinning: spin ? '1' : '0' } } },
    });
    return new OrtRunner(session, new ort.Tensor('float32', input, inputShape));
  }

  constructor(session, feed) {
    this.session = session;
    this.feeds = { [session.inputNames[0]]: feed };
    this.outputName = session.outputNames[0];
  }

  async forward() {
    const out = await this.session.run(this.feeds);
    return out[this.outputName].data;
  }

  // Milliseconds of each of `iters` runs: wall clock around session.run (N-API call included)
  // and this process's CPU time (every thread: ORT's pool and node's own).
  async time(iters) {
    const ms = [], cpu = [];
    for (let i = 0; i < iters; ++i) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await this.session.run(this.feeds);
      ms.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1000);
    }
    return { ms, cpu };
  }
}
