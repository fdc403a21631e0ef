"""Medians and the markdown tables of bench/peers (driver.py). Cells are formatted as the former
node driver's were (toFixed, toExponential), so tables from either compare line for line."""
import math

import numpy as np


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    return s[(n - 1) // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def max_abs_diff(a, b):
    """Largest |a - b| over two flat fp32 arrays, in double; NaN when their sizes differ."""
    if a.size != b.size:
        return math.nan
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64).ravel() - b.astype(np.float64).ravel())))


def finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def fmt(v, d=2):
    return f"{v:.{d}f}" if finite(v) else "—"


def exp(v):
    """JavaScript's toExponential(1): 8.8e-5, 1.2e+3."""
    if not finite(v):
        return "—"
    mantissa, e = f"{v:.1e}".split("e")
    e = int(e)
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def ratio(a, b):
    return a / b if finite(a) and finite(b) and b != 0 else math.nan


def rate(flops, ms, peak):
    """One GFLOP/s cell: "G (P%)" against `peak` GFLOP/s (one core's peak times the threads)."""
    if not finite(ms):
        return "—"
    g = flops / (ms * 1e6)
    return f"{g:.1f} ({100 * g / peak:.0f}%)"


def _lines(head, body):
    return "\n".join([f"| {' | '.join(head)} |", f"|{'|'.join('---' for _ in head)}|"] +
                     [f"| {' | '.join(str(c) for c in row)} |" for row in body])


def markdown_table(rows, core_peak):
    head = ["network @input", "GFLOP", "threads", "fusiond ms", "ORT ms", "OpenCV ms", "fusiond/ORT",
            "CPU ms fusiond / ORT (ratio)",
            "fusiond GFLOP/s (% peak)", "ORT GFLOP/s (% peak)", "OpenCV GFLOP/s (% peak)",
            "max abs diff ORT / OpenCV vs fusiond", "mirror vs fusiond"]
    body = []
    for r in rows:
        peak = core_peak * r["threads"]
        body.append([r["id"], fmt(r["flops"] / 1e9, 3), r["threads"], fmt(r["fusiond"]), fmt(r["ort"]),
                     fmt(r["opencv"]), fmt(ratio(r["fusiond"], r["ort"])),
                     f"{fmt(r['fusiondCpu'])} / {fmt(r['ortCpu'])} ({fmt(ratio(r['fusiondCpu'], r['ortCpu']))})",
                     rate(r["flops"], r["fusiond"], peak), rate(r["flops"], r["ort"], peak),
                     rate(r["flops"], r["opencv"], peak), f"{exp(r['ortDiff'])} / {exp(r['opencvDiff'])}",
                     exp(r["mirrorDiff"])])
    return _lines(head, body)


def bf16_table(rows):
    """driver.py --bf16: fusiond's fp32 and bf16 fast paths against ORT, from the same rounds."""
    head = ["network @input", "threads", "fusiond fp32 ms", "fusiond bf16 ms", "ORT ms", "bf16 / fp32",
            "fp32 / ORT", "bf16 / ORT", "CPU ms fp32 / bf16", "bf16 vs fp32 max abs (rel) diff"]
    body = []
    for r in rows:
        body.append([r["id"], r["threads"], fmt(r["fusiond"]), fmt(r["fusiondBf16"]), fmt(r["ort"]),
                     fmt(ratio(r["fusiondBf16"], r["fusiond"])), fmt(ratio(r["fusiond"], r["ort"])),
                     fmt(ratio(r["fusiondBf16"], r["ort"])),
                     f"{fmt(r['fusiondCpu'])} / {fmt(r['fusiondBf16Cpu'])}",
                     f"{exp(r['bf16Diff'])} ({exp(r['bf16Rel'])})"])
    return _lines(head, body)
