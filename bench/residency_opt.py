#!/usr/bin/env python3
"""Offline optimum and rolling-horizon reference of bytes uploaded for residency traces.

  residency_opt.py --tool BUILD/bench/residency_trace [--traces bench/traces/*.jsonl]
                   [--budgets 1GiB,1536MiB,2GiB] [--policies default,planner,lookahead,...]
                   [--json]

Needs highspy (HiGHS): bench/residency_opt_setup.sh installs bench/residency_opt_requirements.txt
into a virtual environment and prints its python. Table cells are bytes uploaded / optimum.

Semantics (bench/trace_replay.h, taken from `residency_trace --dump-requests`, so the request
sequence here is the very one the replay runs): turn by turn, the stage of the job at the front
of the rotation Acquires model m with working set w. B = budget, P = pinned bytes. A stage with
bytes(m) + w + P (less m's own bytes if m is pinned) > B is refused: nothing happens. Otherwise
m must be resident during the turn and, during the turn,
    sum of the unpinned resident models' bytes + w + P <= B.
Models leave only by eviction (any number, at any turn: the manager's policy may evict more than
it must); a model is uploaded only by its own stage, which costs bytes(m) when m is not already
resident. Pinned models are always resident and never cost. The device starts empty.

Offline optimum: generalized caching as an ILP. For every pair of consecutive requests of a
model (turns a < b) a binary y says it stays resident over (a, b), saving bytes(m) at b; it then
occupies bytes(m) at every turn strictly between. Each turn's capacity row is the inequality
above. First requests always cost. Solved with HiGHS to proven optimality (mip_rel_gap 0; the
brief allowed 1e-3); the LP relaxation is printed as a lower bound (ratio to the optimum). Lazy realization (evict only when a turn needs room, only models whose
interval is not kept) reaches the ILP's cost, so no policy can do better.

Rolling-horizon reference (what a policy that sees only arrived jobs can reach): at every turn
where a job arrives (and the first), the same ILP over the forecast then (the rotation run to
the end with no more arrivals), starting from the resident set of that moment (a resident model
keeps its bytes until its first request in the forecast if y says so, else it is free to drop);
its decisions are committed until the next arrival: when a turn needs room, victims come from the
resident models the plan does not keep (first those the plan reloads later anyway, then those
with no known use, least recently used first; then any victim not needed is put back, largest
first). The forecast's prefix up to the next arrival is checked to be the sequence replayed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import highspy
except ImportError:
    sys.exit("residency_opt.py: needs highspy; run bench/residency_opt_setup.sh and use the python "
             "it prints")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE = 1e6  # bytes -> MB for the solver's numerics; feasibility is checked again in integers
MIP_GAP = 0.0
POLICIES = ["lru", "lookahead", "belady", "belady-bytes", "planner", "default"]


def parse_size(text):
    units = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}
    for u, f in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * f)
    return int(text)


def dump(tool, trace, budget):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        subprocess.run([tool, "--trace", trace, "--policy", "lru", "--budget", str(budget),
                        "--dump-requests", f.name], check=True, capture_output=True)
        lines = [json.loads(x) for x in open(f.name)]
    return lines[0], lines[1:]


def fits(budget, pinned, req):
    model, size, working, is_pinned = req
    other = pinned - (size if is_pinned else 0)
    return size + working + other <= budget


def solve(steps, budget, pinned, resident, relax=False):
    """steps: [(model, bytes, working, pinned)] that fit; resident: {model: bytes} at the start.
    Returns (cost, kept) where kept[i] = set of models the plan holds (besides the requested
    one) during step i, or (lp bound, None) when relax."""
    last, intervals, fixed = {}, [], 0  # intervals: (model, bytes, first_step, end_step)
    for m, b in resident.items():
        last[m] = -1
    sizes = dict(resident)
    for i, (m, b, w, p) in enumerate(steps):
        if p:
            continue
        sizes[m] = b
        if m in last:
            intervals.append((m, b, last[m] + 1, i))  # occupies steps [first, end)
        else:
            fixed += b
        last[m] = i
    cap = []
    for m, b, w, p in steps:
        cap.append(budget - pinned - w - (0 if p else b))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", MIP_GAP)
    n = len(intervals)
    if n == 0:
        return fixed, [set() for _ in steps]
    h.addCols(n, [-b / SCALE for _, b, _, _ in intervals], [0.0] * n, [1.0] * n, 0, [], [], [])
    rows = [[] for _ in steps]
    for k, (_, b, first, end) in enumerate(intervals):
        for i in range(first, end):
            rows[i].append(k)
    for i, cols in enumerate(rows):
        if cols:
            h.addRow(-highspy.kHighsInf, cap[i] / SCALE, len(cols), cols,
                     [intervals[k][1] / SCALE for k in cols])
    if not relax:
        h.changeColsIntegrality(n, list(range(n)), [highspy.HighsVarType.kInteger] * n)
    h.run()
    y = h.getSolution().col_value
    saved = sum(b * y[k] for k, (_, b, _, _) in enumerate(intervals))
    total = fixed + sum(b for _, b, _, _ in intervals)
    if relax:
        return total - saved, None
    kept = [set() for _ in steps]
    for k, (m, b, first, end) in enumerate(intervals):
        if y[k] > 0.5:
            for i in range(first, end):
                kept[i].add(m)
    for i, (m, b, w, p) in enumerate(steps):  # the integer plan must fit
        assert sum(sizes[x] for x in kept[i]) <= cap[i], ("plan overflows at step", i)
    cost = fixed + sum(b for k, (_, b, _, _) in enumerate(intervals) if y[k] <= 0.5)
    return cost, kept


def offline(head, reqs):
    budget, pinned = head["budget_bytes"], head["pinned_bytes"]
    steps = [(r["model"], r["bytes"], r["working_bytes"], r["pinned"]) for r in reqs if r["fits"]]
    opt, _ = solve(steps, budget, pinned, {})
    lp, _ = solve(steps, budget, pinned, {}, relax=True)
    return opt, lp


def rolling(head, reqs):
    budget, pinned = head["budget_bytes"], head["pinned_bytes"]
    resident, last_use, cost = {}, {}, 0
    plan, plan_turn, fit_index = None, 0, []
    for r in reqs:
        if "forecast" in r:  # a job arrived: plan again over what is known now
            forecast = [tuple(f) for f in r["forecast"]]
            fit_index, steps = [], []
            for f in forecast:
                fit_index.append(len(steps) if fits(budget, pinned, f) else None)
                if fit_index[-1] is not None:
                    steps.append(f)
            _, kept = solve(steps, budget, pinned, dict(resident))
            plan, plan_turn, future = kept, r["turn"], forecast
        offset = r["turn"] - plan_turn
        assert future[offset][0] == r["model"], "forecast prefix differs from the replay"
        if not r["fits"] or r["pinned"]:
            continue
        m, b, w = r["model"], r["bytes"], r["working_bytes"]
        if m not in resident:
            cost += b
            resident[m] = b
        last_use[m] = r["turn"]
        excess = sum(resident.values()) + pinned + w - budget
        if excess > 0:
            keep = plan[fit_index[offset]] | {m}
            later = {f[0] for f in future[offset + 1:]}
            order = sorted((x for x in resident if x not in keep),
                           key=lambda x: (x not in later, last_use[x]))
            victims, freed = [], 0
            for x in order:
                if freed >= excess:
                    break
                victims.append(x)
                freed += resident[x]
            for x in sorted(victims, key=lambda x: -resident[x]):
                if freed - resident[x] >= excess:
                    freed -= resident[x]
                    victims.remove(x)
            assert freed >= excess, ("rolling plan cannot make room at turn", r["turn"])
            for x in victims:
                del resident[x]
    return cost


def replay(tool, trace, budget, policy):
    out = subprocess.run([tool, "--trace", trace, "--policy", policy, "--budget", str(budget)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--traces", nargs="*",
                    default=sorted(glob.glob(os.path.join(ROOT, "bench", "traces", "*.jsonl"))))
    ap.add_argument("--budgets", default="1GiB,1536MiB,2GiB")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--json", action="store_true", help="one JSON object per trace x budget")
    a = ap.parse_args()
    policies = a.policies.split(",")
    budgets = [(b, parse_size(b)) for b in a.budgets.split(",")]
    cols = ["trace", "budget", "optimum (bytes)", "LP bound / optimum"] + policies + ["rolling-horizon"]
    if not a.json:
        print("| " + " | ".join(cols) + " |")
        print("|---|---|" + "---:|" * (len(cols) - 2))
    for trace in a.traces:
        name = os.path.splitext(os.path.basename(trace))[0]
        for label, budget in budgets:
            head, reqs = dump(a.tool, trace, budget)
            opt, lp = offline(head, reqs)
            roll = rolling(head, reqs)
            res = {p: replay(a.tool, trace, budget, p) for p in policies}
            for p, r in res.items():
                assert r["bytes_uploaded"] >= opt * (1 - MIP_GAP), (p, "beats the optimum?")
                assert r["peak_bytes"] <= budget, (p, "over budget")
            if a.json:
                print(json.dumps({"trace": name, "budget": label, "budget_bytes": budget,
                                  "optimum": opt, "lp_bound": lp, "rolling_horizon": roll,
                                  "policies": {p: r for p, r in res.items()}}))
                continue
            cells = [name, label, str(opt), f"{lp / opt:.3f}"]
            cells += [f"{res[p]['bytes_uploaded'] / opt:.3f}" +
                      (f" ({res[p]['refused']} refused)" if res[p]["refused"] else "")
                      for p in policies]
            cells.append(f"{roll / opt:.3f}")
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
