#!/usr/bin/python3
"""Prints the tuning benchmark tables from JSON lines written by tune-bench
and optuna_bench.py (see run.sh). Markdown output, ready for RESULTS.md.

usage: report.py RESULTS.jsonl... [--latency LATENCY.jsonl]
"""
import argparse
import json
import math
from collections import defaultdict

import numpy as np

BUDGETS = ["25", "50", "100"]
FUNCTIONS = ["branin", "hartmann6", "rosenbrock4", "ackley5", "mixed"]
OPTUNA_SEQ = ["optuna-tpe", "optuna-mvtpe", "optuna-cmaes"]
RANDOM = "optuna-random"
STOKER = "stoker-gp"


def fmt(x):
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 0.01:
        return "%.3g" % x
    return "%.1e" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--latency")
    args = ap.parse_args()
    runs = defaultdict(list)  # (method, function, budget) -> regrets
    seeds = defaultdict(set)
    for path in args.files:
        for line in open(path):
            r = json.loads(line)
            for b, v in r["regret"].items():
                runs[(r["method"], r["function"], b)].append(max(v, 0.0))
            seeds[r["method"]].add(r["seed"])
    methods = sorted({m for m, _, _ in runs}, key=lambda m: (not m.startswith("stoker"), m))
    functions = [f for f in FUNCTIONS if any((m, f, "25") in runs for m in methods)]

    def q(m, f, b):
        v = runs.get((m, f, b))
        if not v:
            return None
        return np.percentile(v, [25, 50, 75])

    print("### Simple regret: median [25th–75th percentile] over %s seeds\n"
          % "/".join(str(len(seeds[m])) for m in methods[:1]))
    print("| function | budget | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    for f in functions:
        for b in BUDGETS:
            cells = []
            for m in methods:
                s = q(m, f, b)
                cells.append("—" if s is None else "%s [%s–%s]" % (fmt(s[1]), fmt(s[0]), fmt(s[2])))
            print("| %s | %s | %s |" % (f, b, " | ".join(cells)))

    print("\n### Normalised regret (median / %s median) and Stoker vs Optuna's best sampler\n" % RANDOM)
    norm_methods = [m for m in methods if m != RANDOM]
    print("| function | budget | " + " | ".join(norm_methods) +
          " | Optuna's best (seq.) | Stoker GP beats it? | Stoker GP ≤ random? |")
    print("|---|---|" + "---|" * (len(norm_methods) + 3))
    wins = cells_total = never_worse = 0
    at50 = defaultdict(list)
    par_wins = par_total = 0
    for f in functions:
        for b in BUDGETS:
            rnd = q(RANDOM, f, b)
            row = []
            for m in norm_methods:
                s = q(m, f, b)
                if s is None or rnd is None:
                    row.append("—")
                    continue
                norm = s[1] / rnd[1] if rnd[1] > 0 else float("nan")
                row.append(fmt(norm))
                if b == "50":
                    at50[m].append(norm)
            best_name, best_med = None, math.inf
            for m in OPTUNA_SEQ:
                s = q(m, f, b)
                if s is not None and s[1] < best_med:
                    best_name, best_med = m, s[1]
            st = q(STOKER, f, b)
            win = st is not None and st[1] < best_med
            ok = st is not None and rnd is not None and st[1] <= rnd[1]
            wins += win
            never_worse += ok
            cells_total += 1
            sp, tp = q("stoker-gp-batch8", f, b), q("optuna-tpe-cl", f, b)
            if sp is not None and tp is not None:
                par_total += 1
                par_wins += sp[1] < tp[1]
            print("| %s | %s | %s | %s (%s) | %s | %s |" % (
                f, b, " | ".join(row), best_name, fmt(best_med), "yes" if win else "**no**",
                "yes" if ok else "**no**"))
    print("\nGeometric mean of normalised regret at 50 trials (cells with zero regret "
          "are floored at 1e-12 of the random median):\n")
    print("| method | geometric mean |")
    print("|---|---|")
    for m in norm_methods:
        v = [max(x, 1e-12) for x in at50[m] if not math.isnan(x)]
        if v:
            print("| %s | %s |" % (m, fmt(math.exp(sum(math.log(x) for x in v) / len(v)))))
    print("\nStoker GP (sequential) beats Optuna's best sequential sampler in %d of %d cells "
          "(%.0f%%); it is no worse than random in %d of %d." % (
              wins, cells_total, 100.0 * wins / max(1, cells_total), never_worse, cells_total))
    if par_total:
        print("Parallel (8 per round): stoker-gp-batch8 beats optuna-tpe-cl in %d of %d cells."
              % (par_wins, par_total))

    if args.latency:
        lat = defaultdict(list)
        for line in open(args.latency):
            r = json.loads(line)
            lat[r["observations"]].append((r["cold_ms"], r["warm_ms"]))
        print("\n### Suggestion latency, 10 dimensions, one suggestion (ms; median and max over reps)\n")
        print("| observations | cold (fresh sampler, full fit) | warm (previous fit reused) | target |")
        print("|---|---|---|---|")
        for n in sorted(lat):
            cold = [c for c, _ in lat[n]]
            warm = [w for _, w in lat[n]]
            target = "< 50" if n == 100 else ("< 1000" if n == 1000 else "—")
            print("| %d | %.0f (max %.0f) | %.0f (max %.0f) | %s |" % (
                n, np.median(cold), max(cold), np.median(warm), max(warm), target))


if __name__ == "__main__":
    main()
