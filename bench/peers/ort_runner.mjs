// ONNX Runtime (onnxruntime-node 1.30.0, CPU execution provider) on one ONNX export: a session
// per intra-op thread count (inter-op 1, sequential, all graph optimisations), timed per run.
import { performance } from 'node:perf_hooks';
import ort from 'onnxruntime-node';

export const ortVersion = ort.env.versions?.node ?? 'unknown';

export class OrtRunner {
  static async create(onnxPath, threads, input, inputShape) {
    const session = await ort.InferenceSession.create(onnxPath, {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
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

  // Milliseconds of each of `iters` runs (wall clock around session.run, N-API call included).
  async time(iters) {
    const ms = [];
    for (let i = 0; i < iters; ++i) {
      const t0 = performance.now();
      await this.session.run(this.feeds);
      ms.push(performance.now() - t0);
    }
    return ms;
  }
}
