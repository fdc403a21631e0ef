// Medians and the markdown table of bench/peers (driver.mjs).
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

export function maxAbsDiff(a, b) {
  if (a.length !== b.length) return NaN;
  let m = 0;
  for (let i = 0; i < a.length; ++i) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const fmt = (v, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : '—');
const exp = (v) => (Number.isFinite(v) ? v.toExponential(1) : '—');

// One GFLOP/s cell: "G (P%)" against `peak` GFLOP/s (one core's peak times the threads).
function rate(flops, ms, peak) {
  if (!Number.isFinite(ms)) return '—';
  const g = flops / (ms * 1e6);
  return `${g.toFixed(1)} (${((100 * g) / peak).toFixed(0)}%)`;
}

export function markdownTable(rows, corePeak) {
  const head = ['network @input', 'GFLOP', 'threads', 'fusiond ms', 'ORT ms', 'OpenCV ms', 'fusiond/ORT',
    'CPU ms fusiond / ORT (ratio)',
    'fusiond GFLOP/s (% peak)', 'ORT GFLOP/s (% peak)', 'OpenCV GFLOP/s (% peak)',
    'max abs diff ORT / OpenCV vs fusiond', 'mirror vs fusiond'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    const peak = corePeak * r.threads;
    lines.push(`| ${[r.id, fmt(r.flops / 1e9, 3), r.threads, fmt(r.fusiond), fmt(r.ort), fmt(r.opencv),
      fmt(r.fusiond / r.ort), `${fmt(r.fusiondCpu)} / ${fmt(r.ortCpu)} (${fmt(r.fusiondCpu / r.ortCpu)})`, rate(r.flops, r.fusiond, peak), rate(r.flops, r.ort, peak),
      rate(r.flops, r.opencv, peak), `${exp(r.ortDiff)} / ${exp(r.opencvDiff)}`, exp(r.mirrorDiff)].join(' | ')} |`);
  }
  return lines.join('\n');
}

// driver.mjs --bf16: fusiond's fp32 and bf16 fast paths against ORT, from the same rounds.
export function bf16Table(rows) {
  const head = ['network @input', 'threads', 'fusiond fp32 ms', 'fusiond bf16 ms', 'ORT ms', 'bf16 / fp32',
    'fp32 / ORT', 'bf16 / ORT', 'CPU ms fp32 / bf16', 'bf16 vs fp32 max abs (rel) diff'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    lines.push(`| ${[r.id, r.threads, fmt(r.fusiond), fmt(r.fusiondBf16), fmt(r.ort), fmt(r.fusiondBf16 / r.fusiond),
      fmt(r.fusiond / r.ort), fmt(r.fusiondBf16 / r.ort), `${fmt(r.fusiondCpu)} / ${fmt(r.fusiondBf16Cpu)}`,
      `${exp(r.bf16Diff)} (${exp(r.bf16Rel)})`].join(' | ')} |`);
  }
  return lines.join('\n');
}
