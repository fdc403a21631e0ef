// bench/peers driver (issue 12): times fusiond's own forward, ONNX Runtime and OpenCV dnn on the
// same weights and input, interleaved, and prints a markdown table. ONNX Runtime runs here;
// fusiond and OpenCV dnn run in `fusion_peer_bench worker` (one process, started by this one),
// so exactly one runtime computes at a time. Per network and thread count: `warmup` runs of
// each, then `rounds` rounds, each running every runtime `iters` times in a rotating order;
// the figures are medians over all rounds' runs (every run's time goes to OUT/results.json).
// Run by bench/peers/run.sh, not by CI.
//
//   node driver.mjs --bin BIN --models-dir DIR --image PNG --out DIR
//                   [--threads 1,2] [--rounds 10] [--iters 3] [--warmup 3] [--settle-ms 20]
//                   [--wait-policy spin|passive] [--bf16] [--no-opencv] [ID...]
// --no-opencv: leaves OpenCV dnn out (its columns print "—"), for shorter runs.
// --bf16: fusiond twice, its fast path in fp32 ("fusiond") and in bf16 ("fusiond bf16", a fourth
//   runtime in the same rotation; FUSION_ONEDNN_PRECISION, models/onednn/program.h), with the
//   bf16 output's max abs / relative difference from fusiond's fp32 output.
// --settle-ms: a pause after each block of runs, so the idle threads of the runtime that just ran
// (OpenMP, TBB and ORT pools spin a while before sleeping) do not take a core from the next.
// --wait-policy: how idle intra-op threads wait, the same for both thread-pool runtimes.
//   spin (default, what each ships with): ORT allow_spinning 1, the worker's OpenMP
//   (LibTorch's, oneDNN's) with the OMP_WAIT_POLICY of this environment (libgomp's default:
//   spin a while, then sleep). passive: ORT allow_spinning 0 and OMP_WAIT_POLICY=PASSIVE for the
//   worker (idle threads sleep at once). OpenCV's TBB pool is left as it is in both.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { OrtRunner, ortVersion } from './ort_runner.mjs';
import { bf16Table, markdownTable, maxAbsDiff, median } from './table.mjs';
import { WorkerClient } from './worker_client.mjs';

function parseArgs(argv) {
  const a = { threads: [1, 2], rounds: 10, iters: 3, warmup: 3, settleMs: 20, waitPolicy: 'spin', bf16: false, ids: [] };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === '--bin') a.bin = v();
    else if (k === '--models-dir') a.modelsDir = v();
    else if (k === '--image') a.image = v();
    else if (k === '--out') a.out = v();
    else if (k === '--threads') a.threads = v().split(',').map(Number);
    else if (k === '--rounds') a.rounds = Number(v());
    else if (k === '--iters') a.iters = Number(v());
    else if (k === '--warmup') a.warmup = Number(v());
    else if (k === '--settle-ms') a.settleMs = Number(v());
    else if (k === '--wait-policy') a.waitPolicy = v();
    else if (k === '--bf16') a.bf16 = true;
    else if (k === '--no-opencv') a.noOpencv = true;
    else a.ids.push(k);
  }
  if (!a.bin || !a.modelsDir || !a.image || !a.out) throw new Error('usage: see the head of driver.mjs');
  if (!['spin', 'passive'].includes(a.waitPolicy)) throw new Error('--wait-policy: spin or passive');
  return a;
}

// A copy into a fresh ArrayBuffer: a Buffer's byteOffset need not be a multiple of 4.
const readF32 = (file) => new Float32Array(new Uint8Array(fs.readFileSync(file)).buffer);
const log = (...m) => console.error('[peers]', ...m);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () => os.loadavg().map((v) => v.toFixed(2)).join(' ');

async function benchNet(worker, a, id) {
  const meta = JSON.parse(fs.readFileSync(path.join(a.out, `${id}.json`)));
  const mirror = JSON.parse(fs.readFileSync(path.join(a.out, `${id}.mirror.json`)));
  const onnx = path.join(a.out, `${id}.onnx`);
  const input = readF32(path.join(a.out, `${id}.input.f32`));
  const ref = readF32(path.join(a.out, `${id}.fusiond.f32`));
  await worker.call(a.bf16 ? `net ${id} fp32` : `net ${id}`);
  const bf16 = a.bf16 ? await worker.call('variant bf16') : null;
  if (bf16) log(`${id}: bf16 vs fp32 max abs diff ${bf16.max_abs_diff}, relative ${bf16.max_rel_diff}`);
  const cv = a.noOpencv ? { ok: false, error: '--no-opencv' } : await worker.call(`onnx ${onnx}`, true);
  if (!cv.ok) log(`${id}: OpenCV dnn left out: ${cv.error}`);
  const rows = [];
  for (const t of a.threads) {
    const ort = await OrtRunner.create(onnx, t, input, meta.input_shape, a.waitPolicy === 'spin');
    const ortDiff = maxAbsDiff(await ort.forward(), ref);
    for (const [name, d] of [['ORT', ortDiff], ['OpenCV', cv.ok ? cv.max_abs_diff : 0]]) {
      if (!(d <= mirror.tolerance)) log(`${id}: ${name}'s output differs from fusiond's by ${d} (> ${mirror.tolerance})`);
    }
    const fromWorker = (r) => ({ ms: r.ms, cpu: r.cpu_ms });
    const runtimes = {
      fusiond: async (n) => fromWorker(await worker.call(`time fusiond ${t} ${n}`)),
      ort: (n) => ort.time(n),
      ...(bf16 ? { fusiondBf16: async (n) => fromWorker(await worker.call(`time fusiond_variant ${t} ${n}`)) } : {}),
      ...(cv.ok ? { opencv: async (n) => fromWorker(await worker.call(`time opencv ${t} ${n}`)) } : {}),
    };
    const names = Object.keys(runtimes);
    for (const n of names) {
      await runtimes[n](a.warmup);
      await sleep(a.settleMs);
    }
    const ms = Object.fromEntries(names.map((n) => [n, []]));
    const cpu = Object.fromEntries(names.map((n) => [n, []]));
    for (let r = 0; r < a.rounds; ++r) {
      for (let j = 0; j < names.length; ++j) {
        const n = names[(r + j) % names.length];
        const got = await runtimes[n](a.iters);
        ms[n].push(...got.ms);
        cpu[n].push(...got.cpu);
        await sleep(a.settleMs);
      }
    }
    const row = { id, threads: t, flops: mirror.flops, mirrorDiff: mirror.mirror_max_abs_diff, ortDiff,
      opencvDiff: cv.ok ? cv.max_abs_diff : NaN, runs: a.rounds * a.iters,
      bf16Diff: bf16 ? bf16.max_abs_diff : NaN, bf16Rel: bf16 ? bf16.max_rel_diff : NaN };
    for (const n of ['fusiond', 'ort', 'opencv', 'fusiondBf16']) {
      row[n] = ms[n] ? median(ms[n]) : NaN;
      row[`${n}Cpu`] = cpu[n] ? median(cpu[n]) : NaN;
    }
    row.ms = ms;  // every run, for results.json
    row.cpuMs = cpu;
    log(`${id} @${t} thread(s): fusiond ${row.fusiond.toFixed(2)} ms (CPU ${row.fusiondCpu.toFixed(2)}), ` +
        `ORT ${row.ort.toFixed(2)} ms (CPU ${row.ortCpu.toFixed(2)}), OpenCV ${row.opencv.toFixed(2)} ms` +
        (bf16 ? `, fusiond bf16 ${row.fusiondBf16.toFixed(2)} ms (CPU ${row.fusiondBf16Cpu.toFixed(2)})` : '') + ` (load ${load()})`);
    rows.push(row);
  }
  return rows;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ids = a.ids.length ? a.ids : fs.readdirSync(a.out).filter((f) => f.endsWith('.mirror.json'))
    .map((f) => f.slice(0, -'.mirror.json'.length));
  const env = a.waitPolicy === 'passive' ? { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' } : process.env;
  const worker = new WorkerClient(a.bin, ['--models-dir', a.modelsDir, '--image', a.image, '--out', a.out], env);
  const startLoad = load();
  const peak0 = (await worker.call('peak')).gflops;
  const rows = [];
  try {
    for (const id of ids) rows.push(...(await benchNet(worker, a, id)));
  } finally {
    var peak1 = (await worker.call('peak')).gflops;
    worker.close();
  }
  const peak = Math.max(peak0, peak1);
  console.log(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} logical CPUs; ` +
    `one-core fp32 FMA peak ${peak.toFixed(1)} GFLOP/s (best of two measurements: ${peak0.toFixed(1)}, ${peak1.toFixed(1)}).`);
  console.log(`Load average (1/5/15 min) at start ${startLoad}, at end ${load()}. ${new Date().toISOString()}`);
  console.log(`Runtimes: fusiond (LibTorch 1.13.1, at::set_num_threads), ONNX Runtime ${ortVersion} CPU EP ` +
    '(intraOpNumThreads, interOpNumThreads 1), OpenCV 4.6.0 dnn (cv::setNumThreads); fp32, NCHW, batch 1.');
  console.log(`Wait policy: ${a.waitPolicy === 'spin' ? 'spin (ORT allow_spinning 1; OMP_WAIT_POLICY ' +
    (process.env.OMP_WAIT_POLICY ?? 'unset, libgomp default') + ')' : 'passive (ORT allow_spinning 0; OMP_WAIT_POLICY=PASSIVE)'}.`);
  console.log('CPU ms: the process CPU time per run (every thread of the worker or of node; under ' +
    'load from other processes less disturbed than the wall-clock ms, and at 2 threads it shows how many cores a run kept busy).');
  console.log(`Medians of ${a.rounds * a.iters} runs each (${a.rounds} interleaved rounds of ${a.iters}, after ` +
    `${a.warmup} warm-up runs); % peak is against threads x the one-core peak.\n`);
  console.log(markdownTable(rows, peak));
  if (a.bf16) console.log(`\nfusiond's fast path in bf16 (FUSION_ONEDNN_PRECISION=bf16), same rounds:\n\n${bf16Table(rows)}`);
  fs.writeFileSync(path.join(a.out, 'results.json'), JSON.stringify({ peak, peak0, peak1, startLoad, endLoad: load(),
    date: new Date().toISOString(), waitPolicy: a.waitPolicy, rounds: a.rounds, iters: a.iters, rows }, null, 1));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
