#!/usr/bin/python3
"""Optuna side of the tuning benchmark (bench/tune/run.sh).

The suite is defined once, in suite.cc: this script reads the search spaces
from `tune-bench spec` and has every point evaluated by `tune-bench eval`
(one long-lived process per worker), so functions, shifts, noise and optima
are never restated here. Writes one JSON object per run (JSON lines):
  {"method", "mode", "function", "seed", "regret": {"20": r, ..., "100": r}}
Regret is the noise-free value of the incumbent (the trial with the best
observed value) minus the optimum. The smaller budgets are read off the
100-trial run: none of these samplers is told the budget. Entries with
"parallel": p ask p trials per round (study.ask() p times) before telling any.

Run with Debian's /usr/bin/python3 (python3-optuna, python3-numpy; QMC needs
python3-scipy).
"""
import argparse
import json
import multiprocessing
import subprocess
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)

BUDGETS = [20, 30, 50, 100]
SEQUENTIAL = ["optuna-tpe", "optuna-mvtpe", "optuna-cmaes", "optuna-qmc", "optuna-random"]
PARALLEL_ONLY = ["optuna-tpe-cl"]  # constant liar: meant for parallel studies

_evaluator = None  # this worker's `tune-bench eval` process
_spec = None


def make_sampler(method, seed):
    s = optuna.samplers
    if method == "optuna-tpe":
        return s.TPESampler(seed=seed)
    if method == "optuna-mvtpe":
        return s.TPESampler(seed=seed, multivariate=True, group=True)
    if method == "optuna-tpe-cl":
        return s.TPESampler(seed=seed, constant_liar=True)
    if method == "optuna-cmaes":
        # Categorical and conditional parameters go to CmaEsSampler's
        # independent fallback (RandomSampler); the rest through CMA-ES.
        return s.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if method == "optuna-qmc":
        return s.QMCSampler(qmc_type="sobol", scramble=True, seed=seed,
                            warn_independent_sampling=False)
    if method == "optuna-random":
        return s.RandomSampler(seed=seed)
    raise ValueError(method)


def suggest_one(trial, p):
    kind, name = p["kind"], p["name"]
    if kind == "double":
        if p["scale"] == "reverse_log":
            raise ValueError("Optuna has no reverse-log scale: %s" % name)
        return trial.suggest_float(name, p["min"], p["max"], log=p["scale"] == "log")
    if kind == "integer":
        return trial.suggest_int(name, int(p["min"]), int(p["max"]), log=p["scale"] == "log")
    if kind == "discrete":
        return trial.suggest_categorical(name, p["values"])
    return trial.suggest_categorical(name, p["categories"])


def suggest(trial, params, out):
    """Suggests `params` and, depth first, the children their values activate."""
    for p in params:
        v = suggest_one(trial, p)
        out[p["name"]] = v
        for c in p["children"]:
            parents = c["parent_categories"] if p["kind"] == "categorical" else c["parent_values"]
            if v in parents:
                suggest(trial, [c["param"]], out)
    return out


def evaluate(fname, seed, trial, params):
    _evaluator.stdin.write(json.dumps({"function": fname, "seed": seed, "trial": trial,
                                       "params": params}) + "\n")
    _evaluator.stdin.flush()
    r = json.loads(_evaluator.stdout.readline())
    return r["observed"], r["true"]


def run_one(task):
    method, entry, seed, budget = task
    study = optuna.create_study(direction="minimize", sampler=make_sampler(method, seed))
    incumbent, best_seen, best_true = [], float("inf"), float("inf")
    start = time.time()
    while len(incumbent) < budget:
        n = min(entry["parallel"], budget - len(incumbent))
        trials = [study.ask() for _ in range(n)]  # all asked before any is told
        params = [suggest(t, entry["params"], {}) for t in trials]
        for t, p in zip(trials, params):
            seen, true = evaluate(entry["name"], seed, len(incumbent), p)
            study.tell(t, seen)
            if seen < best_seen:
                best_seen, best_true = seen, true
            incumbent.append(best_true)
    regret = {str(b): incumbent[b - 1] - entry["optimum"] for b in BUDGETS if b <= budget}
    return {"method": method, "mode": "parallel" if entry["parallel"] > 1 else "sequential",
            "function": entry["name"], "seed": seed, "regret": regret,
            "seconds": round(time.time() - start, 3)}


def init_worker(bench):
    global _evaluator
    _evaluator = subprocess.Popen([bench, "eval"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build-tune/bin/tune-bench")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--functions", default="", help="comma-separated suite entries (default all)")
    ap.add_argument("--methods", default=",".join(SEQUENTIAL + PARALLEL_ONLY))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default="-")
    ap.add_argument("--skip", help="JSON lines of runs already done: their (method, entry, "
                    "seed) are not run again")
    args = ap.parse_args()
    spec = json.loads(subprocess.run([args.bench, "spec"], check=True, capture_output=True,
                                     text=True).stdout)
    wanted = set(filter(None, args.functions.split(",")))
    skip = set()
    for line in open(args.skip) if args.skip else []:
        r = json.loads(line)
        skip.add((r["method"], r["function"], r["seed"]))
    tasks = []
    for entry in spec:
        if wanted and entry["name"] not in wanted:
            continue
        for method in args.methods.split(","):
            if method in PARALLEL_ONLY and entry["parallel"] == 1:
                continue
            tasks += [(method, entry, seed, args.budget) for seed in range(args.seeds)
                      if (method, entry["name"], seed) not in skip]
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    start = time.time()
    with multiprocessing.Pool(args.jobs, initializer=init_worker, initargs=(args.bench,)) as pool:
        for i, record in enumerate(pool.imap_unordered(run_one, tasks, chunksize=1)):
            out.write(json.dumps(record) + "\n")
            out.flush()
            if (i + 1) % 50 == 0 or i + 1 == len(tasks):
                print("optuna: %d/%d studies, %.0fs" % (i + 1, len(tasks), time.time() - start),
                      file=sys.stderr)


if __name__ == "__main__":
    main()
