#!/usr/bin/python3
"""Optuna side of the trial-throughput benchmark (issue #29; run.sh runs it).

The same studies as stoker_side.py, in one process: --studies studies of
--trials trials each, one float parameter x in [0, 1], maximize
score = -(x - 0.3)^2. Rows:

  inproc-tpe     a trial = ask (TPESampler, Optuna's default), evaluate the
                 objective in this process, tell. Nothing else: the ceiling.
  inproc-random  the same with RandomSampler (what RANDOM_SEARCH is).
  subproc-tpe    a trial = ask, run the benchmark's trainer.py as
                 `python3 trainer.py --x=...` (the hypertune helper on
                 PYTHONPATH, as Stoker gives it), read its metric back from
                 the hypertune file, tell. --workers threads run studies side
                 by side (default: one per CPU), so the interpreter starts can
                 use every core, as Stoker's trials do.

Each row is timed from before the first study is created to after the last
trial is told; `import optuna` is not counted.

  /usr/bin/python3 bench/trial_throughput/optuna_ceiling.py [--studies 30]
      [--trials 30] [--rows inproc-tpe,inproc-random,subproc-tpe] [--out o.json]

Needs Debian's python3-optuna (apt-get install -y python3-optuna).
"""
import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))

warnings.filterwarnings("ignore")
import optuna  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def objective_value(x):
    return -(x - 0.3) ** 2


def sampler(kind, seed):
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(kind)


def inproc(args, kind):
    def objective(trial):
        return objective_value(trial.suggest_float("x", 0.0, 1.0))

    t0 = time.perf_counter()
    best = []
    for i in range(args.studies):
        study = optuna.create_study(direction="maximize", sampler=sampler(kind, i))
        study.optimize(objective, n_trials=args.trials)
        best.append(study.best_value)
    wall = time.perf_counter() - t0
    return wall, args.studies * args.trials, best


def subproc(args, kind):
    tmp = tempfile.mkdtemp(prefix="optuna-ceiling-")
    env = dict(os.environ)
    src_python = os.path.join(SOURCE, "src", "python")
    env["PYTHONPATH"] = src_python + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("TRACE_DIR", None)
    failures = []
    lock = threading.Lock()
    done = [0]

    def run_trial(trial, worker):
        x = trial.suggest_float("x", 0.0, 1.0)
        metric = os.path.join(tmp, "w%d.metrics" % worker)
        e = dict(env, CLOUD_ML_HP_METRIC_FILE=metric, CLOUD_ML_TRIAL_ID=str(trial.number + 1))
        r = subprocess.run([args.python, args.trainer, "--x=%r" % x], env=e,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("trainer exited %d: %s" % (r.returncode, r.stderr[-500:]))
        with open(metric) as f:
            last = json.loads(f.read().splitlines()[-1])
        with lock:
            done[0] += 1
        return float(last["score"])

    studies = queue.Queue()
    for i in range(args.studies):
        studies.put(i)
    best = {}

    def worker(w):
        while True:
            try:
                i = studies.get_nowait()
            except queue.Empty:
                return
            try:
                study = optuna.create_study(direction="maximize", sampler=sampler(kind, i))
                study.optimize(lambda t: run_trial(t, w), n_trials=args.trials, catch=())
                best[i] = study.best_value
            except Exception as ex:  # noqa: BLE001
                with lock:
                    failures.append(repr(ex))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    if failures:
        raise SystemExit("subprocess trials failed: %s" % failures[:3])
    return wall, done[0], [best[i] for i in sorted(best)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--studies", type=int, default=30)
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--rows", default="inproc-tpe,inproc-random,subproc-tpe")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="threads of the subprocess rows (studies side by side)")
    p.add_argument("--python", default="/usr/bin/python3", help="the subprocess rows' interpreter")
    p.add_argument("--trainer", default=os.path.join(HERE, "trainer.py"))
    p.add_argument("--out")
    args = p.parse_args()
    result = {"optuna": optuna.__version__, "python": sys.version.split()[0],
              "studies": args.studies, "trials_per_study": args.trials,
              "workers": args.workers, "loadavg_at_start": os.getloadavg(),
              "cpus": os.cpu_count(), "rows": {}}
    for row in [r for r in args.rows.split(",") if r]:
        mode, kind = row.split("-", 1)
        wall, n, best = (inproc if mode == "inproc" else subproc)(args, kind)
        result["rows"][row] = {"wall_s": wall, "trials": n, "trials_per_s": n / wall,
                               "mean_best_score": sum(best) / len(best) if best else None}
        print("%-14s %5d trials in %8.3f s: %9.1f trials/s" % (row, n, wall, n / wall),
              file=sys.stderr, flush=True)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
