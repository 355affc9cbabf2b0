#!/usr/bin/python3
"""Optuna side of the tuning benchmark (bench/tune/run.sh).

Runs Optuna samplers on the same test functions, with the same parameter
definitions (bounds, log scales, integer and categorical levels), as
tune_bench.cc, and writes one JSON object per run (JSON lines):
  {"method", "mode", "function", "seed", "regret": {"25": r, "50": r, "100": r}}
Budgets 25 and 50 are read off the 100-trial run as the best value after the
first 25 / 50 trials: none of these samplers is told the budget, so a 25-trial
study is exactly the first 25 trials of a 100-trial one with the same seed.

Run with Debian's /usr/bin/python3 (python3-optuna, python3-numpy).
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)

BUDGETS = [25, 50, 100]


# --- test functions: (name, optimum, suggest(trial) -> params, value(params)) ---
def branin(p):
    x1, x2 = p["x1"], p["x2"]
    a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5.0 / math.pi
    r, s, t = 6.0, 10.0, 1.0 / (8 * math.pi)
    return a * (x2 - b * x1 * x1 + c * x1 - r) ** 2 + s * (1 - t) * math.cos(x1) + s


H_ALPHA = [1.0, 1.2, 3.0, 3.2]
H_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
       [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
H_P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
       [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]


def hartmann6(p):
    x = [p["x%d" % j] for j in range(6)]
    total = 0.0
    for i in range(4):
        inner = sum(H_A[i][j] * (x[j] - 1e-4 * H_P[i][j]) ** 2 for j in range(6))
        total += H_ALPHA[i] * math.exp(-inner)
    return -total


def rosenbrock4(p):
    x = [p["x%d" % j] for j in range(4)]
    return sum(100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(3))


def ackley5(p):
    x = [p["x%d" % j] for j in range(5)]
    d = len(x)
    s1 = sum(v * v for v in x) / d
    s2 = sum(math.cos(2 * math.pi * v) for v in x) / d
    return -20.0 * math.exp(-0.2 * math.sqrt(s1)) - math.exp(s2) + 20.0 + math.e


MIXED_CENTER = {"sgd": -1.5, "adam": -3.5, "rmsprop": -3.0}
MIXED_OFFSET = {"sgd": 0.3, "adam": 0.0, "rmsprop": 0.1}


def mixed(p):
    # Like a training run's loss: the best learning rate depends on the optimizer.
    lr, dropout, layers, opt = p["lr"], p["dropout"], p["layers"], p["optimizer"]
    return ((math.log10(lr) - MIXED_CENTER[opt]) ** 2 + 4.0 * (dropout - 0.3) ** 2
            + 0.1 * (layers - 4) ** 2 + MIXED_OFFSET[opt])


def box(names, lo, hi):
    def suggest(trial):
        return {n: trial.suggest_float(n, lo[i], hi[i]) for i, n in enumerate(names)}
    return suggest


def mixed_suggest(trial):
    return {
        "lr": trial.suggest_float("lr", 1e-5, 1e-1, log=True),
        "dropout": trial.suggest_float("dropout", 0.0, 0.9),
        "layers": trial.suggest_int("layers", 1, 8),
        "optimizer": trial.suggest_categorical("optimizer", ["sgd", "adam", "rmsprop"]),
    }


FUNCTIONS = {
    "branin": (0.397887357729738, box(["x1", "x2"], [-5, 0], [10, 15]), branin),
    "hartmann6": (-3.32236801141551, box(["x%d" % j for j in range(6)], [0] * 6, [1] * 6), hartmann6),
    "rosenbrock4": (0.0, box(["x%d" % j for j in range(4)], [-5] * 4, [10] * 4), rosenbrock4),
    "ackley5": (0.0, box(["x%d" % j for j in range(5)], [-32.768] * 5, [32.768] * 5), ackley5),
    "mixed": (0.0, mixed_suggest, mixed),
}


def make_sampler(method, seed):
    if method == "optuna-tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if method == "optuna-mvtpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if method == "optuna-cmaes":
        # Categorical parameters (the mixed function's optimizer) are sampled by
        # CmaEsSampler's independent fallback (RandomSampler); the rest by CMA-ES.
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if method == "optuna-random":
        return optuna.samplers.RandomSampler(seed=seed)
    if method == "optuna-tpe-cl":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    raise ValueError(method)


def run_one(method, fname, seed, budget, batch):
    optimum, suggest, value = FUNCTIONS[fname]
    study = optuna.create_study(direction="minimize", sampler=make_sampler(method, seed))
    values = []
    while len(values) < budget:
        n = min(batch, budget - len(values))
        trials = [study.ask() for _ in range(n)]  # all asked before any is told
        params = [suggest(t) for t in trials]
        for t, p in zip(trials, params):
            v = value(p)
            study.tell(t, v)
            values.append(v)
    best = np.minimum.accumulate(np.array(values))
    return {str(b): float(best[b - 1] - optimum) for b in BUDGETS if b <= budget}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--functions", default=",".join(FUNCTIONS))
    ap.add_argument("--methods", default="optuna-tpe,optuna-mvtpe,optuna-cmaes,optuna-random,optuna-tpe-cl")
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    for fname in args.functions.split(","):
        for method in args.methods.split(","):
            mode, batch = ("parallel", 8) if method == "optuna-tpe-cl" else ("sequential", 1)
            start = time.time()
            for seed in range(args.seeds):
                regret = run_one(method, fname, seed, args.budget, batch)
                out.write(json.dumps({"method": method, "mode": mode, "function": fname,
                                      "seed": seed, "regret": regret}) + "\n")
                out.flush()
            print("%s %s %.1fs" % (fname, method, time.time() - start), file=sys.stderr)


if __name__ == "__main__":
    main()
