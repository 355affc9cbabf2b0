#!/usr/bin/env python3
"""Warm vs cold trial starts (docs/warm-starts.md), measured with the real
stoker-run and stokerd.

1. Start latency: a replica launch (`stoker-run --replica-dir D`, what the
   local executor runs) to the first line of the trainer's own code with
   `import torch` done; with --gpu also to the end of its first training
   step of a small CNN on the GPU. Cold: launch.json without "warm". Warm:
   with it, once the zygote is up (its first start is reported apart).
2. A study of --trials short trials end to end (submit to SUCCEEDED)
   through a real stokerd, with warm_starts on and off.

  python3 bench/warm_start/bench.py --bin-dir build/bin [--gpu] [--runs 20]
      [--trials 16 --parallel 2] [--python /usr/bin/python3] [--out r.json]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-1.py310:latest"

# The trainer: its first line after `import torch` records the time; with
# --gpu it then runs one training step of a small CNN and records that too.
TRAINER = r'''
import torch
import json, os, sys, time
t_first = time.time()
out = {"first_line": t_first}
if os.environ.get("BENCH_GPU") == "1":
    import torch.nn as nn
    torch.empty(1, device="cuda")  # CUDA initialised, its context made
    torch.cuda.synchronize()
    out["cuda_ready"] = time.time()
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    out["first_step"] = time.time()
with open(os.environ["BENCH_MARK"], "w") as f:
    json.dump(out, f)
'''

# A short trial: a few training steps, then its metric.
TRIAL = r'''
import argparse, os
import torch
import hypertune
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
a = p.parse_args()
dev = "cuda" if os.environ.get("BENCH_GPU") == "1" else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                            torch.nn.Linear(16, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
x = torch.randn(32, 3, 32, 32, device=dev)
y = torch.randint(0, 10, (32,), device=dev)
for _ in range(20):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
hypertune.HyperTune().report_hyperparameter_tuning_metric("loss", float(loss), global_step=20)
'''


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))]


def summary(values):
    return {"n": len(values), "p50": pct(values, 50), "p99": pct(values, 99),
            "min": min(values), "max": max(values), "mean": statistics.mean(values)}


def launch_latency(args, tmp, warm, runs):
    trainer = os.path.join(tmp, "trainer.py")
    with open(trainer, "w") as f:
        f.write(TRAINER)
    warm_dir = os.path.join(tmp, "warm")
    out = []
    for i in range(runs):
        d = os.path.join(tmp, "%s-%d" % ("warm" if warm else "cold", i))
        os.makedirs(d)
        os.chmod(d, 0o700)
        mark = os.path.join(tmp, "mark-%s-%d.json" % ("warm" if warm else "cold", i))
        env = {"PATH": os.path.dirname(args.python) + ":/usr/local/bin:/usr/bin:/bin",
               "BENCH_MARK": mark, "BENCH_GPU": "1" if args.gpu else "0"}
        spec = {"argv": [args.python, trainer], "env": env}
        if warm:
            spec["warm"] = {"preload": ["torch", "numpy"], "dir": warm_dir,
                            "zygote": os.path.join(args.source, "src", "python",
                                                   "stoker_zygote.py"),
                            "python": args.python, "idle_seconds": 300}
        with open(os.path.join(d, "launch.json"), "w") as f:
            json.dump(spec, f)
        t0 = time.time()
        subprocess.run([os.path.join(args.bin_dir, "stoker-run"), "--replica-dir", d], check=True)
        try:
            with open(mark) as f:
                m = json.load(f)
        except OSError:
            raise SystemExit("run %s failed:\n%s" % (d, open(os.path.join(d, "output.log")).read()))
        rec = {"first_line": m["first_line"] - t0}
        for key in ("cuda_ready", "first_step"):
            if key in m:
                rec[key] = m[key] - t0
        with open(os.path.join(d, "trainer.json")) as f:
            rec["note"] = json.load(f).get("start_note", "")
        rec["warm"] = rec["note"].startswith("warm start:")
        out.append(rec)
    return out


def api(url, token, method, path, body=None):
    req = urllib.request.Request(url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"authorization": "Bearer " + token,
                                          "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def study(args, tmp, warm):
    data = os.path.join(tmp, "data-%s" % ("warm" if warm else "cold"))
    os.makedirs(data)
    trial = os.path.join(tmp, "trial.py")
    with open(trial, "w") as f:
        f.write(TRIAL)
    config = ("default_unix_user: root\nallow_root_trainers: true\npoll_interval_ms: 20\n"
              "cpu_oversubscription: 16\nwarm_starts: %s\nimages:\n  - match: \"*\"\n"
              "    python: %s\n" % ("true" if warm else "false", args.python))
    with open(os.path.join(data, "config.yaml"), "w") as f:
        f.write(config)
    log = open(os.path.join(data, "stokerd.log"), "wb")
    proc = subprocess.Popen([os.path.join(args.bin_dir, "stokerd"), "--data-dir", data,
                             "--listen", "127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        addr = os.path.join(data, "stokerd.addr")
        deadline = time.time() + 30
        url = None
        while time.time() < deadline and url is None:
            try:
                u = open(addr).read().strip()
                urllib.request.urlopen(u + "/healthz", timeout=2)
                url = u
            except OSError:
                time.sleep(0.05)
        token = open(os.path.join(data, "token")).read().strip()
        machine = {"machineType": "n1-standard-4"}
        if args.gpu:
            machine.update(acceleratorType=args.accelerator, acceleratorCount=args.gpu_share)
        body = {
            "displayName": "bench", "maxTrialCount": args.trials,
            "parallelTrialCount": args.parallel,
            "studySpec": {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
                          "parameters": [{"parameterId": "lr", "doubleValueSpec": {
                              "minValue": 0.001, "maxValue": 0.5}}],
                          "algorithm": "RANDOM_SEARCH"},
            "trialJobSpec": {"workerPoolSpecs": [{
                "machineSpec": machine, "replicaCount": 1,
                "containerSpec": {"imageUri": IMAGE, "command": ["python3", trial],
                                  "env": [{"name": "BENCH_GPU",
                                           "value": "1" if args.gpu else "0"}]}}]},
        }
        t0 = time.time()
        sid = api(url, token, "POST", "/v1/projects/p/locations/l/hyperparameterTuningJobs",
                  body)["name"].rsplit("/", 1)[1]
        while True:
            s = api(url, token, "GET", "/v1/projects/p/locations/l/hyperparameterTuningJobs/" + sid)
            if s["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
                break
            time.sleep(0.05)
        wall = time.time() - t0
        notes = []
        for t in s.get("trials", []):
            job = t["customJob"].rsplit("/", 1)[1]
            ev = api(url, token, "GET", "/v1/projects/p/locations/l/customJobs/%s/events" % job)
            notes += [e["reason"] for e in ev["events"] if "start:" in e["reason"]]
        return {"state": s["state"], "wall_s": wall, "trials": len(s.get("trials", [])),
                "warm_notes": sum("warm start:" in n for n in notes),
                "cold_notes": [n for n in notes if "cold start:" in n][:3]}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        # The data dir (and the zygote's socket) goes: its zygote leaves.
        shutil.rmtree(data, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--source", default=SOURCE)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--accelerator", default="NVIDIA_H100_80GB")
    p.add_argument("--gpu-share", type=float, default=0.25)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--skip-study", action="store_true")
    p.add_argument("--out")
    args = p.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    tmp = tempfile.mkdtemp(prefix="warm-bench-")
    os.chmod(tmp, 0o755)
    result = {"gpu": args.gpu, "python": args.python}
    try:
        cold = launch_latency(args, tmp, False, args.runs)
        first = launch_latency(args, tmp, True, 1)
        for i, r in enumerate(first):
            os.rename(os.path.join(tmp, "warm-%d" % i), os.path.join(tmp, "warm-prime-%d" % i))
            os.rename(os.path.join(tmp, "mark-warm-%d.json" % i),
                      os.path.join(tmp, "mark-warm-prime-%d.json" % i))
        warm = launch_latency(args, tmp, True, args.runs)
        if not all(r["warm"] for r in warm) or any(r["warm"] for r in cold):
            for name in os.listdir(os.path.join(tmp, "warm")):
                if name.endswith(".log"):
                    print(open(os.path.join(tmp, "warm", name)).read(), file=sys.stderr)
            raise SystemExit("not warm/cold as asked: %s" % json.dumps([cold, first, warm]))
        result["first_warm_with_zygote_start"] = first[0]
        for name, runs in (("cold", cold), ("warm", warm)):
            result[name] = {"first_line": summary([r["first_line"] for r in runs])}
            if args.gpu:
                for key in ("cuda_ready", "first_step"):
                    result[name][key] = summary([r[key] for r in runs])
        result["warm_note_example"] = warm[-1]["note"]
        print(json.dumps(result, indent=1), flush=True)
        if not args.skip_study:
            result["study_cold"] = study(args, tmp, False)
            print(json.dumps(result["study_cold"]), flush=True)
            result["study_warm"] = study(args, tmp, True)
            print(json.dumps(result["study_warm"]), flush=True)
    finally:
        subprocess.run(["pkill", "-f", "stoker_zygote.py --socket " + tmp], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
