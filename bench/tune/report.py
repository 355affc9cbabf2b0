#!/usr/bin/python3
"""Prints the tuning benchmark tables from JSON lines written by tune-bench
and optuna_bench.py (see run.sh). Markdown output, ready for RESULTS.md.

usage: report.py RESULTS.jsonl... [--stoker stoker-gp[,variant...]] [--latency LATENCY.jsonl]

Per (entry, budget) cell: regrets are normalised by the median regret of
optuna-random in that cell; the best peer is the Optuna sampler with the
lowest median; a two-sided Mann-Whitney U test (normal approximation with tie
correction and continuity correction, alpha 0.05) between the candidate's
regrets and the best peer's decides won / lost / tied.
"""
import argparse
import json
import math
from collections import defaultdict

import numpy as np

BUDGETS = ["20", "30", "50", "100"]
RANDOM = "optuna-random"
ALPHA = 0.05


def fmt(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 0.01:
        return "%.3g" % x
    return "%.1e" % x


def mann_whitney(a, b):
    """(U of a, two-sided p). U < len(a)·len(b)/2 means a tends to be smaller."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    rank_sum_a, tie_term, i = 0.0, 0.0, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        midrank = (i + j) / 2.0 + 1
        rank_sum_a += midrank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        t = j - i + 1
        tie_term += t ** 3 - t
        i = j + 1
    u = rank_sum_a - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return u, 1.0
    z = max(abs(u - n1 * n2 / 2.0) - 0.5, 0.0) / math.sqrt(var)
    return u, math.erfc(z / math.sqrt(2))


def load(paths):
    runs = defaultdict(list)  # (method, entry, budget) -> regrets
    entries, seeds = [], defaultdict(set)  # (method, entry) -> seeds
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if r["function"] not in entries:
                entries.append(r["function"])
            seeds[(r["method"], r["function"])].add(r["seed"])
            for b, v in r["regret"].items():
                runs[(r["method"], r["function"], b)].append(max(v, 0.0))
    return runs, entries, seeds


def verdict(cand, peer):
    u, p = mann_whitney(cand, peer)
    if p >= ALPHA:
        return "tied", p
    return ("won" if u < len(cand) * len(peer) / 2.0 else "lost"), p


def cells(runs, entries, stoker):
    """One dict per (entry, budget) with the candidate, best peer, random, verdicts."""
    peers = sorted({m for m, _, _ in runs if m.startswith("optuna-")})
    out = []
    for f in entries:
        for b in BUDGETS:
            rnd = runs.get((RANDOM, f, b))
            cand = runs.get((stoker, f, b))
            if not rnd or not cand:
                continue
            best = min((m for m in peers if runs.get((m, f, b))),
                       key=lambda m: np.median(runs[(m, f, b)]))
            scale = np.median(rnd)
            norm = (lambda v: np.median(v) / scale) if scale > 0 else (lambda v: float("nan"))
            vs_peer, p = verdict(cand, runs[(best, f, b)])
            vs_random, _ = verdict(cand, rnd)
            out.append({"entry": f, "budget": b, "cand": np.median(cand), "norm": norm(cand),
                        "best": best, "best_med": np.median(runs[(best, f, b)]),
                        "best_norm": norm(runs[(best, f, b)]), "p": p, "verdict": vs_peer,
                        "lower_median": np.median(cand) < np.median(runs[(best, f, b)]),
                        "le_random": np.median(cand) <= scale, "vs_random": vs_random})
    return out


def print_cells(cs, stoker):
    print("### %s vs the best Optuna sampler per cell\n" % stoker)
    print("Each budget column: verdict of the rank test (p), then normalised median regret "
          "(median / optuna-random's median) of %s vs the best peer's, and the best peer." % stoker)
    print("\n| entry | " + " | ".join("%s trials" % b for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    by_entry = defaultdict(dict)
    for c in cs:
        by_entry[c["entry"]][c["budget"]] = c
    for f, row in by_entry.items():
        texts = []
        for b in BUDGETS:
            c = row.get(b)
            if c is None:
                texts.append("—")
                continue
            v = c["verdict"] if c["verdict"] == "tied" else "**%s**" % c["verdict"]
            texts.append("%s (p %.2g): %s vs %s %s" % (v, c["p"], fmt(c["norm"]),
                                                       fmt(c["best_norm"]),
                                                       c["best"].replace("optuna-", "")))
        print("| %s | %s |" % (f, " | ".join(texts)))


def print_summary(cs, stoker):
    n = len(cs)
    won = sum(c["verdict"] == "won" for c in cs)
    lost = sum(c["verdict"] == "lost" for c in cs)
    lower = sum(c["lower_median"] for c in cs)
    le_rnd = sum(c["le_random"] for c in cs)
    lost_rnd = sum(c["vs_random"] == "lost" for c in cs)
    print("| %s | %d | %d | %d | %d (%.0f%%) | %d | %d |" % (
        stoker, won, lost, n - won - lost, lower, 100.0 * lower / max(n, 1), le_rnd, lost_rnd))


def print_summary_header(n):
    print("| candidate | won | lost | tied | lower median than best peer (of %d) | "
          "median ≤ random's | significantly worse than random |" % n)
    print("|---|---|---|---|---|---|---|")


def print_by_budget(cs):
    print("\n| budget | won | lost | tied | lower median |")
    print("|---|---|---|---|---|")
    for b in BUDGETS:
        sub = [c for c in cs if c["budget"] == b]
        won = sum(c["verdict"] == "won" for c in sub)
        lost = sum(c["verdict"] == "lost" for c in sub)
        print("| %s | %d | %d | %d | %d of %d |" % (b, won, lost, len(sub) - won - lost,
                                                   sum(c["lower_median"] for c in sub), len(sub)))


def print_geomeans(runs, entries):
    methods = sorted({m for m, _, _ in runs if m != RANDOM},
                     key=lambda m: (not m.startswith("stoker"), m))
    print("\nGeometric mean over entries of normalised median regret (zero regret floored "
          "at 1e-6 of random's median):\n")
    print("| method | " + " | ".join("%s trials" % b for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    for m in methods:
        row = []
        for b in BUDGETS:
            logs = []
            for f in entries:
                v, rnd = runs.get((m, f, b)), runs.get((RANDOM, f, b))
                if v and rnd and np.median(rnd) > 0:
                    logs.append(math.log(max(np.median(v) / np.median(rnd), 1e-6)))
            row.append(fmt(math.exp(sum(logs) / len(logs))) if logs else "—")
        print("| %s | %s |" % (m, " | ".join(row)))


def print_latency(path):
    lat = defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        lat[r["observations"]].append((r["cold_ms"], r["warm_ms"]))
    print("\n### Suggestion latency, 10 dimensions, one suggestion (ms; median and max over reps)\n")
    print("| observations | cold (fresh sampler, full fit) | warm (previous fit reused) |")
    print("|---|---|---|")
    for n in sorted(lat):
        cold = [c for c, _ in lat[n]]
        warm = [w for _, w in lat[n]]
        print("| %d | %.0f (max %.0f) | %.0f (max %.0f) |" % (
            n, np.median(cold), max(cold), np.median(warm), max(warm)))


def describe_params(params):
    kinds = defaultdict(int)
    for p in params:
        k = p["kind"]
        if p.get("scale") in ("log", "reverse_log"):
            k += " " + p["scale"]
        kinds[k] += 1
        for c in p["children"]:
            kinds["conditional child"] += 1
            for k2, n in describe_params([c["param"]]).items():
                kinds[k2] += n
    return kinds


def print_spec(path):
    """The suite's entries, from `tune-bench spec` output."""
    print("| entry | parameters | optimum | noise sd | per round | source |")
    print("|---|---|---|---|---|---|")
    for e in json.load(open(path)):
        kinds = ", ".join("%d %s" % (n, k) for k, n in describe_params(e["params"]).items())
        print("| %s | %s | %.6g | %s | %d | %s |" % (e["name"], kinds, e["optimum"],
                                                   fmt(e["noise"]), e["parallel"], e["source"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--stoker", default="stoker-gp",
                    help="candidates, comma-separated; the full table is printed for the last")
    ap.add_argument("--latency")
    ap.add_argument("--spec", help="also print the suite's entries from `tune-bench spec`")
    args = ap.parse_args()
    if args.spec:
        print_spec(args.spec)
        print()
    runs, entries, seeds = load(args.files)
    candidates = args.stoker.split(",")
    per_method = defaultdict(list)
    for (m, _), s in seeds.items():
        per_method[m].append(len(s))
    print("Seeds per entry: %s\n" % ", ".join(
        "%s %d–%d" % (m, min(n), max(n)) for m, n in sorted(per_method.items())))
    all_cells = {s: cells(runs, entries, s) for s in candidates}
    print_summary_header(len(all_cells[candidates[-1]]))
    for s in candidates:
        print_summary(all_cells[s], s)
    print("\nBy budget (%s):" % candidates[-1])
    print_by_budget(all_cells[candidates[-1]])
    print()
    print_cells(all_cells[candidates[-1]], candidates[-1])
    print_geomeans(runs, entries)
    if args.latency:
        print_latency(args.latency)


if __name__ == "__main__":
    main()
