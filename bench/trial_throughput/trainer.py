"""The trivial trial of the trial-throughput benchmark (bench/trial_throughput).

Takes --x, reports score = -(x - 0.3)^2 through the hypertune helper (the
cloudml-hypertune file protocol, as a Vertex trainer does) and exits. Both
sides run this same file: Stoker as every trial's trainer, and
optuna_ceiling.py's subprocess row as `python3 trainer.py --x=...`.

With TRACE_DIR set it also writes TRACE_DIR/<CLOUD_ML_JOB_ID>.json with its
own first-line and last-line time.time() stamps (start latency, run time).
"""
import time

T_FIRST = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import hypertune  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
a = p.parse_args()
score = -(a.x - 0.3) ** 2
hypertune.HyperTune().report_hyperparameter_tuning_metric("score", score, global_step=1)
trace = os.environ.get("TRACE_DIR")
if trace:
    name = os.environ.get("CLOUD_ML_JOB_ID") or str(os.getpid())
    tmp = os.path.join(trace, "." + name + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"job": name, "trial": os.environ.get("CLOUD_ML_TRIAL_ID", ""),
                   "first_line": T_FIRST, "last_line": time.time()}, f)
    os.replace(tmp, os.path.join(trace, name + ".json"))
